"""Goals (synthetic or human) and their fixed order and splits, as the original WebShop.

Goals are built in product order and shuffled with ``random.Random(233)``, so the
order is the same in every process. Splits over that order: goal index 0-499 is
``test``, 500-1499 ``eval``, the rest ``train``. A product's ``price_upper`` takes
two of the first four price thresholds above its scored price and keeps the larger
(drawn from a seeded RNG, the original's draw is unseeded).

Goals are stored compactly (product index, variant index) and built on access,
so a 100k-product catalogue does not hold half a million goal dicts.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from webshop_server.catalog import Catalog

__all__ = ["GOAL_SHUFFLE_SEED", "PRICE_THRESHOLDS", "SPLITS", "GoalSet", "draw_price_upper"]

#: The seed of the original's goal shuffle.
GOAL_SHUFFLE_SEED = 233
#: The original's price ladder: 10, 20, ..., 990 dollars.
PRICE_THRESHOLDS: tuple[float, ...] = tuple(float(p) for p in range(10, 1000, 10))
#: Goal-index ranges of the splits (``train`` runs to the end).
SPLITS: dict[str, tuple[int, int | None]] = {"test": (0, 500), "eval": (500, 1500), "train": (1500, None)}
#: ``price_upper`` of a product too expensive for the ladder.
NO_PRICE_CAP = 1000000.0


def draw_price_upper(price: float, rng: random.Random) -> tuple[float, str]:
    """Pick the price cap and its instruction text for a product of scored ``price``.

    >>> draw_price_upper(5000.0, random.Random(0))
    (1000000.0, '')
    >>> cap, text = draw_price_upper(12.5, random.Random(0))
    >>> cap in (30.0, 40.0, 50.0), text == f", and price lower than {cap:.2f} dollars"
    (True, True)
    """
    above = [p for p in PRICE_THRESHOLDS if p > price][:4]
    if len(above) < 2:
        return NO_PRICE_CAP, ""
    cap = max(rng.sample(above, 2))
    return cap, f", and price lower than {cap:.2f} dollars"


class GoalSet(Sequence):
    """The goal list of a catalogue, in the original's fixed shuffled order.

    Args:
        catalog: The products.
        human: Build goals from human instructions (``instructions`` on products)
            instead of the synthetic instruction per option combination.
        seed: Seed of the ``price_upper`` draws.
    """

    def __init__(self, catalog: Catalog, *, human: bool = False, seed: int = 0) -> None:
        self.catalog = catalog
        self.human = human
        rng = random.Random(seed)
        entries: list[tuple[int, int]] = []
        self._price_upper: dict[int, tuple[float, str]] = {}
        attribute_counts: Counter[str] = Counter()
        for index, product in enumerate(catalog.products):
            variants = self._num_variants(product)
            if not variants:
                continue
            self._price_upper[index] = draw_price_upper(catalog.prices[product["asin"]], rng)
            entries.extend((index, v) for v in range(variants))
            if not human:
                for attribute in product["instruction_attributes"]:
                    attribute_counts[attribute] += variants
        random.Random(GOAL_SHUFFLE_SEED).shuffle(entries)
        array = np.asarray(entries, dtype=np.int64).reshape(-1, 2)
        self._products, self._variants = array[:, 0], array[:, 1]
        self._attribute_counts = attribute_counts

    def _num_variants(self, product: dict[str, Any]) -> int:
        if self.human:
            return sum(1 for ins in product.get("instructions") or [] if ins.get("instruction_attributes"))
        if not product.get("instruction_text") or not product.get("instruction_attributes"):
            return 0
        sizes = [len(v) for v in product["options"].values()]
        return int(np.prod(sizes)) if sizes else 1

    def __len__(self) -> int:
        return len(self._products)

    def __getitem__(self, index: int) -> dict[str, Any]:  # type: ignore[override]
        """The goal dict: asin, category, query, name, product_category,
        instruction_text, attributes, price_upper, goal_options, weight."""
        if not -len(self) <= index < len(self):
            raise IndexError(f"goal index {index} out of range (0..{len(self) - 1})")
        product_index = int(self._products[index])
        variant = int(self._variants[index])
        product = self.catalog.products[product_index]
        price_upper, price_text = self._price_upper[product_index]
        if self.human:
            instructions = [i for i in product["instructions"] if i.get("instruction_attributes")]
            chosen = instructions[variant]
            text = chosen["instruction"].strip(".") + price_text
            attributes = list(chosen["instruction_attributes"])
            goal_options: Any = list(chosen.get("instruction_options") or [])
            weight = 1.0
        else:
            names = sorted(product["options"])
            combos = itertools.product(*(product["options"][n] for n in names))
            combination = next(itertools.islice(combos, variant, None))
            goal_options = dict(zip(names, combination, strict=True))
            option_text = ", and ".join(f"{k}: {v}" for k, v in goal_options.items())
            option_text = f" with {option_text}" if option_text else ""
            text = f"{product['instruction_text']}{option_text}{price_text}"
            attributes = list(product["instruction_attributes"])
            weight = sum(1.0 / self._attribute_counts[a] for a in attributes) / len(attributes)
        return {
            "asin": product["asin"],
            "category": product["category"],
            "query": product["query"],
            "name": product["name"],
            "product_category": product["product_category"],
            "instruction_text": text,
            "attributes": attributes,
            "price_upper": price_upper,
            "goal_options": goal_options,
            "weight": weight,
        }

    def split(self, name: str) -> range:
        """The goal indices of split ``name`` (``test``, ``eval``, ``train`` or ``all``).

        Raises:
            ValueError: for an unknown split name.
        """
        if name == "all":
            return range(len(self))
        if name not in SPLITS:
            raise ValueError(f"unknown split {name!r}; choose one of {[*SPLITS, 'all']}")
        start, stop = SPLITS[name]
        n = len(self)
        return range(min(start, n), n if stop is None else min(stop, n))
