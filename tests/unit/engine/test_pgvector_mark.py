"""pgvector's index mark under rankings on many reader threads (no server needed).

Each ranking reads the projections' generation in its own snapshot. One that
began before a rebuild committed sees the old generation; it must neither set
the mark back to that generation nor raise the new generation's mark with
seqs of the items the rebuild replaced (those would hide new items whose
``emb`` is unfilled from the scan that fills it).
"""

from __future__ import annotations

import threading
from typing import Any, cast

from memseal.engine._pgvector import PgVector


def _mark() -> PgVector:
    return PgVector("public", cast(Any, None), cast(Any, None), "hashing-32")


def test_a_snapshot_of_an_older_generation_leaves_the_mark_alone() -> None:
    pg = _mark()
    pg._raise_mark(2, 50)
    pg._raise_mark(1, 900)  # a ranking whose snapshot predates the rebuild
    assert (pg.generation, pg.high) == (2, 50)
    pg._raise_mark(2, 40)  # a ranking on an older snapshot of this generation
    assert pg.high == 50
    pg._raise_mark(2, 70)
    assert pg.high == 70
    pg._raise_mark(3, 10)  # the next rebuild starts the mark again
    assert (pg.generation, pg.high) == (3, 10)


def test_marks_raised_from_many_threads_keep_the_newest_generation_and_highest_seq() -> None:
    pg = _mark()
    start = threading.Barrier(8)

    def rank(worker: int) -> None:
        start.wait()
        for n in range(2_000):
            pg._raise_mark(n % 3, worker * 10_000 + n)

    threads = [threading.Thread(target=rank, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert pg.generation == 2
    assert pg.high == max(w * 10_000 + n for w in range(8) for n in range(2_000) if n % 3 == 2)
