"""Payload hashes checked in the browser: the console's own BLAKE3 module against the
Python blake3 package and the specification's vectors, a good ledger's payloads passing
Verify here, and a payload edited in the database turning it red, naming the seq."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import blake3
from browser.console_support import Server, in_thread, shoot, sign_in

import memseal

#: Input lengths of the BLAKE3 test vectors (input byte i is i % 251): one block and one
#: chunk at their edges, and trees of 2 to 100 chunks, balanced and not.
LENGTHS = [0, 1, 63, 64, 65, 127, 128, 1023, 1024, 1025, 2048, 2049, 3072, 3073, 4096, 4097,
           5120, 5121, 6144, 6145, 7168, 7169, 8192, 8193, 16384, 31744, 102400]  # fmt: skip
#: From the BLAKE3 specification's test_vectors.json (the first 32 bytes of each hash).
SPEC = {
    0: "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262",
    1: "2d3adedff11b61f14c886e35afa036736dcd87a74d27b5c1510225d0f592e213",
}


def test_the_consoles_blake3_matches_the_reference_on_the_test_vector_lengths(
    server: Server, page: Any
) -> None:
    page.goto(f"{server.url}/console/")
    got = page.evaluate(
        """async (lengths) => {
          const m = await import("./blake3.js");
          const out = {};
          for (const n of lengths) {
            const b = new Uint8Array(n);
            for (let i = 0; i < n; i++) b[i] = i % 251;
            out[n] = m.blake3Hex(b);
          }
          out.abc = m.blake3Hex(new TextEncoder().encode("abc"));
          return out;
        }""",
        LENGTHS,
    )
    for n in LENGTHS:
        assert got[str(n)] == blake3.blake3(bytes(i % 251 for i in range(n))).hexdigest(), n
    for n, expected in SPEC.items():
        assert got[str(n)] == expected
    assert got["abc"] == blake3.blake3(b"abc").hexdigest()


def _verify(page: Any, server: Server) -> Any:
    page.get_by_label("Trusted vkeys (one a line)").fill(server.vkey())
    page.get_by_role("button", name="Verify checkpoint and entries").click()
    verdict = page.locator("[data-verdict]").first
    verdict.wait_for(timeout=30_000)
    return verdict


def test_verify_here_checks_the_payloads_in_reach_against_their_signed_hashes(
    server: Server, page: Any
) -> None:
    sign_in(page, server, server.tokens["auditor"], "#/verify")
    verdict = _verify(page, server)
    assert verdict.get_attribute("data-verdict") == "pass", verdict.inner_text()
    checks = page.get_by_role("list", name="Checks of the checkpoint and entries").inner_text()
    # The auditor at team:acme reads the acme payloads, not acme-corp's.
    with sqlite3.connect(server.folder / "ledger.db") as db:
        (stored,) = db.execute("SELECT count(*) FROM payloads").fetchone()
    assert "whole payloads hash" in checks and "withheld from this token" in checks
    shown = int(checks.split("payloads: ", 1)[1].split(" ", 1)[0])
    assert 0 < shown < stored, checks
    # One entry's page checks its payload too.
    page.goto(f"{server.url}/#/ledger/1")
    page.locator("[data-payload-check]").wait_for()
    assert page.locator("[data-payload-check]").get_attribute("data-payload-check") == "pass"


def test_a_payload_edited_in_the_database_turns_verify_red_naming_the_seq(
    tmp_path: Path, page: Any, artifacts: Path
) -> None:
    folder = tmp_path / "data"
    in_thread(lambda: _stored(folder))
    with sqlite3.connect(folder / "ledger.db") as db:
        rows = db.execute("SELECT seq, data FROM payloads ORDER BY seq").fetchall()
        seq, data = next((s, bytes(d)) for s, d in rows if b"the second note" in bytes(d))
        # Same length, still JSON: only the hash can tell.
        db.execute(
            "UPDATE payloads SET data = ? WHERE seq = ?",
            (data.replace(b"the second note", b"the secund note"), seq),
        )
    server = Server(folder)
    server.tokens = {"auditor": server.token("auditor", "team:acme")}
    server.start()
    try:
        sign_in(page, server, server.tokens["auditor"], "#/verify")
        verdict = _verify(page, server)
        text = verdict.inner_text()
        assert verdict.get_attribute("data-verdict") == "fail", text
        assert f"seq {seq}: payload hash" in text, text
        shoot(page, artifacts, "verify-payload-tampered")
        page.goto(f"{server.url}/#/ledger/{seq}")
        check = page.locator("[data-payload-check]")
        check.wait_for()
        assert check.get_attribute("data-payload-check") == "fail"
        assert f"seq {seq}: payload hash" in check.inner_text()
    finally:
        server.stop()


async def _stored(folder: Path) -> None:
    async with memseal.open(folder, embedder=None, checkpoint_interval=None) as memory:
        scope = memseal.ToolScope.placed_at("team:acme/agent:writer")
        async with memory.run("r", scope) as run:
            await run.call("memory_store", {"learning": {"text": "the first note"}})
            await run.call("memory_store", {"learning": {"text": "the second note"}})
        await memory.ledger.checkpoint()


def test_what_a_forget_leaves_of_a_payload_is_checked_text_by_text(
    tmp_path: Path, page: Any
) -> None:
    folder = tmp_path / "data"
    in_thread(lambda: _forgotten(folder))
    server = Server(folder)
    server.tokens = {"auditor": server.token("auditor", "team:acme")}
    server.start()
    try:
        sign_in(page, server, server.tokens["auditor"], "#/verify")
        verdict = _verify(page, server)
        assert verdict.get_attribute("data-verdict") == "pass", verdict.inner_text()
        checks = page.get_by_role("list", name="Checks of the checkpoint and entries")
        assert "1 residues of a forget text by text" in checks.inner_text()
        assert "erased by a signed forget" in checks.inner_text()
    finally:
        server.stop()


async def _forgotten(folder: Path) -> None:
    async with memseal.open(folder, embedder=None, checkpoint_interval=None) as memory:
        scope = memseal.ToolScope.placed_at("team:acme/agent:writer")
        async with memory.run("r", scope) as run:
            first = await run.call("memory_store", {"learning": {"text": "the first note"}})
            await run.call("memory_store", {"learning": {"text": "the second note"}})
            await run.call("memory_list", {})  # its result holds both texts
        await memory.engine.forget(ids=[first["id"]])
        await memory.ledger.checkpoint()
