"""Forget, in the writer: resolve the items, sign the forget, erase every row.

One ``memory_forgotten`` entry per :data:`FORGET_CHUNK` items lists their
ids and, in its ``redacts`` header, every earlier seq whose payload
mentions one of them (the ledger's ``mentions`` index, read in this same
transaction, so a payload written a moment ago is not missed); the ledger
erases those payloads as the entry is appended. The projection drops the
items' rows and the cached vectors no live item still needs, and the entry
is marked in ``engine_scrub`` until its scrub (see :mod:`._scrub`) is done.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from memseal.ledger.entry import make_draft
from memseal.ledger.store import WriteTxn

from ._dialect import for_dialect
from ._projection import Projection
from ._query import scope_sql
from ._vectors import Resident
from .events import Keyring, MemoryForgotten, event_body
from .explore import CLOSED_FACETS
from .filters import Filter
from .messages import Forgotten
from .namespaces import Reach

__all__ = ["FORGET_CHUNK", "forget_command"]

#: Items one memory_forgotten entry lists (its body stays far below the ledger's 64 KiB).
FORGET_CHUNK: Final = 500


def forget_command(
    keyring: Keyring,
    scope: Reach | None,
    wanted: list[str] | None,
    picked: Filter | None,
    resident: Resident | None,
) -> Callable[[WriteTxn], Forgotten]:
    """The command forgetting ``wanted`` ids, or what ``picked`` matches, within ``scope``."""

    def command(txn: WriteTxn) -> Forgotten:
        where, params = scope_sql(scope, None, picked or Filter())
        if wanted is not None:
            marks = ",".join("?" * len(wanted))
            found = {
                row[0]
                for row in txn.execute(
                    f"SELECT i.id FROM engine_items i WHERE i.id IN ({marks}) AND {where}",
                    [*wanted, *params],
                )
            }
            targets = [i for i in wanted if i in found]
            skipped = tuple(i for i in wanted if i not in found)
        else:
            targets = [
                row[0]
                for row in txn.execute(
                    f"SELECT i.id FROM engine_items i WHERE {where} ORDER BY i.seq", params
                )
            ]
            skipped = ()
        seqs: list[int] = []
        redacted: list[int] = []
        projection = Projection(txn.execute, keyring, for_dialect(txn.dialect))
        for start in range(0, len(targets), FORGET_CHUNK):
            chunk = tuple(targets[start : start + FORGET_CHUNK])
            marks = ",".join("?" * len(chunk))
            # The ledger's own index of which payloads mention these ids, read in this
            # transaction so a payload written a moment ago is not missed.
            # Payloads that show one of these items' facet values (explore buckets) go
            # too: a value can be as personal as the text (a tag, a path, a url). Not
            # the closed facets: "fact" or "document" is nobody's secret.
            facet_refs = sorted(
                {
                    keyring.facet_ref(facet, value)
                    for facet, value in txn.execute(
                        "SELECT f.facet, f.value FROM engine_facets f JOIN engine_items i "
                        f"ON i.seq = f.seq WHERE i.id IN ({marks})",
                        chunk,
                    )
                    if facet not in CLOSED_FACETS
                }
            )
            refs = [*chunk, *facet_refs]
            redacts = sorted(
                {
                    row[0]
                    for start_ref in range(0, len(refs), 500)
                    for row in txn.execute(
                        "SELECT DISTINCT seq FROM mentions WHERE ref IN "
                        f"({','.join('?' * len(refs[start_ref : start_ref + 500]))})",
                        refs[start_ref : start_ref + 500],
                    )
                }
            )
            event = MemoryForgotten(items=chunk)
            appended = txn.append(
                make_draft("memory_forgotten", event_body(event), None, redacts=redacts)
            )
            projection.forgotten(appended.seq, event)
            txn.execute("INSERT INTO engine_scrub (seq) VALUES (?)", (appended.seq,))
            seqs.append(appended.seq)
            redacted.extend(redacts)
        if seqs:
            projection.save()
        if resident is not None:
            # This process's in-memory copies go too. (Were the transaction rolled
            # back, they would simply be read from the table again when needed.)
            resident.drop(projection.removed_seqs, projection.dropped_vectors)
        return Forgotten(
            forgotten=tuple(targets),
            skipped=skipped,
            seqs=tuple(seqs),
            redacted=tuple(sorted(set(redacted))),
            scrubbed=not seqs,
        )

    return command
