"""Attacks on witnessed checkpoints: a split view, a rollback, a witness restart, forged and
unknown cosignatures. Real ledgers on tmp_path, a real witness over HTTP on loopback."""

from __future__ import annotations

import base64
import shutil
from pathlib import Path

import pytest
from witness_support import WitnessThread, follow, grow, new_witness, proof, vkey_of

from memseal.ledger.cosignature import (
    Cosigner,
    parse_cosigner_vkey,
    require_cosignatures,
)
from memseal.ledger.errors import VerificationError
from memseal.ledger.note import NoteSigner
from memseal.witness.state import WitnessStore


async def _split_logs(tmp_path: Path) -> tuple[Path, Path, str]:
    """One operator, one key, two logs that share 3 entries and then differ."""
    log_a = tmp_path / "log-a"
    await grow(log_a, 3, "shared")
    log_b = tmp_path / "log-b"
    shutil.copytree(log_a, log_b)
    return log_a, log_b, await vkey_of(log_a)


async def test_split_view_second_log_is_refused_by_a_witness_that_saw_the_first(
    tmp_path: Path,
) -> None:
    log_a, log_b, vkey = await _split_logs(tmp_path)
    note_a, size_a = await grow(log_a, 2, "shown to client A")
    note_b, size_b = await grow(log_b, 2, "shown to client B")
    assert size_a == size_b == 5 and note_a != note_b
    new_witness(tmp_path / "w")
    follow(tmp_path / "w", vkey)
    with WitnessThread(tmp_path / "w") as witness:
        assert witness.add(0, [], note_a).status_code == 200
        # Same size, other root: a fork at the size the witness cosigned.
        same_size = witness.add(5, [], note_b)
        assert same_size.status_code == 422 and "fork" in same_size.text
        # B grown further with B's own (valid within B) proof: still not A's history.
        note_b2, size_b2 = await grow(log_b, 3, "B goes on")
        grown = witness.add(5, await proof(log_b, 5, size_b2), note_b2)
        assert grown.status_code == 422 and "not consistent" in grown.text
        evidence = witness.witness.store.evidence()
    assert [e.reason.endswith("a fork") for e in evidence] == [True, True]
    assert {e.request for e in evidence} == {note_b, note_b2}
    assert all(e.known_size == 5 and e.known_note and note_a[:60] in e.known_note for e in evidence)


async def test_split_view_client_of_the_hidden_log_cannot_reach_its_quorum(tmp_path: Path) -> None:
    log_a, log_b, vkey = await _split_logs(tmp_path)
    note_a, _ = await grow(log_a, 1, "A")
    note_b, _ = await grow(log_b, 1, "B")
    new_witness(tmp_path / "w")
    follow(tmp_path / "w", vkey)
    with WitnessThread(tmp_path / "w") as witness:
        line_a = witness.add(0, [], note_a)
        refused = witness.add(4, [], note_b)
        key = parse_cosigner_vkey(witness.vkey)
    assert line_a.status_code == 200 and refused.status_code == 422
    assert len(require_cosignatures(note_a + line_a.text, [key], 1)) == 1
    # Client B only ever gets its checkpoint without the witness's line: refused.
    with pytest.raises(VerificationError, match="0 valid cosignature"):
        require_cosignatures(note_b, [key], 1)


async def test_rollback_to_an_older_checkpoint_is_refused_and_kept(tmp_path: Path) -> None:
    log = tmp_path / "log"
    old_note, old_size = await grow(log, 3, "first")
    new_note, new_size = await grow(log, 4, "later")
    new_witness(tmp_path / "w")
    follow(tmp_path / "w", await vkey_of(log))
    with WitnessThread(tmp_path / "w") as witness:
        assert witness.add(0, [], old_note).status_code == 200
        assert (
            witness.add(old_size, await proof(log, old_size, new_size), new_note).status_code == 200
        )
        # The older checkpoint again, claiming the witness's size: old above checkpoint size.
        above = witness.add(new_size, [], old_note)
        assert above.status_code == 400
        # Claiming its own size: the witness says which size it cosigned (409, text/x.tlog.size).
        stale = witness.add(old_size, [], old_note)
        assert stale.status_code == 409
        assert stale.headers["content-type"].startswith("text/x.tlog.size")
        assert stale.text == f"{new_size}\n"
        assert witness.add(0, [], old_note).status_code == 409
        evidence = witness.witness.store.evidence()
        assert witness.witness.store.log(evidence[0].origin).size == new_size  # type: ignore[union-attr]
    assert len(evidence) == 1 and "older than the cosigned" in evidence[0].reason


