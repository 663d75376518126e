"""BM25 product search with the original's Lucene parameters (k1 = 0.9, b = 0.4).

A document is the lower-cased join of a product's Title, Description, first bullet
point and options (``name: v1, v2`` joined by ``, and ``), as the original indexes
it. Both documents and queries go through an analyzer close to Lucene's English
one: word tokens, Lucene's English stop words, Porter stemming (PyStemmer). Scoring
is ``bm25s`` with Lucene's IDF; ties go to the earlier product, as Lucene's doc ids.
Only products sharing a term with the query are hits (at most ``k``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any

import bm25s
import numpy as np
import Stemmer
from bm25s.tokenization import Tokenizer

__all__ = ["SearchIndex", "product_document"]

#: Lucene's English stop-word set (``EnglishAnalyzer.ENGLISH_STOP_WORDS_SET``).
LUCENE_STOPWORDS: tuple[str, ...] = tuple(bm25s.stopwords.STOPWORDS_EN)
_TOKEN = r"(?u)\b\w+\b"
_POSSESSIVE = re.compile(r"'s\b")


def product_document(product: dict[str, Any]) -> str:
    """The searchable text of a product, as the original's index builder makes it."""
    bullets = product.get("BulletPoints") or []
    options = ", and ".join(
        f"{name}: {', '.join(values)}" for name, values in product.get("options", {}).items()
    )
    parts = [product.get("Title", ""), product.get("Description", ""), bullets[0] if bullets else "", options]
    return " ".join(parts).lower()


class SearchIndex:
    """A BM25 index over products.

    Args:
        documents: One text per product, in catalogue order.
        k1: BM25 term-frequency saturation (Lucene/Anserini default 0.9).
        b: BM25 length normalization (Lucene/Anserini default 0.4).
    """

    def __init__(self, documents: Sequence[str], *, k1: float = 0.9, b: float = 0.4) -> None:
        self._stemmer = Stemmer.Stemmer("porter")
        self._tokenizer = Tokenizer(splitter=_TOKEN, stopwords=list(LUCENE_STOPWORDS), stemmer=self._stemmer)
        ids = self._tokenizer.tokenize(
            [_POSSESSIVE.sub("", d) for d in documents],
            update_vocab=True,
            return_as="ids",
            show_progress=False,
        )
        self._bm25 = bm25s.BM25(k1=k1, b=b, method="lucene")
        self._bm25.index(ids, show_progress=False)
        self.num_documents = len(documents)
        self._search = functools.lru_cache(maxsize=4096)(self._search_uncached)

    @classmethod
    def from_products(cls, products: Sequence[dict[str, Any]], **kwargs: float) -> SearchIndex:
        """Index products with :func:`product_document`."""
        return cls([product_document(p) for p in products], **kwargs)

    def _query_ids(self, query: str) -> list[int]:
        text = _POSSESSIVE.sub("", query.lower())
        ids = self._tokenizer.tokenize([text], update_vocab=False, return_as="ids", show_progress=False)[0]
        return [i for i in ids if i != 0]  # 0 is bm25s's empty/unknown token

    def _search_uncached(self, query: str, k: int) -> tuple[int, ...]:
        ids = self._query_ids(query)
        if not ids or not self.num_documents:
            return ()
        scores = self._bm25.get_scores(ids)
        hits = np.flatnonzero(scores > 0)
        order = np.lexsort((hits, -scores[hits]))[:k]
        return tuple(int(i) for i in hits[order])

    def search(self, query: str, k: int = 50) -> tuple[int, ...]:
        """The indices of the top-``k`` products for ``query``, best first (cached)."""
        return self._search(query, k)

    def scores(self, query: str) -> np.ndarray:
        """The BM25 score of every product for ``query`` (for tests and debugging)."""
        ids = self._query_ids(query)
        return self._bm25.get_scores(ids) if ids else np.zeros(self.num_documents, dtype=np.float32)
