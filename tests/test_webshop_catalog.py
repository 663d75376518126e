"""The original-schema loader, goals and splits, the generated shop (webshop_server)."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from webshop_server.catalog import Catalog, find_data_files, load_catalog_files, load_products, parse_pricing
from webshop_server.generator import generate_records
from webshop_server.goals import GoalSet, draw_price_upper

FIXTURES = Path(__file__).parent / "webshop_fixtures"


def shared_webshop_dir() -> Path | None:
    """``$WEBSHOP_DATA`` or ``../shared/data/webshop`` beside the checkout, if present."""
    candidates = [os.environ.get("WEBSHOP_DATA"), Path(__file__).resolve().parents[2] / "shared/data/webshop"]
    for candidate in candidates:
        if candidate and Path(candidate).is_dir():
            return Path(candidate)
    return None


@pytest.fixture(scope="module")
def fixture_catalog() -> Catalog:
    catalog, has_human = load_catalog_files(FIXTURES, seed=0)
    assert has_human
    return catalog


def test_pricing():
    assert parse_pricing("$19.99$29.50") == ([19.99, 29.5], "$19.99 to $29.5")
    assert parse_pricing("$7.50") == ([7.5], "$7.5")
    assert parse_pricing("$1$2$3") == ([1.0, 2.0], "$1.0 to $2.0")
    assert parse_pricing(None) == ([100.0], "$100.0")
    assert parse_pricing("$") == ([100.0], "$100.0")  # the original crashes here


def test_loader_derives_the_original_fields(fixture_catalog):
    products = fixture_catalog.products
    # nan, the duplicate and the 12-character asin are skipped, first occurrence wins.
    assert [p["asin"] for p in products] == ["B000000001", "B000000002", "B000000003", "B000000004"]
    shoe, tee, table, scrub = products
    assert shoe["Title"] == "Acme Trail Running Shoe for Women"
    assert shoe["Description"] == "A light trail shoe with a grippy rubber sole."
    assert shoe["BulletPoints"] == ["Rubber sole", "Breathable mesh upper"]
    assert (shoe["Price"], shoe["pricing"]) == ("$19.99 to $29.5", [19.99, 29.5])
    assert shoe["options"] == {"color": ["black", "navy | white"], "size": ["8", "9"]}
    assert shoe["option_to_image"]["navy | white"] == "navy.jpg"
    assert shoe["query"] == "women's running shoes"
    assert (shoe["Reviews"], shoe["Rating"], shoe["MainImage"]) == (
        [],
        "N.A.",
        "https://example.invalid/shoe.jpg",
    )
    assert shoe["Attributes"] == ["rubber sole", "breathable mesh"]
    assert 19.99 <= fixture_catalog.prices["B000000001"] <= 29.5
    assert tee["BulletPoints"] == ["Soft cotton"]  # a string becomes a one-item list
    assert tee["options"] == {"size": ["small", "large"]}  # null option contents skipped
    assert (tee["Price"], fixture_catalog.prices["B000000002"]) == ("$12.0", 12.0)
    assert (table["Price"], table["Attributes"], table["options"]) == ("$100.0", ["DUMMY_ATTR"], {})
    assert scrub["Price"] == "$1299.0"
    assert len(shoe["instructions"]) == 2 and "instructions" not in tee


def test_scored_price_is_seeded():
    records = json.loads((FIXTURES / "items_shuffle_fixture.json").read_text())
    attrs = json.loads((FIXTURES / "items_ins_v2_fixture.json").read_text())
    draws = {load_products(records, attrs, seed=s)[1]["B000000001"] for s in (0, 0, 1)}
    assert len(draws) == 2


def test_synthetic_goals(fixture_catalog):
    goals = GoalSet(fixture_catalog, seed=0)
    # Shoe: 2 colours × 2 sizes = 4 goals; scrub: no options, 1 goal; others lack instructions.
    assert len(goals) == 5
    shoe_goals = [g for g in goals if g["asin"] == "B000000001"]
    assert sorted(g["goal_options"]["color"] + "/" + g["goal_options"]["size"] for g in shoe_goals) == [
        "black/8", "black/9", "navy | white/8", "navy | white/9"
    ]  # fmt: skip
    goal = next(g for g in shoe_goals if g["goal_options"] == {"color": "black", "size": "8"})
    cap = goal["price_upper"]
    assert goal["instruction_text"] == (
        f"Find me running shoes with rubber sole with color: black, and size: 8, and price lower than {cap:.2f} dollars"
    )
    price = fixture_catalog.prices["B000000001"]
    assert cap in [p for p in range(10, 1000, 10) if p > price][1:4]
    scrub = next(g for g in goals if g["asin"] == "B000000004")
    # $1299 is over the ladder: no cap, no price text.
    assert scrub["price_upper"] == 1000000 and scrub["instruction_text"].endswith("natural ingredients")
    # Weight: mean over the goal's attributes of 1/count; "rubber sole" is in 4 goals.
    assert goal["weight"] == pytest.approx(1 / 4)
    assert scrub["weight"] == pytest.approx(1.0)
    assert goal["name"] == "Acme Trail Running Shoe for Women" and goal["query"] == "women's running shoes"


def test_goal_order_is_the_seed_233_shuffle(fixture_catalog):
    goals = GoalSet(fixture_catalog, seed=0)
    built = [("B000000001", c, s) for c in ("black", "navy | white") for s in ("8", "9")] + [
        ("B000000004", None, None)
    ]
    random.Random(233).shuffle(built)
    got = [(g["asin"], g["goal_options"].get("color"), g["goal_options"].get("size")) for g in goals]
    assert got == built


def test_human_goals(fixture_catalog):
    goals = GoalSet(fixture_catalog, human=True, seed=0)
    assert len(goals) == 1  # the instruction without attributes is skipped
    goal = goals[0]
    assert goal["instruction_text"].startswith(
        "i need women's trail running shoes in navy, size 9, and price"
    )
    assert (goal["goal_options"], goal["attributes"], goal["weight"]) == (
        ["navy | white", "9"],
        ["rubber sole"],
        1.0,
    )


def test_price_ladder():
    assert draw_price_upper(995.0, random.Random(0)) == (1000000.0, "")
    # 985 has one threshold above (990): no cap.
    assert draw_price_upper(985.0, random.Random(0))[0] == 1000000.0
    # 975 has two (980, 990): the larger of both.
    assert draw_price_upper(975.0, random.Random(0)) == (990.0, ", and price lower than 990.00 dollars")
    caps = {draw_price_upper(12.0, random.Random(s))[0] for s in range(50)}
    assert caps == {30.0, 40.0, 50.0}  # 2nd, 3rd or 4th threshold


def test_splits():
    records, attrs = generate_records(500, seed=0)
    catalog = Catalog(*load_products(records, attrs, seed=0))
    goals = GoalSet(catalog, seed=0)
    assert goals.split("test") == range(0, 500)
    assert goals.split("eval") == range(500, 1500)
    assert goals.split("train") == range(1500, len(goals)) and len(goals) > 1500
    with pytest.raises(ValueError, match="choose one of"):
        goals.split("valid")


def test_generated_shop_is_deterministic_and_in_the_original_schema():
    records, attrs = generate_records(50, seed=3)
    assert (records, attrs) == generate_records(50, seed=3)
    assert records != generate_records(50, seed=4)[0]
    keys = {"name", "full_description", "pricing", "images", "product_category", "small_description",
            "customization_options", "asin", "category", "query"}  # fmt: skip
    for record in records:
        assert keys <= set(record)
        assert len(record["product_category"].split(" › ")) >= 3
        assert set(attrs[record["asin"]]["instruction_attributes"]) <= set(
            attrs[record["asin"]]["attributes"]
        )
        for values in (record["customization_options"] or {}).values():
            assert all("price" in v and "value" in v for v in values)
    assert len({r["asin"] for r in records}) == 50


def test_missing_files_name_the_fix(tmp_path):
    with pytest.raises(FileNotFoundError, match="catalog='generated'"):
        find_data_files(tmp_path)


def test_loader_with_the_shared_attribute_file():
    """The real ``items_ins_v2_1000.json`` attaches attributes and instructions to our records."""
    data = shared_webshop_dir()
    if data is None or not (data / "items_ins_v2_1000.json").exists():
        pytest.skip("no ../shared/data/webshop (set WEBSHOP_DATA)")
    attrs = json.loads((data / "items_ins_v2_1000.json").read_text())
    with_instruction = [a for a, v in attrs.items() if "instruction" in v][:2]
    records = json.loads((FIXTURES / "items_shuffle_fixture.json").read_text())[:2]
    for record, asin in zip(records, with_instruction, strict=True):
        record["asin"] = asin
    products, _ = load_products(records, attrs)
    assert products[0]["Attributes"] == attrs[with_instruction[0]]["attributes"]
    assert products[0]["instruction_text"] == attrs[with_instruction[0]]["instruction"]
    assert len(GoalSet(Catalog(products, {p["asin"]: 10.0 for p in products}))) >= 2
