"""``memseal witness serve`` and ``memseal serve --witness`` as real processes on loopback,
and ``memseal verify --witness`` counting the cosignatures they exchanged."""

from __future__ import annotations

import hashlib
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from witness_support import (
    BIN,
    WitnessThread,
    follow,
    free_port,
    grow,
    memseal_cli,
    new_witness,
    vkey_of,
)

import memseal
from memseal.ledger.cosignature import parse_cosigner_vkey, require_cosignatures
from memseal.witness.client import WITNESSED_FILE, WitnessRelay, WitnessTarget


def _wait(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 120
    while True:
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        assert proc.poll() is None, log.read_text()
        assert time.monotonic() < deadline, f"{url} did not come up: {log.read_text()}"
        time.sleep(0.1)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture
def started(tmp_path: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            _stop(proc)


def _witness_process(
    folder: Path, port: int, log: Path, started: list[subprocess.Popen[bytes]]
) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [str(BIN / "memseal"), "witness", "serve", "--data", str(folder), "--port", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    started.append(proc)
    _wait(f"http://127.0.0.1:{port}/vkey", proc, log)
    return proc


def _ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_serve_witnesses_each_checkpoint_and_verify_counts_the_cosignatures(
    tmp_path: Path, started: list[subprocess.Popen[bytes]]
) -> None:
    data, wdir = tmp_path / "data", tmp_path / "witness"
    log_vkey = _ok(memseal_cli("keys", "new", "--data", str(data))).strip()
    _ok(memseal_cli("demo", "--data", str(data)))
    witness_vkey = _ok(
        memseal_cli("witness", "init", "--data", str(wdir), "--name", "witness.test/w1")
    ).strip()
    followed = memseal_cli("witness", "follow", "--data", str(wdir), "--vkey", log_vkey)
    assert "following" in _ok(followed)

    wport, sport = free_port(), free_port()
    witness = _witness_process(wdir, wport, tmp_path / "witness.log", started)
    serve_log = tmp_path / "serve.log"
    with serve_log.open("wb") as out:
        serve = subprocess.Popen(
            [
                str(BIN / "memseal"),
                "serve",
                "--data",
                str(data),
                "--port",
                str(sport),
                "--embedder",
                "none",
                "--witness",
                f"http://127.0.0.1:{wport},{witness_vkey}",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    started.append(serve)
    url = f"http://127.0.0.1:{sport}"
    _wait(f"{url}/healthz", serve, serve_log)
    admin = next(
        line.split(": ", 1)[1]
        for line in serve_log.read_text().splitlines()
        if line.startswith("admin token")
    )
    client = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {admin}"}, timeout=30)

    # 1. The checkpoint route serves the log's signature and the witness's cosignature.
    first = client.get("/v1/ledger/checkpoint")
    assert first.status_code == 200, first.text
    lines = first.text.split("\n\n", 1)[1].splitlines()
    assert [line.split()[1] for line in lines] == [log_vkey.split("+")[0], "witness.test/w1"]
    (tmp_path / "kept.checkpoint").write_text(first.text, encoding="utf-8")

    # 2. The log grows in another process; serve sends the new checkpoint with its proof.
    _ok(memseal_cli("demo", "--data", str(data)))
    plain = _ok(memseal_cli("checkpoint", "--data", str(data)))
    (tmp_path / "plain.checkpoint").write_text(plain, encoding="utf-8")
    origin_hash = hashlib.sha256(log_vkey.split("+")[0].encode()).hexdigest()
    size = plain.split("\n")[1]
    deadline = time.monotonic() + 60
    while True:
        seen = httpx.get(f"http://127.0.0.1:{wport}/{origin_hash}/checkpoint", timeout=5)
        if seen.status_code == 200 and seen.text.split("\n")[1] == size:
            break
        assert time.monotonic() < deadline, (seen.status_code, seen.text, serve_log.read_text())
        time.sleep(0.2)
    grown = client.get("/v1/ledger/checkpoint").text
    assert grown.startswith(plain.split("\n\n")[0]) and "\u2014 witness.test/w1 " in grown
    client.close()
    _stop(serve)
    _stop(witness)

    # 3. verify holds the ledger to the cosigned checkpoints.
    trust = ["--trust", log_vkey, "--witness", witness_vkey]
    assert "ok:" in _ok(memseal_cli("verify", str(data), *trust))  # the one serve kept
    _ok(memseal_cli("verify", str(data), *trust, "--checkpoint", str(tmp_path / "kept.checkpoint")))
    unwitnessed = memseal_cli(
        "verify", str(data), *trust, "--checkpoint", str(tmp_path / "plain.checkpoint")
    )
    assert unwitnessed.returncode == 1, unwitnessed.stderr
    assert "FAILED: witness: checkpoint of size" in unwitnessed.stderr
    other = _ok(memseal_cli("witness", "init", "--data", str(tmp_path / "w2"), "--name", "w2"))
    two = memseal_cli("verify", str(data), *trust, "--witness", other.strip(), "--witnesses", "2")
    assert two.returncode == 1 and "1 valid cosignature(s)" in two.stderr, two.stderr
    too_many = memseal_cli("verify", str(data), *trust, "--witnesses", "2")
    assert too_many.returncode == 2 and too_many.stderr.count("\n") == 1, too_many.stderr

    # 4. The witness kept its state across its stop, and holds no evidence.
    listed = _ok(memseal_cli("witness", "logs", "--data", str(wdir)))
    assert f"size={size}" in listed
    assert memseal_cli("witness", "evidence", "--data", str(wdir)).returncode == 0


def test_witness_cli_errors_are_one_line(tmp_path: Path) -> None:
    missing = memseal_cli("witness", "logs", "--data", str(tmp_path / "none"))
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1, missing.stderr
    assert "not a witness folder" in missing.stderr
    _ok(memseal_cli("witness", "init", "--data", str(tmp_path / "w"), "--name", "w/1"))
    again = memseal_cli("witness", "init", "--data", str(tmp_path / "w"), "--name", "w/1")
    assert again.returncode == 2 and "never overwritten" in again.stderr, again.stderr
    bad = memseal_cli("witness", "follow", "--data", str(tmp_path / "w"), "--vkey", "nonsense")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1, bad.stderr
    serve = memseal_cli("serve", "--data", str(tmp_path / "d"), "--witness", "no-comma")
    assert serve.returncode == 2 and "URL,VKEY" in serve.stderr, serve.stderr
    logkey = _ok(memseal_cli("keys", "new", "--data", str(tmp_path / "d2"))).strip()
    wrong_type = memseal_cli(
        "serve", "--data", str(tmp_path / "d3"), "--witness", f"http://127.0.0.1:1,{logkey}"
    )
    assert wrong_type.returncode == 2 and "not cosignature/v1" in wrong_type.stderr


async def test_relay_restart_learns_the_witness_size_and_sends_the_proof_from_it(
    tmp_path: Path,
) -> None:

    log = tmp_path / "log"
    first, _ = await grow(log, 2, "before")
    new_witness(tmp_path / "w")
    follow(tmp_path / "w", await vkey_of(log))
    with WitnessThread(tmp_path / "w") as witness:
        target = WitnessTarget(url=witness.url, key=parse_cosigner_vkey(witness.vkey))
        async with memseal.open(log, embedder=None, checkpoint_interval=None) as memory:
            relay = WitnessRelay(memory.ledger, [target], folder=log)
            try:
                cosigned = await relay.witnessed(first)
            finally:
                await relay.close()
            await memory.ledger.append("note", {"after": "restart"})
            second = await memory.ledger.checkpoint()
            # A new relay (serve restarted) knows nothing: it sends old 0, gets 409 with
            # the witness's size, and sends the proof from there.
            relay = WitnessRelay(memory.ledger, [target], folder=log)
            try:
                again = await relay.witnessed(second)
            finally:
                await relay.close()
        down = WitnessTarget(url="http://127.0.0.1:1", key=target.key)
        async with memseal.open(log, embedder=None, checkpoint_interval=None) as memory:
            relay = WitnessRelay(memory.ledger, [down], timeout=2)
            try:
                unwitnessed = await relay.witnessed(second)
                assert unwitnessed == second and "unreachable" in relay.errors[down.url]
            finally:
                await relay.close()
    assert len(require_cosignatures(cosigned, [target.key], 1)) == 1
    assert len(require_cosignatures(again, [target.key], 1)) == 1
    assert (log / WITNESSED_FILE).read_text(encoding="utf-8") == again
