"""The product catalogue: the original WebShop files, or raw records in their schema.

:func:`load_products` turns raw scraped records (the ``items_shuffle*.json`` schema)
plus the attribute file (``items_ins_v2*.json``) into products the way the
original engine does: ``Title`` = name, ``Description`` = full_description,
``BulletPoints`` = small_description, a ``Price`` tag and float ``pricing`` parsed
from the ``pricing`` string, lower-cased options, ``Attributes`` (or
``['DUMMY_ATTR']``), ``Reviews = []`` and ``Rating = 'N.A.'``. The scored price of a
range is drawn once, here from a seeded RNG (the original's draw is unseeded).

Deliberate differences: ``num_products`` may be any N (the original accepts 100,
1,000 or 100,000); an asin missing from the attribute file gets ``DUMMY_ATTR`` and no
instruction (the original raises ``KeyError`` in synthetic mode); a price piece
without digits is skipped (the original raises).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Catalog", "find_data_files", "load_catalog_files", "load_products", "parse_pricing"]

_NON_PRICE = re.compile(r"[^\d.]")


def parse_pricing(pricing: str | None) -> tuple[list[float], str]:
    """Parse a raw ``pricing`` string into floats and the displayed price tag.

    >>> parse_pricing("$19.99$27.99")
    ([19.99, 27.99], '$19.99 to $27.99')
    >>> parse_pricing("$1,299.00")
    ([1299.0], '$1299.0')
    >>> parse_pricing("")
    ([100.0], '$100.0')
    """
    values: list[float] = []
    if pricing:
        for piece in pricing.split("$")[1:]:
            digits = _NON_PRICE.sub("", piece)
            try:
                values.append(float(digits))
            except ValueError:  # the original crashes on a piece without digits
                continue
    if not values:
        return [100.0], "$100.0"
    if len(values) == 1:
        return values, f"${values[0]}"
    return values[:2], f"${values[0]} to ${values[1]}"


def _options(customization: Any) -> tuple[dict[str, list[str]], dict[str, Any]]:
    options: dict[str, list[str]] = {}
    option_to_image: dict[str, Any] = {}
    if not customization:
        return options, option_to_image
    for name, contents in customization.items():
        if contents is None:
            continue
        values = []
        for content in contents:
            value = content["value"].strip().replace("/", " | ").lower()
            values.append(value)
            option_to_image[value] = content.get("image")
        options[name.lower()] = values
    return options, option_to_image


def load_products(
    records: Sequence[Mapping[str, Any]],
    attributes: Mapping[str, Mapping[str, Any]],
    human_instructions: Mapping[str, list[dict[str, Any]]] | None = None,
    *,
    num_products: int | None = None,
    seed: int = 0,
) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """Build products from raw records, as the original ``load_products``.

    Args:
        records: Raw product dicts (``items_shuffle*.json`` schema).
        attributes: ASIN to ``{"attributes", "instruction", "instruction_attributes"}``
            (``items_ins_v2*.json`` schema).
        human_instructions: ASIN to a list of human instruction dicts
            (``items_human_ins.json`` schema), attached as ``instructions``.
        num_products: Keep only the first N records (the files are pre-shuffled).
        seed: Seed of the scored-price draws of price ranges.

    Returns:
        ``(products, product_prices)``: products in file order (asins ``nan``,
        longer than 10 characters or repeated are skipped) and asin to scored price.
    """
    if num_products is not None:
        records = records[:num_products]
    rng = random.Random(seed)
    products: list[dict[str, Any]] = []
    prices: dict[str, float] = {}
    seen: set[str] = set()
    for raw in records:
        asin = str(raw.get("asin", "nan"))
        if asin == "nan" or len(asin) > 10 or asin in seen:
            continue
        seen.add(asin)
        product = dict(raw)
        bullets = raw.get("small_description") or []
        if isinstance(bullets, str):
            bullets = [bullets]
        pricing, price_tag = parse_pricing(raw.get("pricing"))
        options, option_to_image = _options(raw.get("customization_options"))
        extra = attributes.get(asin, {})
        images = raw.get("images") or [None]
        product.update(
            asin=asin,
            Title=raw.get("name", ""),
            Description=raw.get("full_description") or "",
            BulletPoints=list(bullets),
            Reviews=[],
            Rating="N.A.",
            MainImage=images[0],
            pricing=pricing,
            Price=price_tag,
            options=options,
            option_to_image=option_to_image,
            Attributes=list(extra.get("attributes") or ["DUMMY_ATTR"]),
            instruction_text=extra.get("instruction"),
            instruction_attributes=extra.get("instruction_attributes"),
            query=str(raw.get("query", "")).lower().strip(),
            category=raw.get("category", ""),
            product_category=raw.get("product_category", ""),
        )
        if human_instructions is not None and asin in human_instructions:
            product["instructions"] = human_instructions[asin]
        prices[asin] = pricing[0] if len(pricing) == 1 else rng.uniform(pricing[0], pricing[1])
        products.append(product)
    return products, prices


@dataclass
class Catalog:
    """Loaded products, an asin index and the scored prices."""

    products: list[dict[str, Any]]
    """Products in catalogue order, with the original's derived keys."""
    prices: dict[str, float]
    """Asin to the price the reward compares with ``price_upper``."""
    by_asin: dict[str, dict[str, Any]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.by_asin = {p["asin"]: p for p in self.products}

    def __len__(self) -> int:
        return len(self.products)


def find_data_files(data_dir: str | Path) -> dict[str, Path | None]:
    """Locate the original files in ``data_dir``.

    Returns:
        ``{"products", "attributes", "human"}``; the smallest matching file of each
        kind (``items_shuffle_1000.json`` before ``items_shuffle.json``), None if absent.

    Raises:
        FileNotFoundError: if no products or attribute file is there.
    """
    data_dir = Path(data_dir)

    def pick(pattern: str) -> Path | None:
        found = sorted(data_dir.glob(pattern), key=lambda p: p.stat().st_size)
        return found[0] if found else None

    files = {
        "products": pick("items_shuffle*.json"),
        "attributes": pick("items_ins_v2*.json"),
        "human": pick("items_human_ins*.json"),
    }
    missing = [k for k in ("products", "attributes") if files[k] is None]
    if missing:
        raise FileNotFoundError(
            f"{data_dir} lacks the WebShop {' and '.join(missing)} file(s) "
            "(items_shuffle*.json, items_ins_v2*.json); pass catalog='generated' or a "
            "directory holding the original WebShop data files."
        )
    return files


def load_catalog_files(
    data_dir: str | Path, *, num_products: int | None = None, seed: int = 0
) -> tuple[Catalog, bool]:
    """Load the original files of ``data_dir`` into a :class:`Catalog`.

    Returns:
        ``(catalog, has_human)``: whether human instructions were attached.
    """
    files = find_data_files(data_dir)
    records = json.loads(files["products"].read_text())  # type: ignore[union-attr]
    attributes = json.loads(files["attributes"].read_text())  # type: ignore[union-attr]
    human = json.loads(files["human"].read_text()) if files["human"] else None
    products, prices = load_products(records, attributes, human, num_products=num_products, seed=seed)
    return Catalog(products, prices), human is not None
