"""The shop's pages as element lists, and their ``text`` / ``text_rich`` observations.

A page is a list of :class:`Element`\\ s in document order, the text nodes of the
original site's HTML. The ``text`` observation joins their texts with ``' [SEP] '``,
``text_rich`` marks buttons one per line; the Flask app renders the same elements
as HTML. ``clickables`` maps each clickable label (lower-cased, as the original's
``get_available_actions``) to what it does.

>>> page = Page([Element("Instruction:"), Element("buy a hat"), Element("Search", "button")], has_search_bar=True)
>>> page.text
'Instruction: [SEP] buy a hat [SEP] Search'
>>> page.rich_text()
'\\nInstruction: \\n\\nbuy a hat \\n[button] Search [button_]\\n'
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Element",
    "Page",
    "attributes_page",
    "description_page",
    "done_page",
    "features_page",
    "item_page",
    "results_page",
    "reviews_page",
    "search_page",
]

SEP = " [SEP] "
RESULTS_PER_PAGE = 10


@dataclass(frozen=True)
class Element:
    """One text node of a page."""

    text: str
    kind: str = "text"
    """``text``, ``button`` (a page button), ``product`` (an ASIN link) or
    ``option`` (an option value; ``group`` names its option)."""
    group: str | None = None


@dataclass
class Page:
    """A rendered page: its elements and what can be done on it."""

    elements: list[Element]
    has_search_bar: bool = False
    clickables: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    """Label -> (kind, group): kind as :class:`Element`; a later label replaces an
    earlier equal one, as the original's dict does."""

    @property
    def text(self) -> str:
        """The ``text``-mode observation (empty nodes dropped)."""
        return SEP.join(e.text for e in self.elements if e.text)

    def rich_text(self, options: Mapping[str, str] | None = None, visited: Collection[str] = ()) -> str:
        """The ``text_rich``-mode observation (the original baseline models' view).

        One line per element: ``[button] X [button_]`` for buttons, option values as
        ``  [button] v [button_]`` or, when chosen, ``  [clicked button] v [clicked
        button_]`` with ``You have clicked v.`` put first; ASINs on a new line,
        ``[clicked button]`` once visited; other text as a newline, the text and a
        space. Each element's piece ends with a newline.

        Args:
            options: The chosen options. As in the original, a value counts as chosen
                when ``"value"`` appears in their JSON (the item URL carries it).
            visited: The ASINs opened since the last ``back to search``.
        """
        chosen = json.dumps(dict(options or {}))
        observation = ""
        for element in self.elements:
            text = element.text
            if not text:
                continue
            if element.kind == "button":
                piece = f"[button] {text} [button_]"
            elif element.kind == "option":
                if f'"{text}"' in chosen:
                    piece = f"  [clicked button] {text} [clicked button_]"
                    observation = f"You have clicked {text}.\n" + observation
                else:
                    piece = f"  [button] {text} [button_]"
            elif element.kind == "product":
                tag = "clicked button" if text in visited else "button"
                piece = f"\n[{tag}] {text} [{tag}_]"
            else:
                piece = f"\n{text} "
            observation += piece + "\n"
        return observation

    def observation(
        self, mode: str, options: Mapping[str, str] | None = None, visited: Collection[str] = ()
    ) -> str:
        """The observation in ``mode`` (``text`` or ``text_rich``)."""
        return self.text if mode == "text" else self.rich_text(options, visited)

    def available_actions(self) -> dict[str, Any]:
        """The original's ``{"has_search_bar", "clickables"}``."""
        return {"has_search_bar": self.has_search_bar, "clickables": list(self.clickables)}


def _page(elements: list[Element], *, has_search_bar: bool = False) -> Page:
    page = Page(elements, has_search_bar=has_search_bar)
    # Buttons first, then ASIN links, then option values: the original's order.
    for kind in ("button", "product", "option"):
        for e in elements:
            if e.kind == kind:
                page.clickables[e.text.lower() if kind != "option" else e.text] = (kind, e.group)
    return page


def _header(instruction: str) -> list[Element]:
    return [
        Element("Instruction:"),
        Element(instruction),
        Element("Back to Search", "button"),
    ]


def search_page(instruction: str) -> Page:
    """The start page: the instruction and a search bar."""
    elements = [
        Element("WebShop"),
        Element("Instruction:"),
        Element(instruction),
        Element("Search", "button"),
    ]
    return _page(elements, has_search_bar=True)


def results_page(instruction: str, products: Sequence[Mapping[str, Any]], total: int, page_num: int) -> Page:
    """A results page: ``products`` are this page's (at most 10) of ``total`` hits."""
    elements = _header(instruction)
    elements.append(Element(f"Page {page_num} (Total results: {total})"))
    if page_num > 1:
        elements.append(Element("< Prev", "button"))
    elements.append(Element("Next >", "button"))  # quirk kept: always shown
    for product in products:
        elements += [
            Element(product["asin"], "product"),
            Element(product["Title"]),
            Element(product["Price"]),
        ]
    return _page(elements)


def item_page(instruction: str, product: Mapping[str, Any], *, show_attrs: bool = False) -> Page:
    """A product page with its option buttons."""
    elements = _header(instruction) + [Element("< Prev", "button")]
    for name, values in product["options"].items():
        elements.append(Element(name))
        elements += [Element(v, "option", name) for v in values]
    elements += [
        Element(product["Title"]),
        Element(f"Price: {product['Price']}"),
        Element(f"Rating: {product['Rating']}"),
        Element("Description", "button"),
        Element("Features", "button"),
        Element("Reviews", "button"),
    ]
    if show_attrs:
        elements.append(Element("Attributes", "button"))
    elements.append(Element("Buy Now", "button"))
    return _page(elements)


def _sub_page(instruction: str, body: list[Element]) -> Page:
    return _page(_header(instruction) + [Element("< Prev", "button")] + body)


def description_page(instruction: str, product: Mapping[str, Any]) -> Page:
    """The description sub-page."""
    return _sub_page(instruction, [Element(product["Description"])])


def features_page(instruction: str, product: Mapping[str, Any]) -> Page:
    """The features sub-page: one element per bullet point."""
    return _sub_page(instruction, [Element(b) for b in product["BulletPoints"]])


def reviews_page(instruction: str, product: Mapping[str, Any]) -> Page:
    """The reviews sub-page (the original loads no reviews)."""
    return _sub_page(instruction, [Element(str(r)) for r in product["Reviews"]])


def attributes_page(instruction: str, product: Mapping[str, Any]) -> Page:
    """The attributes sub-page (``show_attrs`` only): attributes, then category, query, product category."""
    body = [Element(a) for a in product["Attributes"]]
    body += [Element(product["category"]), Element(product["query"]), Element(product["product_category"])]
    return _sub_page(instruction, body)


def done_page(asin: str, options: Mapping[str, str], reward: float) -> Page:
    """The purchase page: the original's text, with only asin, options and score filled in."""
    texts = [
        "Thank you for shopping with us!", "Your code:", "None", "(Paste it in your MTurk interface.)",
        "Purchased", "asin", asin, "options", json.dumps(dict(options)), "attrs", "None",
        "category", "None", "query", "None", "product category", "None",
        "Target", "asin", "None", "options", "None", "attrs", "None", "price upper", "None",
        "instuction text", "None", "category", "None", "product category", "None", "query", "None",
        "Goal", "None",
        "Your score (min 0.0, max 1.0)", str(reward), "Reward Details", "None",
    ]  # fmt: skip
    return Page([Element(t) for t in texts])
