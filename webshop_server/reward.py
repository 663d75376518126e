"""The WebShop reward, with the original's function names, inputs and formula.

Products and goals are dicts with the original's keys: a product has ``query``,
``product_category``, ``name``, ``Attributes``, ``Title``, ``BulletPoints`` and
``Description``; a goal has ``query``, ``product_category``, ``name``, ``attributes``,
``goal_options`` (a name-to-value dict for synthetic goals, a list for human ones) and
``price_upper``.

total = (attribute matches + option matches + price ok) / (n_attr + n_opt + 1) × r_type

>>> goal = {"attributes": ["rubber sole"], "goal_options": {}, "price_upper": 50.0}
>>> product = {"Attributes": ["Rubber Sole"], "Title": "", "BulletPoints": [], "Description": ""}
>>> get_attribute_reward(product, goal)
(1.0, 1)
>>> get_option_reward(["black"], [("color", "black")])
(1.0, 1)
>>> get_option_reward(["black"], [])
(None, 0)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from thefuzz import fuzz

from webshop_server.nlp import nouns

__all__ = [
    "COLOR_SET",
    "get_attribute_reward",
    "get_option_reward",
    "get_reward",
    "get_type_reward",
    "normalize_color",
]

#: A fuzzy match needs a ``thefuzz`` token_set_ratio strictly above this.
MATCH_THRESHOLD = 85

#: Colour names used to normalize option values, in alphabetical order: as in the
#: original, the first one (alphabetically) contained in a value replaces it.
COLOR_SET: tuple[str, ...] = (
    "alabaster", "almond", "amber", "apricot", "aqua", "aquamarine", "beige", "berry", "black",
    "blue", "blush", "bronze", "brown", "burgundy", "camel", "camo", "caramel", "champagne",
    "charcoal", "cherry", "chocolate", "cinnamon", "coffee", "copper", "coral", "cream", "denim",
    "emerald", "fuchsia", "gold", "gray", "green", "grey", "heather", "indigo", "ivory", "jade",
    "khaki", "lavender", "lemon", "lilac", "lime", "magenta", "maroon", "mauve", "mint", "mocha",
    "multicolor", "mustard", "navy", "nude", "olive", "orange", "peach", "pewter", "pink", "plum",
    "purple", "rainbow", "red", "rose", "ruby", "rust", "sage", "sapphire", "scarlet", "silver",
    "slate", "tan", "taupe", "teal", "turquoise", "violet", "walnut", "wheat", "white", "wine",
    "yellow",
)  # fmt: skip


def normalize_color(value: Any) -> Any:
    """Replace an option value by the first colour of :data:`COLOR_SET` it contains.

    As in the original, this is Python's ``in``: a substring test for a string and a
    membership test for a (name, value) pair; a value without a colour is returned as is.

    >>> normalize_color("navy | white")
    'navy'
    >>> normalize_color("violet lavender")  # alphabetical order decides
    'lavender'
    >>> normalize_color(("color", "black"))
    'black'
    >>> normalize_color("8")
    '8'
    """
    for color in COLOR_SET:
        if color in value:
            return color
    return value


def _nouns(name: str) -> list[str]:
    return list(nouns(name))


def get_type_reward(purchased: Mapping[str, Any], goal: Mapping[str, Any]) -> dict[str, Any]:
    """The product-type term ``r_type`` and the evidence behind it.

    ``r_type`` starts at 1. Unless the query matches, at least two category levels
    (split on ``›``, order ignored) are shared or the title score exceeds 0.2, it is
    0.5; a title score below 0.1 makes it 0.1 and a title score of 0 makes it 0.
    The title score is the share of the goal name's nouns found among the purchased
    product name's nouns (0.2 when the goal name has none).

    Args:
        purchased: The bought product (``query``, ``product_category``, ``name``).
        goal: The goal (``query``, ``product_category``, ``name``).

    Returns:
        ``{"r_type", "query_match", "category_match", "title_score"}``.
    """
    query_match = purchased["query"] == goal["query"]
    purchased_category = {x.strip() for x in purchased["product_category"].split("›")}
    goal_category = {x.strip() for x in goal["product_category"].split("›")}
    category_match = len(purchased_category & goal_category) >= 2

    purchased_nouns = _nouns(purchased["name"])
    desired_nouns = _nouns(goal["name"])
    if desired_nouns:
        # Quirk kept: a set intersection over the goal's noun *list* (duplicates count).
        title_score = len(set(purchased_nouns) & set(desired_nouns)) / len(desired_nouns)
    else:
        title_score = 0.2

    r_type = 1.0
    if not (query_match or category_match or title_score > 0.2):
        r_type = 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return {
        "r_type": r_type,
        "query_match": query_match,
        "category_match": category_match,
        "title_score": title_score,
    }


def get_attribute_reward(purchased: Mapping[str, Any], goal: Mapping[str, Any]) -> tuple[float, int]:
    """The attribute term: how many goal attributes the purchased product has.

    A goal attribute matches when its token_set_ratio with one product attribute is
    above 85, or else when it is a substring of the lower-cased title, joined bullet
    points or description.

    Args:
        purchased: The bought product (``Attributes``, ``Title``, ``BulletPoints``,
            ``Description``).
        goal: The goal (``attributes``).

    Returns:
        ``(r_attr, num_attr_matches)`` with ``r_attr = num_attr_matches / n_attr``.
    """
    goal_attrs = goal["attributes"]
    num_attr_matches = 0
    for g_attr in goal_attrs:
        if any(fuzz.token_set_ratio(p_attr, g_attr) > MATCH_THRESHOLD for p_attr in purchased["Attributes"]):
            num_attr_matches += 1
        # The texts are read only when needed (the original accepts products without them
        # when every attribute matched); a string of bullets is joined char by char, as there.
        elif (
            g_attr in purchased["Title"].lower()
            or g_attr in " ".join(purchased["BulletPoints"]).lower()
            or g_attr in purchased["Description"].lower()
        ):
            num_attr_matches += 1
    r_attr = num_attr_matches / len(goal_attrs) if goal_attrs else 0.0
    return r_attr, num_attr_matches


def get_option_reward(
    purchased_options: Iterable[Any], goal_options: Iterable[Any]
) -> tuple[float | None, int]:
    """The option term: how many goal options were chosen, colours normalized first.

    Args:
        purchased_options: The chosen option values.
        goal_options: The goal's options: values (human goals) or ``(name, value)``
            pairs (synthetic goals, as the original passes ``dict.items()``).

    Returns:
        ``(r_option, num_option_matches)``; ``r_option`` is None for a goal without
        options.
    """
    purchased = [normalize_color(o) for o in purchased_options]
    goals = [normalize_color(o) for o in goal_options]
    num_option_matches = 0
    for g_option in goals:
        if any(fuzz.token_set_ratio(p_option, g_option) > MATCH_THRESHOLD for p_option in purchased):
            num_option_matches += 1
    r_option = num_option_matches / len(goals) if goals else None
    return r_option, num_option_matches


def _goal_option_items(goal_options: Mapping[str, str] | Sequence[str]) -> list[Any]:
    if isinstance(goal_options, Mapping):
        return list(goal_options.items())
    return list(goal_options)


def get_reward(
    purchased: Mapping[str, Any],
    goal: Mapping[str, Any],
    price: float,
    options: Mapping[str, str],
    verbose: bool = False,
) -> float | tuple[float, dict[str, Any]]:
    """The episode score at Buy Now, in [0, 1].

    Args:
        purchased: The bought product.
        goal: The goal.
        price: The product's scored price (drawn once at load).
        options: The chosen options, name to value.
        verbose: Also return the breakdown (``r_type``, ``r_att``, ``w_att``,
            ``query_match``, ``category_match``, ``title_score`` and, when they
            apply, ``r_option``/``w_option`` and ``r_price``/``w_price``).

    Returns:
        The total, or ``(total, breakdown)`` with ``verbose``.
    """
    type_info = get_type_reward(purchased, goal)
    r_price = price <= goal["price_upper"]
    r_att, num_attr_matches = get_attribute_reward(purchased, goal)
    goal_options = _goal_option_items(goal["goal_options"])
    r_option, num_option_matches = get_option_reward(list(options.values()), goal_options)
    denominator = len(goal["attributes"]) + len(goal_options) + 1
    total = (num_attr_matches + num_option_matches + r_price) / denominator * type_info["r_type"]
    if not verbose:
        return total
    info: dict[str, Any] = {
        "r_type": type_info["r_type"],
        "r_att": r_att,
        "w_att": len(goal["attributes"]) / denominator,
        "query_match": type_info["query_match"],
        "category_match": type_info["category_match"],
        "title_score": type_info["title_score"],
        "r_price": r_price,
        "w_price": 1 / denominator,
    }
    if r_option is not None:
        info["r_option"] = r_option
        info["w_option"] = len(goal_options) / denominator
    return total, info