async def test_witness_restart_keeps_its_state_and_still_refuses_the_fork(tmp_path: Path) -> None:
    log_a, log_b, vkey = await _split_logs(tmp_path)
    note_a, size_a = await grow(log_a, 2, "A")
    note_b, _ = await grow(log_b, 2, "B")
    new_witness(tmp_path / "w")
    follow(tmp_path / "w", vkey)
    with WitnessThread(tmp_path / "w") as witness:
        assert witness.add(0, [], note_a).status_code == 200
        first_vkey = witness.vkey
    with WitnessThread(tmp_path / "w") as witness:
        assert witness.vkey == first_vkey
        # A client that pretends the witness is fresh learns its size, and the fork stays out.
        fresh = witness.add(0, [], note_b)
        assert fresh.status_code == 409 and fresh.text == f"{size_a}\n"
        assert witness.add(size_a, [], note_b).status_code == 422
        grown_note, grown = await grow(log_a, 1, "A grows")
        assert witness.add(size_a, await proof(log_a, size_a, grown), grown_note).status_code == 200
    store = WitnessStore(tmp_path / "w")
    try:
        assert [log.size for log in store.logs()] == [grown]
        assert len(store.evidence()) == 1
    finally:
        store.close()


async def test_forged_cosignature_under_a_trusted_witness_name_is_refused(tmp_path: Path) -> None:
    log = tmp_path / "log"
    note, _ = await grow(log, 2, "x")
    new_witness(tmp_path / "w")
    follow(tmp_path / "w", await vkey_of(log))
    with WitnessThread(tmp_path / "w") as witness:
        line = witness.add(0, [], note).text
        key = parse_cosigner_vkey(witness.vkey)
    name, blob64 = line.removeprefix("\u2014 ").split()
    blob = bytearray(base64.b64decode(blob64))
    blob[-1] ^= 0x01  # one bit of the signature
    forged = f"\u2014 {name} {base64.b64encode(bytes(blob)).decode()}\n"
    with pytest.raises(VerificationError, match="invalid cosignature by witness"):
        require_cosignatures(note + forged, [key], 1)
    # The operator's own key, made to look like the witness (same name), is no witness.
    impostor = Cosigner(NoteSigner.from_seed(key.name, b"operator-seed-32-bytes-long!!!!!"))
    fake = impostor.cosign(note.split("\n\n")[0] + "\n", 1_700_000_000)
    with pytest.raises(VerificationError, match="0 valid cosignature"):
        require_cosignatures(note + fake, [key], 1)


async def test_cosignature_by_an_unknown_witness_does_not_count_toward_k(tmp_path: Path) -> None:
    log = tmp_path / "log"
    note, _ = await grow(log, 2, "x")
    vkey = await vkey_of(log)
    for folder, name in [
        (tmp_path / "w1", "witness.test/w1"),
        (tmp_path / "w2", "witness.test/w2"),
    ]:
        new_witness(folder, name)
        follow(folder, vkey)
    with WitnessThread(tmp_path / "w1") as one, WitnessThread(tmp_path / "w2") as two:
        lines = one.add(0, [], note).text + two.add(0, [], note).text
        trusted = parse_cosigner_vkey(one.vkey)
    # An operator adds a second cosignature by a witness the auditor never chose.
    stranger = parse_cosigner_vkey(two.vkey)
    assert len(require_cosignatures(note + lines, [trusted, stranger], 2)) == 2
    with pytest.raises(VerificationError, match="1 valid cosignature"):
        require_cosignatures(
            note + lines, [trusted, parse_cosigner_vkey(new_witness(tmp_path / "w3").vkey)], 2
        )


async def test_checkpoint_signed_by_another_key_is_forbidden(tmp_path: Path) -> None:
    log, other = tmp_path / "log", tmp_path / "other"
    await grow(log, 1, "x")
    note_other, _ = await grow(other, 1, "y")
    new_witness(tmp_path / "w")
    follow(tmp_path / "w", await vkey_of(log))
    # The other log's checkpoint, relabelled with the followed log's origin.
    origin = (await vkey_of(log)).split("+")[0]
    relabelled = origin + note_other[note_other.index("\n") :]
    with WitnessThread(tmp_path / "w") as witness:
        assert witness.add(0, [], note_other).status_code == 404  # a log it does not follow
        assert witness.add(0, [], relabelled).status_code == 403
        assert witness.witness.store.evidence() == []
