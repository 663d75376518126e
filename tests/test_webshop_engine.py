"""Search ranking, pages and actions of the WebShop engine (webshop_server)."""

from __future__ import annotations

import itertools
import math
import re
import time
from pathlib import Path

import pytest

from webshop_server.actions import MAX_ACTION_CHARS, parse_action
from webshop_server.catalog import Catalog, load_catalog_files
from webshop_server.engine import SessionState, WebShopEngine
from webshop_server.goals import GoalSet
from webshop_server.search import SearchIndex, product_document

FIXTURES = Path(__file__).parent / "webshop_fixtures"


def lucene_bm25(query: list[str], docs: list[list[str]], k1: float = 0.9, b: float = 0.4) -> list[float]:
    """Lucene's BM25 (idf = ln(1 + (N - df + .5) / (df + .5)), no (k1 + 1) factor), by hand."""
    n, avgdl = len(docs), sum(map(len, docs)) / len(docs)
    scores = []
    for doc in docs:
        score = 0.0
        for term in query:
            df = sum(term in d for d in docs)
            tf = doc.count(term)
            if tf:
                idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
                score += idf * tf / (tf + k1 * (1 - b + b * len(doc) / avgdl))
        scores.append(score)
    return scores


def test_bm25_matches_lucene_by_hand():
    texts = [
        "red running shoes for women",  # red run shoe women ("for" is a stop word)
        "blue cotton shirt size 8",
        "running watch with gps",  # run watch gp
        "shoes shoes shoes",
        "women's leather shoes",  # possessive dropped: women leather shoe
    ]
    stemmed = [["red", "run", "shoe", "women"], ["blue", "cotton", "shirt", "size", "8"], ["run", "watch", "gp"],
               ["shoe", "shoe", "shoe"], ["women", "leather", "shoe"]]  # fmt: skip
    index = SearchIndex(texts)
    expected = lucene_bm25(["run", "shoe"], stemmed)
    assert list(index.scores("Running Shoes")) == pytest.approx(expected, rel=1e-5)
    order = sorted((i for i in range(5) if expected[i] > 0), key=lambda i: (-expected[i], i))
    assert list(index.search("running shoes")) == order
    assert index.search("size 8") == (1,)  # single characters are tokens (Lucene keeps them)
    assert index.search("the of and") == () and index.search("zzzz") == ()
    assert index.search("shoes", k=2) == (3, 4)  # tf 3 first, then the shorter of the tf-1 documents


def test_ties_go_to_the_earlier_product():
    index = SearchIndex(["green hat", "green hat", "green hat"])
    assert index.search("hat") == (0, 1, 2)


@pytest.fixture(scope="module")
def fixture_engine() -> WebShopEngine:
    catalog, _ = load_catalog_files(FIXTURES, seed=0)
    return WebShopEngine(catalog, GoalSet(catalog, seed=0))


def test_document_text(fixture_engine):
    shoe = fixture_engine.catalog.by_asin["B000000001"]
    assert product_document(shoe) == (
        "acme trail running shoe for women a light trail shoe with a grippy rubber sole. rubber sole "
        "color: black, navy | white, and size: 8, 9"
    )


def goal_of(engine: WebShopEngine, asin: str, **options: str) -> int:
    return next(
        i
        for i, g in enumerate(engine.goals)
        if g["asin"] == asin and all(g["goal_options"].get(k) == v for k, v in options.items())
    )


