"""A bundle that is not the whole run, or whose unsigned-looking fields were edited, fails.

Every attack goes through ``memseal verify`` (the CLI's main, in-process) and must exit 1 with
one line naming its step; the run is recorded here, on SQLite and on PostgreSQL, and exported
by ``memseal export`` (``--store`` for PostgreSQL), then checked offline with the vkey alone.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import memseal
from memseal.cli import main
from memseal.engine import HashingEmbedder
from memseal.ledger.note import NoteSigner, sign_note, split_note
from memseal.replay.evidence.bundle import (
    Bundle,
    Listed,
    Manifest,
    decode_bundle,
    encode_bundle,
    manifest_text,
)

ROOT = Path(__file__).resolve().parents[2]
VECTORS = ROOT / "tests/vectors/bundles"
TRUST = (VECTORS / "trust.vkey").read_text().strip()
EXPECTED: dict[str, Any] = json.loads((VECTORS / "expected.json").read_text())
SCOPE = memseal.ToolScope.placed_at("team:acme/agent:writer")


class Exported:
    def __init__(self, folder: Path, bundle: Bundle, trust: str) -> None:
        self.folder, self.bundle, self.trust = folder, bundle, trust


async def _record(folder: Path, store: str | None, *, rotate: bool = False) -> str:
    async with memseal.open(
        folder, store=store, embedder=HashingEmbedder(), checkpoint_interval=None
    ) as memory:
        async with memory.run("audit", SCOPE) as run:
            await run.call("memory_store", {"learning": {"text": "the report goes out at 6am"}})
            await run.call("memory_store", {"learning": {"text": "deploys are on Tuesdays"}})
            if rotate:
                await memory.rotate_key()
            await run.call("memory_fetch", {"query": "report"})
            await run.call("memory_list", {})
        return str(memory.trust_root)


def _export(folder: Path, store: str | None, out: Path) -> Bundle:
    where = ["--data", str(folder)] + ([] if store is None else ["--store", store])
    assert main(["export", *where, "--run", "audit", "-o", str(out)]) == 0
    return decode_bundle(out.read_bytes())


@pytest.fixture
def exported(tmp_path: Path, store_url: str | None) -> Exported:
    folder = tmp_path / "data"
    trust = asyncio.run(_record(folder, store_url))
    return Exported(folder, _export(folder, store_url, tmp_path / "run.bundle"), trust)


def _with(bundle: Bundle, **changes: Any) -> Bundle:
    return type(bundle)(**{**{f: getattr(bundle, f) for f in bundle.__struct_fields__}, **changes})


def _verify(
    bundle: Bundle | bytes, trust: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str]:
    path = tmp_path / "attack.bundle"
    path.write_bytes(bundle if isinstance(bundle, bytes) else encode_bundle(bundle))
    capsys.readouterr()
    code = main(["verify", str(path), "--trust", trust])
    out, err = capsys.readouterr()
    if code == 0:
        return code, out
    assert out == "" and err.count("\n") == 1 and "Traceback" not in err, err
    return code, err


def _fails(
    bundle: Bundle | bytes,
    trust: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    step: str,
) -> str:
    code, line = _verify(bundle, trust, tmp_path, capsys)
    assert code == 1, line
    assert f"{step}:" in line, line
    return line


def test_the_exported_bundle_verifies_offline_with_the_vkey_alone(
    exported: Exported, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, line = _verify(exported.bundle, exported.trust, tmp_path, capsys)
    assert code == 0 and line.startswith("ok: bundle of run 'audit'"), line


@pytest.mark.parametrize("cut", [1, 2, 3])
def test_cutting_the_tail_of_a_bundle_fails_completeness(
    exported: Exported, tmp_path: Path, capsys: pytest.CaptureFixture[str], cut: int
) -> None:
    entries = exported.bundle.entries
    line = _fails(
        _with(exported.bundle, entries=entries[:-cut]),
        exported.trust,
        tmp_path,
        capsys,
        "completeness",
    )
    assert f"seq {entries[-cut].seq}:" in line and f"{cut} of {len(entries)}" in line


def test_dropping_run_started_fails_completeness(
    exported: Exported, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    entries = exported.bundle.entries
    i = next(i for i, e in enumerate(entries) if b'"kind":"run_started"' in e.leaf)
    line = _fails(
        _with(exported.bundle, entries=entries[:i] + entries[i + 1 :]),
        exported.trust,
        tmp_path,
        capsys,
        "completeness",
    )
    assert f"seq {entries[i].seq}:" in line


def test_dropping_any_one_entry_fails_completeness(
    exported: Exported, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    entries = exported.bundle.entries
    for i in range(len(entries)):
        _fails(
            _with(exported.bundle, entries=entries[:i] + entries[i + 1 :]),
            exported.trust,
            tmp_path,
            capsys,
            "completeness",
        )


def test_reordering_any_two_entries_fails_completeness(
    exported: Exported, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    entries = list(exported.bundle.entries)
    for i in range(len(entries) - 1):
        swapped = list(entries)
        swapped[i], swapped[i + 1] = swapped[i + 1], swapped[i]
        line = _fails(
            _with(exported.bundle, entries=tuple(swapped)),
            exported.trust,
            tmp_path,
            capsys,
            "completeness",
        )
        assert "out of order" in line
    reversed_ = _with(exported.bundle, entries=tuple(reversed(entries)))
    _fails(reversed_, exported.trust, tmp_path, capsys, "completeness")


def test_duplicating_any_entry_fails_completeness(
    exported: Exported, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    entries = exported.bundle.entries
    for i in range(len(entries)):
        line = _fails(
            _with(exported.bundle, entries=entries[: i + 1] + entries[i:]),
            exported.trust,
            tmp_path,
            capsys,
            "completeness",
        )
        assert "appears twice" in line
    # Appended at the end (after the last seq), it is the same attack.
    _fails(
        _with(exported.bundle, entries=(*entries, entries[0])),
        exported.trust,
        tmp_path,
        capsys,
        "completeness",
    )


def test_removing_a_payload_fails_completeness(
    exported: Exported, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A payload nulled where a signed forget happened to list it would pass the redaction
    # step; the manifest says which payloads the export held.
    entries = list(exported.bundle.entries)
    i = next(i for i, e in enumerate(entries) if e.payload is not None)
    entries[i] = type(entries[i])(
        **{
            **{f: getattr(entries[i], f) for f in entries[i].__struct_fields__},
            "payload": None,
            "salt": None,
        }
    )
    _fails(
        _with(exported.bundle, entries=tuple(entries)),
        exported.trust,
        tmp_path,
        capsys,
        "completeness",
    )


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("keys", lambda b: (*b.keys, b.keys[0])),
        ("keys", lambda b: ()),
        ("embedders", lambda b: ("hashing-v1/blake3/w1-c3/dim64",)),
        ("embedders", lambda b: ()),
    ],
    ids=["keys-added", "keys-emptied", "embedders-changed", "embedders-emptied"],
)
def test_editing_an_unsigned_looking_field_fails_manifest(
    exported: Exported,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    field: str,
    value: Callable[[Bundle], Any],
) -> None:
    line = _fails(
        _with(exported.bundle, **{field: value(exported.bundle)}),
        exported.trust,
        tmp_path,
        capsys,
        "manifest",
    )
    assert f"`{field}` is not what the signed manifest states" in line


def _manifest(bundle: Bundle) -> Manifest:
    text, _ = split_note(bundle.manifest)
    return decode_manifest(text)


def decode_manifest(text: str) -> Manifest:
    import msgspec

    return msgspec.json.decode(text.split("\n")[1].encode(), type=Manifest)


def test_a_manifest_rewritten_for_a_cut_bundle_fails_its_signature(
    exported: Exported, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = exported.bundle
    manifest = _manifest(bundle)
    cut = Manifest(
        **{
            **{f: getattr(manifest, f) for f in manifest.__struct_fields__},
            "entries": manifest.entries[:-2],
        }
    )
    # Re-signed under the ledger key's own name by a key the attacker made.
    _, signatures = split_note(bundle.manifest)
    forger = NoteSigner.generate(signatures[0].name)
    forged = _with(
        bundle, entries=bundle.entries[:-2], manifest=sign_note(manifest_text(cut), [forger])
    )
    _fails(forged, exported.trust, tmp_path, capsys, "manifest")
    # The original signature lines kept under an edited text do not verify either.
    kept = manifest_text(cut) + "\n" + bundle.manifest.rsplit("\n\n", 1)[1]
    _fails(
        _with(bundle, entries=bundle.entries[:-2], manifest=kept),
        exported.trust,
        tmp_path,
        capsys,
        "manifest",
    )


def test_a_manifest_from_an_earlier_export_does_not_fit_a_later_checkpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], store_url: str | None
) -> None:
    folder = tmp_path / "data"
    trust = asyncio.run(_record(folder, store_url))
    early = _export(folder, store_url, tmp_path / "early.bundle")

    async def more() -> None:
        async with (
            memseal.open(
                folder, store=store_url, embedder=HashingEmbedder(), checkpoint_interval=None
            ) as memory,
            memory.run("audit", SCOPE) as run,
        ):
            script: list[tuple[str, dict[str, Any]]] = [
                ("memory_store", {"learning": {"text": "the report goes out at 6am"}}),
                ("memory_store", {"learning": {"text": "deploys are on Tuesdays"}}),
                ("memory_fetch", {"query": "report"}),
                ("memory_list", {}),
                ("memory_fetch", {"query": "deploys"}),
            ]
            for name, args in script:
                await run.call(name, args)

    asyncio.run(more())
    late = _export(folder, store_url, tmp_path / "late.bundle")
    assert len(late.entries) > len(early.entries)
    # The later export's entries that the earlier one held, under the earlier manifest.
    held = {e.seq for e in early.entries}
    spliced = _with(
        late, manifest=early.manifest, entries=tuple(e for e in late.entries if e.seq in held)
    )
    line = _fails(spliced, trust, tmp_path, capsys, "manifest")
    assert "made for the checkpoint of size" in line
    code, _ = _verify(early, trust, tmp_path, capsys)
    assert code == 0  # the earlier bundle itself is whole as of its own checkpoint


def test_a_bundle_across_a_key_rotation_verifies_and_its_manifest_is_signed_by_the_new_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], store_url: str | None
) -> None:
    folder = tmp_path / "data"
    trust = asyncio.run(_record(folder, store_url, rotate=True))
    bundle = _export(folder, store_url, tmp_path / "run.bundle")
    code, line = _verify(bundle, trust, tmp_path, capsys)
    assert code == 0 and "2 signing key(s)" in line, line
    _, signatures = split_note(bundle.manifest)
    assert len(signatures) == 1 and signatures[0].key_id.hex() in bundle.keys[1]
    _, by_checkpoint = split_note(bundle.checkpoint)
    assert signatures[0].key_id in {s.key_id for s in by_checkpoint}  # the key in force
    # Without the hand-over the new key is unknown: the chain is part of the extent.
    entries = [e for e in bundle.entries if b'"kind":"key_rotated"' not in e.leaf]
    dropped = _with(bundle, entries=tuple(entries))
    _fails(dropped, trust, tmp_path, capsys, "completeness")


@pytest.mark.parametrize(
    "name", sorted(n for n, e in EXPECTED.items() if e is not None and "says" in e)
)
def test_attack_vector_fails_with_its_reason(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = EXPECTED[name]
    line = _fails((VECTORS / name).read_bytes(), TRUST, tmp_path, capsys, expected["step"])
    assert expected["says"] in line
    assert (expected["seq"] is None) == ("seq " not in line.split(":")[1])


def test_an_edited_embedders_field_cannot_steer_replay(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for trust in ([], ["--trust", TRUST]):
        assert main(["replay", str(VECTORS / "edited-embedders.bundle"), *trust]) == 1
        out, err = capsys.readouterr()
        assert "`embedders` is not what the signed manifest states" in err
        assert err.count("\n") == 1 and out == ""


def test_a_v1_bundle_is_refused_with_a_re_export_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for verb in (["verify", "--trust", TRUST], ["replay"]):
        assert main([verb[0], str(VECTORS / "v1.bundle"), *verb[1:]]) == 1
        out, err = capsys.readouterr()
        assert "memseal/bundle@v1" in err and "re-export" in err and out == ""
        assert err.count("\n") == 1


def test_invalid_utf8_in_a_bundle_string_gets_one_line_from_verify_and_replay(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = (VECTORS / "good.bundle").read_bytes()
    for field in (b'"run_id":"', b'"checkpoint":"', b'"manifest":"', b'"keys":["'):
        at = good.index(field) + len(field) + 1
        path = tmp_path / "utf8.bundle"
        path.write_bytes(good[:at] + b"\xc3\x28" + good[at + 2 :])
        for verb in (["verify", str(path), "--trust", TRUST], ["replay", str(path)]):
            assert main(verb) == 1, verb
            out, err = capsys.readouterr()
            assert out == "" and err.count("\n") == 1 and "format:" in err, err
    trust_file = tmp_path / "trust.vkey"
    trust_file.write_bytes(b"\xff\xfe not a key\n")
    assert main(["verify", str(VECTORS / "good.bundle"), "--trust", str(trust_file)]) == 2
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and "not UTF-8" in err, err


def test_listed_entries_are_the_exact_bundle_entries(exported: Exported) -> None:
    from memseal.ledger.entry import leaf_hash

    manifest = _manifest(exported.bundle)
    assert manifest.entries == tuple(
        Listed(seq=e.seq, leaf_hash=leaf_hash(e.leaf), payload=e.payload is not None)
        for e in exported.bundle.entries
    )
    assert manifest.calls == 4 and manifest.last_step == 3
