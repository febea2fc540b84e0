"""The per-process stem cache (engine/_dialect.py): equal stems, bounded memory.

Words repeat across items, so each is stemmed once per process; but a document may
hold a single word of its whole length, and a cache bounded by its count alone could
keep 65,536 such words. Only words of at most 64 characters are kept.
"""

from __future__ import annotations

import snowballstemmer

from memseal.engine import _dialect
from memseal.engine._dialect import index_words, stem

_PORTER = snowballstemmer.stemmer("porter")


def test_a_cached_stem_is_snowballs() -> None:
    for word in ["generalization", "apologies", "0s", "happiness", "a", "x" * 64]:
        assert stem(word) == _PORTER.stemWord(word)
        assert stem(word) == _PORTER.stemWord(word)  # the second answer is the cache's


def test_a_long_word_is_stemmed_but_not_kept() -> None:
    long_word = "generalizations" * 100
    assert len(long_word) > 64
    _dialect._cached_stem.cache_clear()  # so a full cache cannot hide what is kept
    stem("the")  # kept from now on
    before = _dialect._cached_stem.cache_info().currsize
    assert stem(long_word) == _PORTER.stemWord(long_word)
    assert index_words(f"the {long_word}") == f"the {_PORTER.stemWord(long_word)}"
    assert _dialect._cached_stem.cache_info().currsize == before
    assert stem("y" * 63 + "s") == _PORTER.stemWord("y" * 63 + "s")  # 64 characters: kept
    assert _dialect._cached_stem.cache_info().currsize == before + 1
