"""Any run id, on every run route: a clean answer, never a 500 or a broken header.

The attack: a run id outside Latin-1 (an emoji), or with a quote, a semicolon or a
control character, broke the export's Content-Disposition header (500). The routes accept
1 to 200 printable characters; anything else is refused with 400 on every route.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, unquote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parents[1] / "integration"))
from test_service_support import ServerThread

PLACE = "team:ids/agent:x"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    with ServerThread(tmp_path_factory.mktemp("ids") / "data") as running:
        yield running


@pytest.fixture(scope="module")
def client(server: ServerThread) -> Iterator[httpx.Client]:
    with server.client(server.token("agent", PLACE)) as c:
        yield c


def _filename_star(header: str) -> str:
    for part in header.split(";"):
        name, _, value = part.strip().partition("=")
        if name == "filename*":
            assert value.startswith("UTF-8''"), header
            return unquote(value[len("UTF-8''") :], errors="strict")
    raise AssertionError(f"no filename* in {header!r}")


def test_an_emoji_run_id_exports_with_its_name_intact(client: httpx.Client) -> None:
    run = 'run "😀"; evil=1'
    path = f"/v1/runs/{quote(run, safe='')}"
    stored = client.post(f"{path}/tools/memory_store", json={"learning": {"text": "emoji run"}})
    assert stored.status_code == 200, stored.text
    assert stored.json()["run_id"] == run
    exported = client.get(f"{path}/export")
    assert exported.status_code == 200, exported.text
    header = exported.headers["content-disposition"]
    assert header.isascii()
    assert _filename_star(header) == f"{run}.bundle"
    fallback = header.split(";")[1].strip()
    assert fallback.startswith('filename="') and fallback.count('"') == 2, header


_IDS = st.text(min_size=0, max_size=210)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=25)
@given(run=_IDS)
def test_no_run_id_reaches_a_server_error_on_any_run_route(client: httpx.Client, run: str) -> None:
    path = f"/v1/runs/{quote(run, safe='')}"
    good = 1 <= len(run) <= 200 and run.isprintable() and "/" not in run
    answers = [
        client.post(f"{path}/tools/memory_store", json={"learning": {"text": "id probe"}}),
        client.get(path),
        client.get(f"{path}/export"),
        client.delete(path),
    ]
    for answer in answers:
        assert answer.status_code < 500, (run, answer.status_code, answer.text)
        assert "error" in answer.json() or answer.status_code == 200
    if good:
        stored, status, exported, closed = answers
        assert stored.status_code == 200, (run, stored.text)
        assert stored.json()["run_id"] == run
        assert status.status_code == 200 and status.json()["run_id"] == run
        assert exported.status_code == 200, (run, exported.text)
        assert _filename_star(exported.headers["content-disposition"]) == f"{run}.bundle"
        assert closed.status_code == 200
    elif run and "/" not in run:
        # Too long or unprintable: refused with 400 by every route, not stored.
        for answer in answers:
            assert answer.status_code in (400, 422), (run, answer.status_code, answer.text)
