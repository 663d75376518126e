"""A deterministic generated shop in the original WebShop data schema.

:func:`generate_records` builds raw product records (the ``items_shuffle*.json``
schema: name, brand, full_description, small_description, pricing,
customization_options with per-value prices, product_category ``a › b › c``,
category, query, asin) and the attribute file (``items_ins_v2*.json``: attributes,
instruction, instruction_attributes). Everything is drawn from ``random.Random(seed)``,
so a seed gives the same shop in every process. The products then go through the
same loader as the original files.

>>> records, attributes = generate_records(3, seed=0)
>>> len(records), sorted(attributes) == sorted(r["asin"] for r in records)
(3, True)
>>> records == generate_records(3, seed=0)[0]
True
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

__all__ = ["CATEGORIES", "CategorySpec", "generate_records"]

SEP = " › "


@dataclass(frozen=True)
class CategorySpec:
    """One kind of product: where it sits, what it is called and how it varies."""

    path: tuple[str, ...]
    """Category path, top level first."""
    category: str
    """The original's short category (``beauty``, ``fashion``, ...)."""
    query: str
    """The search query the product was scraped under."""
    nouns: tuple[str, ...]
    """Product types (the head noun of a title)."""
    attributes: tuple[str, ...]
    """Attribute phrases a product of this kind may have."""
    options: tuple[tuple[str, tuple[str, ...]], ...]
    """Option names and the values products draw from."""
    price: tuple[float, float]
    """Base price range in dollars."""


_COLORS = ("black", "white", "navy blue", "red", "grey", "beige", "pink", "green", "brown", "light blue")
_SIZES = ("x-small", "small", "medium", "large", "x-large", "xx-large")
_SHOE_SIZES = ("6", "6.5", "7", "7.5", "8", "8.5", "9", "9.5", "10", "11", "12")

