"""The ``memseal`` pytest plugin: session bundles as regression tests.

* ``memseal_session`` fixture: ``memseal_session(path, trust=None)`` loads and
  verifies a bundle and returns a :class:`~memseal.replay.regress.replayer.Replayer`
  (``await replayer.run(agent)`` runs the host's agent against its memos).
* ``--memseal-sessions DIR``: every ``*.bundle`` file in DIR becomes a test
  that verifies it (against ``--memseal-trust VKEY`` when given, else the
  bundle's own first key) and replays it with the current memseal code from
  the bundle alone; a changed result fails with the per-step diff.

Enabled by the ``pytest11`` entry point ``memseal``, or with
``pytest_plugins = ["memseal.replay.regress.pytest_plugin"]``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memseal.ledger.errors import VerificationError
from memseal.replay.evidence.bundle import decode_bundle, verify_bundle
from memseal.replay.evidence.source import default_trust

from .regress import DEFAULT_TOLERANCE, embedder_for, regress
from .replayer import Replayer

__all__ = ["BundleItem", "memseal_session"]


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add ``--memseal-sessions`` (a folder of bundles) and ``--memseal-trust``."""
    group = parser.getgroup("memseal", "memseal session bundles")
    group.addoption(
        "--memseal-sessions",
        metavar="DIR",
        default=None,
        help="replay every *.bundle in DIR as a test",
    )
    group.addoption(
        "--memseal-trust",
        metavar="VKEY",
        default=None,
        help="the vkey the bundles must verify against (default: each bundle's first key)",
    )


class BundleFailure(Exception):
    """A bundle that fails verification or whose replayed results changed."""


class BundleItem(pytest.Item):
    """One bundle: verify, then replay from the bundle alone."""

    def __init__(self, *, bundle: Path, trust: str | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.bundle = bundle
        self.trust = trust

    def runtest(self) -> None:
        """Verify the bundle and re-execute its run; a changed step fails the test."""
        bundle = decode_bundle_or_fail(self.bundle)
        try:
            verified = verify_bundle(bundle, self.trust or default_trust(bundle).vkey)
        except VerificationError as exc:
            raise BundleFailure(f"{self.bundle.name}: verification failed: {exc}") from None
        report = asyncio.run(
            regress(verified, embedder=embedder_for(verified), tolerance=DEFAULT_TOLERANCE)
        )
        if report.changed:
            raise BundleFailure(report.text())

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        """A bundle failure as its one-line message, not a traceback."""
        if isinstance(excinfo.value, BundleFailure):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        """Where pytest reports the item: the bundle file."""
        return self.bundle, None, f"memseal session {self.bundle.name}"


def decode_bundle_or_fail(path: Path) -> Any:
    """Decode the bundle at ``path``, failing the test with a clear line if it cannot."""
    try:
        return decode_bundle(path.read_bytes())
    except VerificationError as exc:
        raise BundleFailure(f"{path.name}: verification failed: {exc}") from None


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    """Add one test item per ``*.bundle`` in ``--memseal-sessions``."""
    folder = config.getoption("--memseal-sessions")
    if folder is None:
        return
    trust = config.getoption("--memseal-trust")
    for path in sorted(Path(folder).glob("*.bundle")):
        items.append(
            BundleItem.from_parent(
                session, name=f"memseal-session[{path.name}]", bundle=path, trust=trust
            )
        )


@pytest.fixture
def memseal_session() -> Callable[..., Replayer]:
    """Load and verify a bundle: ``memseal_session(path, trust=None) -> Replayer``."""

    def load(path: str | Path, trust: str | None = None) -> Replayer:
        return Replayer.load(path, trust=trust)

    return load
