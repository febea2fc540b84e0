"""The console with a witness: ``serve --witness`` serves the checkpoint with a witness's
cosignature line (C2SP cosignature/v1, a signature of 4 + 8 + 64 bytes). The in-browser
verifier must pass such a note (a line of a key it does not trust is ignored, as the
signed-note rules say, whatever its length) and the console shows the cosignature; given
the witness's key (kept apart from the log's: neither is accepted as the other), it
checks the cosignature, and a changed byte or a witness that did not cosign turns it red.

Both servers are real: the witness app and memseal's app under uvicorn on loopback.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from browser.console_support import Server, seeded_server, serve_in_thread, shoot, sign_in
from nacl.signing import SigningKey

from memseal.ledger.cosignature import Cosigner, format_cosigner_vkey
from memseal.witness.app import create_witness_app, open_witness
from memseal.witness.state import WitnessStore, create_witness_key

WITNESS = "witness.test/w1"


@pytest.fixture(scope="module")
def witnessed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    top = tmp_path_factory.mktemp("witnessed")
    data, wdir = top / "data", top / "witness"
    # The witness is made and follows the log before the first checkpoint is served.
    witness_vkey = Cosigner(create_witness_key(wdir, WITNESS)).vkey
    # seeded_server needs the witness's URL, the witness needs the log's vkey: seed first
    # through a server that names no witness, then serve the same folder with one.
    seeded_server(data).stop()
    store = WitnessStore(wdir, create=True)
    try:
        store.follow((data / "keys" / "ledger.vkey").read_text().strip())
    finally:
        store.close()
    witness = open_witness(wdir)
    wurl, wserver, wthread = serve_in_thread(create_witness_app(witness))
    server = Server(data, witnesses=(f"{wurl},{witness_vkey}",))
    server.tokens = {"auditor": server.token("auditor", "team:acme")}
    server.start()
    try:
        yield server
    finally:
        server.stop()
        wserver.should_exit = True
        wthread.join(timeout=30)
        witness.store.close()


def test_verify_passes_a_cosigned_checkpoint_and_names_its_witness(
    witnessed: Server, page: Any
) -> None:
    note = httpx.get(
        f"{witnessed.url}/v1/ledger/checkpoint",
        headers={"Authorization": f"Bearer {witnessed.tokens['auditor']}"},
        timeout=30,
    ).text
    signers = [line.split()[1] for line in note.split("\n\n", 1)[1].splitlines()]
    assert signers[-1] == WITNESS, note  # the served note does carry the cosignature
    sign_in(page, witnessed, witnessed.tokens["auditor"], "#/verify")
    page.get_by_label("Trusted vkeys (one a line)").fill(witnessed.vkey())
    page.get_by_role("button", name="Verify checkpoint and entries").click()
    verdict = page.locator("[data-verdict]").first
    verdict.wait_for(timeout=30_000)
    assert verdict.get_attribute("data-verdict") == "pass", verdict.inner_text()
    checks = page.get_by_role("list", name="Checks of the checkpoint and entries").inner_text()
    assert re.search(rf"cosigned by witness {re.escape(WITNESS)}\+[0-9a-f]{{8}} at 20", checks)


def test_overview_lists_the_witness_cosignatures_of_the_latest_checkpoint(
    witnessed: Server, page: Any
) -> None:
    sign_in(page, witnessed, witnessed.tokens["auditor"], "#/overview")
    table = page.get_by_role(
        "table", name="Witness cosignatures the latest checkpoint claims", exact=False
    )
    table.wait_for(timeout=10_000)
    rows = table.locator("tbody tr")
    assert rows.count() == 1
    cells = rows.first.locator("td").all_inner_texts()
    assert cells[0] == WITNESS and re.fullmatch(r"[0-9a-f]{8}", cells[1]), cells
    assert re.fullmatch(r"20\d\d-\d\d-\d\dT\d\d:\d\d:\d\d\.000Z", cells[2]), cells
    assert page.get_by_text("No witness cosigns this checkpoint").count() == 0


def test_a_line_of_an_untrusted_key_never_breaks_a_page_whatever_it_holds(
    witnessed: Server, page: Any
) -> None:
    # Anyone who can add a line to the served note (a hostile witness, a proxy) controls
    # its bytes: a cosignature whose timestamp no Date holds, a bare 4-byte key id.
    sign_in(page, witnessed, witnessed.tokens["auditor"], "#/overview")
    found = page.evaluate(
        """async () => {
          const m = await import("./crypto.js");
          const b64 = (n, byte) => btoa(String.fromCharCode(...new Array(n).fill(byte)));
          const note = "log\\n1\\n" + b64(32, 0) + "\\n\\n" +
            "\u2014 log " + b64(68, 0) + "\\n" +
            "\u2014 w " + b64(76, 255) + "\\n" +
            "\u2014 bare " + b64(4, 7) + "\\n";
          return {
            sigs: m.parseNote(note).sigs.map((s) => [s.name, s.sig.length]),
            cosigned: m.cosignatures(note),
          };
        }"""
    )
    assert found["sigs"] == [["log", 64], ["w", 72], ["bare", 0]], found
    assert found["cosigned"] == [{"name": "w", "id": "ffffffff", "time": "invalid time"}], found


def _witness_vkey(server: Server) -> str:
    return server.witnesses[0].split(",", 1)[1]


def _verify(page: Any, server: Server, log_keys: str, witness_keys: str) -> Any:
    # Signed in once a page: the token stays in the tab's session storage.
    if not page.url.startswith(server.url):
        sign_in(page, server, server.tokens["auditor"], "#/verify")
    page.get_by_label("Trusted vkeys (one a line)").fill(log_keys)
    page.get_by_label("Witness vkeys (one a line; optional)").fill(witness_keys)
    page.get_by_role("button", name="Verify checkpoint and entries").click()
    verdict = page.locator("[data-verdict]").first
    verdict.wait_for(timeout=30_000)
    return verdict


def test_verify_checks_the_cosignature_against_the_witness_key_pasted(
    witnessed: Server, page: Any, artifacts: Path
) -> None:
    verdict = _verify(page, witnessed, witnessed.vkey(), _witness_vkey(witnessed))
    assert verdict.get_attribute("data-verdict") == "pass", verdict.inner_text()
    checks = page.get_by_role("list", name="Checks of the checkpoint and entries").inner_text()
    assert re.search(
        rf"cosigned by witness {re.escape(WITNESS)}\+[0-9a-f]{{8}} at 20\S+: its cosignature/v1 "
        "verifies",
        checks,
    ), checks
    assert "not checked: give its witness vkey" not in checks
    shoot(page, artifacts, "verify-witness")


def test_a_witness_key_is_never_a_log_key_nor_a_log_key_a_witness_key(
    witnessed: Server, page: Any
) -> None:
    # The witness's key where the log's goes: refused, naming what it is.
    verdict = _verify(page, witnessed, _witness_vkey(witnessed), "")
    assert verdict.get_attribute("data-verdict") == "fail"
    assert "is a witness's cosignature key (type 0x04), not a log key" in verdict.inner_text()
    # Both in the log's box: still refused, the witness key is not taken for a log key.
    both = f"{witnessed.vkey()}\n{_witness_vkey(witnessed)}"
    verdict = _verify(page, witnessed, both, "")
    assert verdict.get_attribute("data-verdict") == "fail"
    # The log's key where a witness's goes.
    verdict = _verify(page, witnessed, witnessed.vkey(), witnessed.vkey())
    assert verdict.get_attribute("data-verdict") == "fail"
    assert "is a log's note key (type 0x01), not a witness's" in verdict.inner_text()


def test_a_bad_or_missing_cosignature_turns_verify_red_naming_the_witness(
    witnessed: Server, page: Any, artifacts: Path
) -> None:
    witness = _witness_vkey(witnessed)
    named = "+".join(witness.split("+")[:2])

    def flip(route: Any) -> None:
        # A proxy between the browser and the server changes one byte of the cosignature
        # (its signature, not its timestamp); the log's own signature line is untouched.
        answer = route.fetch()
        text, sigs = answer.text().split("\n\n", 1)
        lines = sigs.splitlines()
        last = lines[-1].split(" ")
        raw = bytearray(base64.b64decode(last[2]))
        raw[-1] ^= 1
        lines[-1] = " ".join([last[0], last[1], base64.b64encode(bytes(raw)).decode()])
        route.fulfill(response=answer, body=text + "\n\n" + "\n".join(lines) + "\n")

    page.route("**/v1/ledger/checkpoint", flip)
    verdict = _verify(page, witnessed, witnessed.vkey(), witness)
    text = verdict.inner_text()
    assert verdict.get_attribute("data-verdict") == "fail", text
    assert f"cosignature: the cosignature by {named} does not verify" in text, text
    shoot(page, artifacts, "verify-witness-bad")
    page.unroute("**/v1/ledger/checkpoint")
    # Another witness of the same name: its key id differs, so no line is its, and the page
    # says the witness it was told to trust has not cosigned.
    other = format_cosigner_vkey(WITNESS, bytes(SigningKey.generate().verify_key))
    verdict = _verify(page, witnessed, witnessed.vkey(), other)
    assert verdict.get_attribute("data-verdict") == "fail"
    other_named = "+".join(other.split("+")[:2])
    assert f"no cosignature by the witness {other_named}" in verdict.inner_text()