CATEGORIES: tuple[CategorySpec, ...] = (
    CategorySpec(("Clothing, Shoes & Jewelry", "Women", "Shoes", "Athletic"), "fashion", "women's running shoes",
                 ("running shoe", "trail shoe", "sneaker", "walking shoe"),
                 ("rubber sole", "lace up", "arch support", "breathable mesh", "non slip", "memory foam", "lightweight"),
                 (("size", _SHOE_SIZES), ("color", _COLORS)), (25, 140)),
    CategorySpec(("Clothing, Shoes & Jewelry", "Men", "Clothing", "Shirts"), "fashion", "men's t-shirts",
                 ("t-shirt", "polo shirt", "henley shirt", "tank top"),
                 ("machine wash", "cotton spandex", "short sleeve", "long sleeve", "slim fit", "moisture wicking"),
                 (("size", _SIZES), ("color", _COLORS)), (9, 45)),
    CategorySpec(("Clothing, Shoes & Jewelry", "Women", "Clothing", "Dresses"), "fashion", "women's dresses",
                 ("maxi dress", "midi dress", "cocktail dress", "sundress"),
                 ("hand wash", "polyester spandex", "v neck", "short sleeve", "elastic waist", "button closure"),
                 (("size", _SIZES), ("color", _COLORS)), (18, 90)),
    CategorySpec(("Beauty & Personal Care", "Skin Care", "Body", "Scrubs & Body Treatments"), "beauty", "body scrub",
                 ("body scrub", "exfoliating scrub", "body polish", "sugar scrub"),
                 ("tea tree", "natural ingredients", "essential oils", "sensitive skin", "dead skin", "paraben free",
                  "cruelty free"),
                 (("scent", ("coconut", "lavender", "vanilla", "unscented", "eucalyptus")),
                  ("size", ("4 ounce", "8 ounce", "12 ounce", "16 ounce"))), (7, 40)),
    CategorySpec(("Beauty & Personal Care", "Hair Care", "Hair Extensions, Wigs & Accessories", "Extensions"), "beauty",
                 "hair extensions", ("hair extension", "clip in extension", "ponytail extension", "wig"),
                 ("natural looking", "long lasting", "high quality", "easy apply", "heat resistant", "human hair"),
                 (("color", ("natural black", "dark brown", "blonde", "auburn", "ash blonde")),
                  ("size", ("14 inch", "18 inch", "22 inch"))), (15, 120)),
    CategorySpec(("Grocery & Gourmet Food", "Snacks", "Nuts & Seeds"), "grocery", "healthy snacks",
                 ("trail mix", "mixed nuts", "roasted almonds", "snack bar"),
                 ("gluten free", "non gmo", "low sugar", "high protein", "keto friendly", "individually wrapped"),
                 (("flavor name", ("sea salt", "honey roasted", "dark chocolate", "original")),
                  ("size", ("6 count", "12 count", "24 count"))), (5, 35)),
    CategorySpec(("Home & Kitchen", "Furniture", "Living Room Furniture", "Tables"), "furniture", "coffee table",
                 ("coffee table", "side table", "console table", "end table"),
                 ("solid wood", "easy assemble", "storage space", "living room", "metal frame", "space saving"),
                 (("color", ("espresso", "walnut", "white", "black", "natural wood")),), (45, 420)),
    CategorySpec(("Home & Kitchen", "Bedding", "Sheets & Pillowcases"), "home", "bed sheets",
                 ("sheet set", "pillowcase", "duvet cover", "fitted sheet"),
                 ("machine washable", "wrinkle free", "deep pocket", "hypoallergenic", "soft microfiber", "queen size"),
                 (("size", ("twin", "full", "queen", "king", "california king")), ("color", _COLORS)), (16, 110)),
    CategorySpec(("Electronics", "Computers & Accessories", "Computer Accessories & Peripherals", "Keyboards"),
                 "electronics", "wireless keyboard", ("wireless keyboard", "mechanical keyboard", "keyboard mouse combo"),
                 ("bluetooth", "usb c", "rechargeable battery", "backlit keys", "quiet typing", "ergonomic design"),
                 (("color", ("black", "white", "silver", "pink")),), (19, 160)),
    CategorySpec(("Electronics", "Headphones", "Earbud Headphones"), "electronics", "wireless earbuds",
                 ("wireless earbuds", "bluetooth headphones", "sport earphones"),
                 ("noise cancelling", "long battery life", "water resistant", "charging case", "hands free", "bluetooth"),
                 (("color", ("black", "white", "navy blue", "rose gold")),), (14, 250)),
    CategorySpec(("Health & Household", "Vitamins & Dietary Supplements", "Multivitamins"), "health", "multivitamin",
                 ("multivitamin", "vitamin gummies", "vitamin d3 softgels", "fish oil capsules"),
                 ("easy swallow", "sugar free", "gluten free", "immune support", "non gmo", "vegan friendly"),
                 (("size", ("30 count", "60 count", "90 count", "120 count")),), (8, 60)),
    CategorySpec(("Sports & Outdoors", "Outdoor Recreation", "Camping & Hiking", "Backpacks"), "sports",
                 "hiking backpack", ("hiking backpack", "daypack", "hydration pack", "travel backpack"),
                 ("water resistant", "large capacity", "padded straps", "laptop compartment", "lightweight",
                  "multiple pockets"),
                 (("color", _COLORS), ("size", ("20l", "30l", "40l"))), (20, 180)),
)  # fmt: skip

_BRANDS = (
    "Acme", "Northwind", "Bluepeak", "Everly", "Solstice", "Harbor & Pine", "Kinsly", "Meridian", "Oakridge",
    "Lumen", "Verdant", "Cobalt", "Tallgrass", "Brightwell", "Quillon", "Fernway", "Ridgeline", "Maple Lane",
)  # fmt: skip
_ADJECTIVES = ("classic", "premium", "everyday", "ultra", "deluxe", "modern", "essential", "signature", "pro")
_OPENERS = ("i am looking for", "i need", "find me", "i want", "i would like", "get me")
_ASIN_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


