"""Forget, in the writer: resolve the items, sign the forget, erase every row.

One ``memory_forgotten`` entry per :data:`FORGET_CHUNK` items lists their
ids and, in its ``redacts`` header, every earlier seq whose payload
mentions one of them (the ledger's ``mentions`` index, read in this same
transaction, so a payload written a moment ago is not missed); the ledger
erases those payloads as the entry is appended. The projection drops the
items' rows and the cached vectors no live item still needs, and the entry
is marked in ``engine_scrub`` until its scrub (see :mod:`._scrub`) is done.

Erasure is per text where the entry allows it. A recorded result's texts sit
in its payload under salted refs that the signed body carries (``{"$t": ref}``,
see ``memseal.replay.runs.results``). Each text belongs to the innermost object of
the result that names an ``id``; the forget erases the texts of the items it
forgets and every text no item owns (an answer, a bucket value: memseal cannot
tell whose words those are), and the arguments (the caller's words, which may
quote the item). What is left stays as the payload's *residue* (see
``memseal.ledger.entry``), so a resumed run still gets every other text
byte for byte. An entry with no text left is erased whole, as before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final, Protocol

import msgspec

from memseal.ledger.entry import (
    check_mention,
    decode_entry,
    encode_residue,
    make_draft,
    text_owners,
)
from memseal.ledger.errors import InvalidRequest
from memseal.ledger.store import WriteTxn

from ._dialect import for_dialect
from ._projection import Projection
from ._rule_memo import forget_all
from ._scope import scope_sql
from .events import (
    MAX_ACTOR_CHARS,
    MAX_REASON_CHARS,
    ForgetPayload,
    Keyring,
    MemoryForgotten,
    event_body,
    payload_value,
)
from .explore import CLOSED_FACETS
from .filters import Filter, check_filter
from .items import check_ids, clean_text
from .namespaces import Reach, check_reach
from .results import Forgotten

__all__ = ["FORGET_CHUNK", "forget_command", "plan_forget"]

#: Items one memory_forgotten entry lists (its body stays far below the ledger's 64 KiB).
FORGET_CHUNK: Final = 500

#: ``drop(item seqs, content hashes with no live item left, seq of the forget's last entry)``.
Drop = Callable[[Sequence[int], Sequence[str], int], None]
#: ``mark(item seqs, seq of the forget's last entry)``: no read of an older snapshot may
#: load them again (``_resident.Tombstones``).
Mark = Callable[[Sequence[int], int], None]


class _Vectors(Protocol):
    """The part of the vector cache a forget uses (``_vectors.VectorCache``)."""

    def mark(self, seqs: Sequence[int], stamp: int) -> None: ...

    def drop(self, seqs: Sequence[int], contents: Sequence[str], stamp: int) -> None: ...


def plan_forget(
    keyring: Keyring,
    vectors: _Vectors | None,
    *,
    ids: Sequence[str] | None,
    filter: Filter | dict[str, object] | None,
    reach: Reach | None,
    actor: object = None,
    reason: object = None,
) -> tuple[Callable[[WriteTxn], Forgotten], Callable[[], None]]:
    """The forget the engine was asked for, checked before anything runs: exactly one of
    ``ids`` or a non-empty ``filter``; an ``actor`` and ``reason`` within their limits.

    Returns :func:`forget_command`'s ``(command, release)``; raises
    :class:`InvalidRequest` naming the field.
    """
    if (ids is None) == (filter is None):
        raise InvalidRequest("forget takes exactly one of `ids` or `filter`")
    wanted = check_ids(ids) if ids is not None else None
    picked = check_filter(filter) if filter is not None else None
    if picked is not None and picked.is_empty():
        raise InvalidRequest("`filter` must set at least one field to forget by")
    scope = check_reach(reach)
    why = None
    if reason is not None or actor is not None:
        why = ForgetPayload(
            actor="" if actor is None else clean_text(actor, "actor", MAX_ACTOR_CHARS),
            reason=clean_text(reason, "reason", MAX_REASON_CHARS),
        )
    if vectors is None:
        return forget_command(keyring, scope, wanted, picked, None, None, why)
    return forget_command(keyring, scope, wanted, picked, vectors.mark, vectors.drop, why)


def forget_command(
    keyring: Keyring,
    scope: Reach | None,
    wanted: list[str] | None,
    picked: Filter | None,
    mark: Mark | None,
    drop: Drop | None,
    why: ForgetPayload | None = None,
) -> tuple[Callable[[WriteTxn], Forgotten], Callable[[], None]]:
    """``(command, release)``: the command forgetting ``wanted`` ids, or what ``picked``
    matches, within ``scope``; and ``release``, to be called once its transaction
    committed, which lets go of this process's in-memory copies of the items' vectors.

    The copies are marked inside the transaction (``mark``) but dropped only after it
    committed: dropped inside it, a forget whose savepoint or transaction rolled back
    would leave a live item out of this process's HNSW index, which never offers an
    item twice, so index-served rankings would miss it. Between the commit and the
    release no ranking can return the item: every candidate is checked against the
    projection, where the forget has already removed it.

    ``why`` (actor and reason) is each entry's payload. It mentions no item, so no
    later forget erases it: it stays as the record of the erasure (see
    :class:`.events.ForgetPayload`).
    """
    pending: list[tuple[list[int], list[str], int]] = []

    def release() -> None:
        if pending:
            forget_all()  # what the rule read of the forgotten texts goes with them
        while pending:
            seqs, contents, stamp = pending.pop()
            if drop is not None:
                drop(seqs, contents, stamp)

    def command(txn: WriteTxn) -> Forgotten:
        pending.clear()  # a command run again after a rollback starts afresh
        targets, skipped = _targets(txn, scope, wanted, picked)
        seqs: list[int] = []
        redacted: list[int] = []
        projection = Projection(txn.execute, keyring, for_dialect(txn.dialect))
        for start in range(0, len(targets), FORGET_CHUNK):
            chunk = tuple(targets[start : start + FORGET_CHUNK])
            redacts = _redactions(txn, keyring, chunk)
            kept = _residues(txn, redacts, set(chunk))
            event = MemoryForgotten(items=chunk)
            payload = None if why is None else payload_value(why)
            draft = make_draft("memory_forgotten", event_body(event), payload, redacts=redacts)
            appended = txn.append(msgspec.structs.replace(draft, kept=kept))
            projection.forgotten(appended.seq, event)
            txn.execute("INSERT INTO engine_scrub (seq) VALUES (?)", (appended.seq,))
            seqs.append(appended.seq)
            redacted.extend(redacts)
        if seqs:
            projection.save()
        if projection.removed_seqs:
            # Marked with the last entry's seq now, so that no read of a snapshot without
            # it brings them back; dropped by ``release`` after the commit. (Were the
            # transaction rolled back, a read past that seq takes them in again.)
            if mark is not None:
                mark(projection.removed_seqs, seqs[-1])
            pending.append(
                (list(projection.removed_seqs), list(projection.dropped_vectors), seqs[-1])
            )
        return Forgotten(
            forgotten=tuple(targets),
            skipped=skipped,
            seqs=tuple(seqs),
            redacted=tuple(sorted(set(redacted))),
            scrubbed=not seqs,
        )

    return command, release


def _redactions(txn: WriteTxn, keyring: Keyring, chunk: tuple[str, ...]) -> list[int]:
    """The seqs of the payloads a forget of ``chunk`` (item ids) must redact."""
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
    return sorted(
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


def _targets(
    txn: WriteTxn, scope: Reach | None, wanted: list[str] | None, picked: Filter | None
) -> tuple[list[str], tuple[str, ...]]:
    """The ids to forget (those asked for that are in scope, or what the filter matches,
    oldest first) and the ids asked for that are not."""
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
        return [i for i in wanted if i in found], tuple(i for i in wanted if i not in found)
    targets = [
        row[0]
        for row in txn.execute(
            f"SELECT i.id FROM engine_items i WHERE {where} ORDER BY i.seq", params
        )
    ]
    return targets, ()


_TEXT_REF = "$t"


def _residues(
    txn: WriteTxn, seqs: Sequence[int], gone: set[str]
) -> tuple[tuple[int, bytes, tuple[str, ...]], ...]:
    """For each of ``seqs`` whose payload keeps texts of items not in ``gone``: its residue."""
    kept: list[tuple[int, bytes, tuple[str, ...]]] = []
    for start in range(0, len(seqs), 500):
        part = list(seqs[start : start + 500])
        rows = txn.execute(
            "SELECT e.leaf, p.data FROM entries e JOIN payloads p ON p.seq = e.seq "
            f"WHERE e.seq IN ({','.join('?' * len(part))}) ORDER BY e.seq",
            part,
        )
        for leaf, data in rows:
            residue = _residue(bytes(leaf), bytes(data), gone)
            if residue is not None:
                kept.append(residue)
    return tuple(kept)


def _residue(leaf: bytes, data: bytes, gone: set[str]) -> tuple[int, bytes, tuple[str, ...]] | None:
    entry = decode_entry(leaf)
    try:
        payload = msgspec.json.decode(data)
        body = msgspec.json.decode(bytes(entry.body))
    except msgspec.DecodeError:
        return None
    texts = payload.get("texts") if isinstance(payload, dict) else None
    if not isinstance(texts, dict) or not texts:
        return None
    owners = text_owners(body)
    keep = {
        ref: pair
        for ref, pair in texts.items()
        if ref in owners
        and (owner := owners[ref]) is not None
        and owner not in gone
        and _indexable(owner)
    }
    if not keep:
        return None
    mentions = tuple(sorted({o for ref in keep if (o := owners[ref]) is not None}))
    return entry.seq, encode_residue(keep), mentions


def _indexable(ref: str) -> bool:
    # A text is kept only under an id the mentions index can hold, so a later forget finds it.
    try:
        check_mention(ref)
    except InvalidRequest:
        return False
    return True
