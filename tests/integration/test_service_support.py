"""Helpers for the service tests (no tests here): a real uvicorn server in a thread."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from memseal.cli.service import first_admin
from memseal.service.app import create_app
from memseal.service.tokens import TokenStore, scope_from


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerThread:
    """``memseal serve`` in-process: uvicorn on 127.0.0.1 in a thread of its own."""

    def __init__(self, folder: Path, **options: Any) -> None:
        self.folder = folder
        self.admin = first_admin(folder)
        options.setdefault("embedder", None)
        options.setdefault("checkpoint_interval", None)
        self.app = create_app(folder, **options)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(
            self.app,
            host="127.0.0.1",
            port=self.port,
            log_level="warning",
            ws="none",
            lifespan="on",
            access_log=False,
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)

    def token(self, role: str, place: str, **fields: Any) -> str:
        store = TokenStore(self.folder)
        try:
            made, _ = store.add(role, scope_from(role=role, place=place, **fields))
        finally:
            store.close()
        return made

    def client(self, token: str | None) -> httpx.Client:
        headers = {} if token is None else {"Authorization": f"Bearer {token}"}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)


def assert_error(response: httpx.Response, status: int, code: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, (response.status_code, response.text)
    body = response.json()
    assert set(body["error"]) == {"code", "message"}, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    if code is not None:
        assert body["error"]["code"] == code, body
    return body  # type: ignore[no-any-return]