def _asin(rng: random.Random, seen: set[str]) -> str:
    while True:
        asin = "B0" + "".join(rng.choices(_ASIN_CHARS, k=8))
        if asin not in seen:
            seen.add(asin)
            return asin


def _plural(noun: str) -> str:
    if noun.endswith("s"):
        return noun
    if noun.endswith(("x", "ch", "sh")):
        return noun + "es"
    return noun + "s"


def _record(rng: random.Random, spec: CategorySpec, asin: str) -> tuple[dict[str, Any], dict[str, Any]]:
    brand = rng.choice(_BRANDS)
    noun = rng.choice(spec.nouns)
    attributes = rng.sample(spec.attributes, rng.randint(2, min(4, len(spec.attributes))))
    feature = " ".join(attributes[0].split()).title()
    title = f"{brand} {rng.choice(_ADJECTIVES).title()} {noun.title()} with {feature}"
    base = round(rng.uniform(*spec.price), 2)

    customization: dict[str, Any] = {}
    num_options = rng.choice((0, 1, 1, 2, 2, 2))
    for name, values in rng.sample(spec.options, min(num_options, len(spec.options))):
        chosen = rng.sample(values, rng.randint(2, min(4, len(values))))
        customization[name] = []
        for i, value in enumerate(chosen):
            price = round(base * (1 + 0.08 * i), 2)
            customization[name].append(
                {"value": value, "is_selected": i == 0, "asin": asin, "price_string": f"${price:.2f}",
                 "price": price, "image": None}
            )  # fmt: skip
    prices = [v["price"] for values in customization.values() for v in values] or [base]
    low, high = min(prices), max(prices)
    pricing = f"${low:,.2f}" if low == high else f"${low:,.2f}${high:,.2f}"
    if rng.random() < 0.03:  # a few unpriced listings, as in the scraped data
        pricing = ""

    bullets = [f"{a.capitalize()}: designed for everyday use" for a in attributes]
    description = (
        f"The {brand} {noun} is made for people who care about {attributes[0]} and {attributes[-1]}. "
        f"Part of our {spec.path[-1].lower()} range, it is built to last and easy to care for."
    )
    record = {
        "name": title,
        "product_information": {},
        "brand": brand,
        "brand_url": "",
        "full_description": description,
        "pricing": pricing,
        "list_price": "",
        "availability_status": "In Stock.",
        "images": [None],
        "product_category": SEP.join(spec.path),
        "average_rating": round(rng.uniform(3.0, 5.0), 1),
        "small_description": bullets,
        "total_reviews": rng.randint(0, 5000),
        "total_answered_questions": rng.randint(0, 40),
        "customization_options": customization or "",
        "seller_id": "",
        "seller_name": brand,
        "fulfilled_by_amazon": rng.random() < 0.5,
        "fast_track_message": "",
        "aplus_present": False,
        "asin": asin,
        "category": spec.category,
        "query": spec.query,
        "page": rng.randint(1, 10),
        "small_description_old": "",
    }
    wanted = rng.sample(attributes, rng.randint(1, min(2, len(attributes))))
    instruction = f"{rng.choice(_OPENERS)} {_plural(noun)} with {' and '.join(wanted)}"
    return record, {"attributes": attributes, "instruction": instruction, "instruction_attributes": wanted}


def generate_records(num_products: int = 500, seed: int = 0) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Generate a shop of ``num_products`` products in the original raw schema.

    Args:
        num_products: How many products.
        seed: The shop's seed.

    Returns:
        ``(records, attributes)``: the ``items_shuffle`` list and the
        ``items_ins_v2`` asin-to-attributes dict.
    """
    rng = random.Random(seed)
    seen: set[str] = set()
    records, attributes = [], {}
    for _ in range(num_products):
        spec = rng.choice(CATEGORIES)
        asin = _asin(rng, seen)
        record, attrs = _record(rng, spec, asin)
        records.append(record)
        attributes[asin] = attrs
    return records, attributes