def test_pages_and_actions(fixture_engine):
    engine = fixture_engine
    index = goal_of(engine, "B000000001", color="navy | white", size="9")
    session = engine.new_session(index)
    ins = session.goal["instruction_text"]
    assert session.page.text == f"WebShop [SEP] Instruction: [SEP] {ins} [SEP] Search"
    assert session.page.available_actions() == {"has_search_bar": True, "clickables": ["search"]}
    assert not engine.step(session, "click[search]").valid  # a no-op in the original

    result = engine.step(session, "search[Trail Shoe]")
    assert result.valid and not result.done and result.reward == 0
    assert result.observation == (
        f"Instruction: [SEP] {ins} [SEP] Back to Search [SEP] Page 1 (Total results: 1) [SEP] Next > [SEP] "
        "B000000001 [SEP] Acme Trail Running Shoe for Women [SEP] $19.99 to $29.5"
    )
    assert result.available_actions["clickables"] == ["back to search", "next >", "b000000001"]

    # Next > always shows (quirk): page 2 is empty and offers < Prev.
    page2 = engine.step(session, "click[next >]")
    assert "Page 2 (Total results: 1) [SEP] < Prev [SEP] Next >" in page2.observation
    assert page2.available_actions["clickables"] == ["back to search", "< prev", "next >"]
    assert "Page 1 " in engine.step(session, "click[< prev]").observation

    item = engine.step(session, "click[b000000001]")
    assert item.observation == (
        f"Instruction: [SEP] {ins} [SEP] Back to Search [SEP] < Prev [SEP] color [SEP] black [SEP] navy | white "
        "[SEP] size [SEP] 8 [SEP] 9 [SEP] Acme Trail Running Shoe for Women [SEP] Price: $19.99 to $29.5 [SEP] "
        "Rating: N.A. [SEP] Description [SEP] Features [SEP] Reviews [SEP] Buy Now"
    )
    assert item.available_actions["clickables"] == [
        "back to search", "< prev", "description", "features", "reviews", "buy now",
        "black", "navy | white", "8", "9",
    ]  # fmt: skip
    assert engine.step(session, "click[navy | white]").valid
    assert (
        engine.step(session, "click[8]").valid and engine.step(session, "click[9]").valid
    )  # last click wins
    assert session.state.options == {"color": "navy | white", "size": "9"}

    features = engine.step(session, "click[features]").observation
    assert features.endswith("< Prev [SEP] Rubber sole [SEP] Breathable mesh upper")
    assert engine.step(session, "click[< prev]").observation == item.observation  # options kept (not shown)
    assert session.state.options == {"color": "navy | white", "size": "9"}
    reviews = engine.step(session, "click[reviews]").observation
    assert reviews.endswith("Back to Search [SEP] < Prev")
    engine.step(session, "click[< prev]")

    done = engine.step(session, "click[buy now]")
    assert done.done and done.valid and done.reward == pytest.approx(1.0)
    assert done.observation.startswith(
        "Thank you for shopping with us! [SEP] Your code: [SEP] None [SEP] (Paste it in your MTurk interface.) "
        '[SEP] Purchased [SEP] asin [SEP] B000000001 [SEP] options [SEP] {"color": "navy | white", "size": "9"}'
    )
    assert done.observation.endswith(
        "Your score (min 0.0, max 1.0) [SEP] 1.0 [SEP] Reward Details [SEP] None"
    )
    assert done.available_actions == {"has_search_bar": False, "clickables": []}
    after = engine.step(session, "search[more]")
    assert not after.valid and after.done and after.reward == 0


def test_action_parsing_quirks(fixture_engine):
    session = fixture_engine.new_session(0)
    for bad in ("", "search[]", "Search[shoe]", "click", "buy now", "click[b000000001]", "[x]"):
        result = fixture_engine.step(session, bad)
        assert not result.valid and session.state.page == "search", bad
    # Greedy, anchored at the start: text after "]" is ignored; the argument is lower-cased.
    assert fixture_engine.step(session, "search[TRAIL shoe] please").valid
    assert session.state.keywords == "trail shoe"
    # Search works on every page and clears the product and options.
    fixture_engine.step(session, "click[b000000001]")
    fixture_engine.step(session, "click[black]")
    assert fixture_engine.step(session, "search[coffee table]").valid
    assert (session.state.page, session.state.asin, session.state.options) == ("results", None, {})
    # Back to search clears everything.
    fixture_engine.step(session, "click[back to search]")
    assert session.state == SessionState(goal_index=0)


