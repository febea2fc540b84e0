"""The console with a witness: ``serve --witness`` serves the checkpoint with a witness's
cosignature line (C2SP cosignature/v1, a signature of 4 + 8 + 64 bytes). The in-browser
verifier must pass such a note (a line of a key it does not trust is ignored, as the
signed-note rules say, whatever its length) and the console shows the cosignature.

Both servers are real: the witness app and memseal's app under uvicorn on loopback.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from browser.console_support import Server, seeded_server, serve_in_thread, sign_in

from memseal.ledger.cosignature import Cosigner
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