def test_action_split_equals_the_original_regex():
    # Every string up to 8 characters over the characters the regex cares about, plus
    # a letter: the linear split must give the regex's groups, or no match where it has none.
    original = re.compile(r"(.+)\[(.+)\]")
    for length in range(9):
        for chars in itertools.product("a[]\n", repeat=length):
            action = "".join(chars)
            match = original.match(action)
            assert parse_action(action) == (match.groups() if match else None), repr(action)
    for action in ("search[TRAIL shoe] please", "a[b] [c]", "click[x]]", "ünï[✓]\r", "x[y\n]z[w]"):
        match = original.match(action)
        assert parse_action(action) == (match.groups() if match else None), action


@pytest.mark.parametrize(
    "shape", ["search" + "[" * 2**20, "[" * 2**20, "click[" + "[" * 2**20 + "\n]", "x[" * 2**19]
)
def test_action_split_is_linear(shape):
    # The regex needs minutes on these (30 s at 64 kB); a linear scan of 1 MB, milliseconds.
    start = time.perf_counter()
    parse_action(shape)
    assert time.perf_counter() - start < 0.5


def test_actions_over_the_cap_are_invalid(fixture_engine):
    session = fixture_engine.new_session(0)
    before = session.observation
    query = "x" * (MAX_ACTION_CHARS - len("search[]"))
    longest = f"search[{query}]"
    assert len(longest) == MAX_ACTION_CHARS
    for action in (longest + " ", "search[shoe]" + " " * MAX_ACTION_CHARS, "[" * 2**20):
        result = fixture_engine.step(session, action)
        assert not result.valid and result.observation == before and session.state.page == "search"
    assert fixture_engine.step(session, longest).valid  # at the cap it is still read
    assert session.state.keywords == query


def test_special_searches(fixture_engine):
    assert fixture_engine.search("<c> furniture") == [2]
    assert fixture_engine.search("<q> body scrub") == [3]
    assert sorted(fixture_engine.search("<r>")) == [0, 1, 2, 3]
    assert fixture_engine.search("<a> anything") == []  # the original text env crashes


def test_restore_round_trip(fixture_engine):
    session = fixture_engine.new_session(1)
    for action in ("search[shoe]", "click[b000000001]", "click[black]", "click[description]"):
        fixture_engine.step(session, action)
    copy = fixture_engine.restore(session.state.to_dict())
    assert copy.page.text == session.page.text and copy.state == session.state


def test_unpriced_goal_scores_below_one(fixture_engine):
    # Buying the table for the scrub goal: a different type, so a low score.
    index = goal_of(fixture_engine, "B000000004")
    session = fixture_engine.new_session(index)
    for action in ("search[coffee table]", "click[b000000003]", "click[buy now]"):
        result = fixture_engine.step(session, action)
    assert result.done and result.reward < 0.5


def test_generated_engine_startup_and_shape():
    engine = WebShopEngine.generated(num_products=200, seed=1)
    assert len(engine.catalog) == 200 and len(engine.goals) > 200
    assert isinstance(engine.catalog, Catalog)
    session = engine.new_session(0)
    hits = engine.step(session, f"search[{session.goal['name']}]").available_actions["clickables"]
    assert session.goal["asin"].lower() in hits


def test_text_rich_mode(fixture_engine):
    index = goal_of(fixture_engine, "B000000001", color="black", size="9")
    session = fixture_engine.new_session(index, observation_mode="text_rich")
    assert session.observation.endswith("\n[button] Search [button_]\n")
    fixture_engine.step(session, "search[trail shoe]")
    fixture_engine.step(session, "click[b000000001]")
    result = fixture_engine.step(session, "click[9]")
    assert result.observation.startswith("You have clicked 9.\n")
    assert "\nsize \n  [button] 8 [button_]\n  [clicked button] 9 [clicked button_]\n" in result.observation
    assert "[button] Buy Now [button_]\n" in result.observation
    back = fixture_engine.step(session, "click[< prev]").observation  # to the results: visited asin marked
    assert "\n[clicked button] B000000001 [clicked button_]\n" in back
    with pytest.raises(ValueError, match="observation_mode"):
        fixture_engine.new_session(index, observation_mode="html")
