"""What both log stores are told before and between group commits, kept once.

The layers above add their tables (``add_schema``) and hooks before the store
opens; the ledger hands over a rotated key (``use_signer``) and says where a
key another process rotated to can be found (``set_key_source``). The store's
group commit reads all of it; see :mod:`.sqlite` and :mod:`.postgres`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from ._txn import KeySource
from .errors import StorageError
from .note import NoteSigner

__all__ = ["StoreSetup"]

TxnT = TypeVar("TxnT")


class StoreSetup(Generic[TxnT]):
    """The set-up half of a store whose write transactions are ``TxnT``."""

    def __init__(self, signer: NoteSigner | None, schema: str) -> None:
        self._signer = signer
        self._schema: list[str] = [schema]
        self._hooks: list[Callable[[TxnT, int, bytes], None]] = []
        self._commit_hooks: list[Callable[[TxnT], None]] = []
        self._key_source: KeySource | None = None

    def add_schema(self, ddl: str) -> None:
        """Tables of the layers above, created with the log's own (before ``open``)."""
        self._schema.append(ddl)

    def add_append_hook(self, hook: Callable[[TxnT, int, bytes], None]) -> None:
        """Run ``hook(txn, seq, leaf_hash)`` inside the transaction after each append."""
        self._hooks.append(hook)

    def add_commit_hook(self, hook: Callable[[TxnT], None]) -> None:
        """Run ``hook(txn)`` after a group's commands, inside its transaction.

        A hook that raises fails the whole group: it guards the log itself
        (the checkpoint policy refuses to sign an inconsistent tree).
        """
        self._commit_hooks.append(hook)

    @property
    def signer(self) -> NoteSigner:
        if self._signer is None:
            raise StorageError("this ledger store is open read-only")
        return self._signer

    def use_signer(self, signer: NoteSigner) -> None:
        """Sign later groups with ``signer`` (after a committed key rotation)."""
        self._signer = signer

    def set_key_source(self, source: KeySource) -> None:
        """Where to find the key another process rotated to (see ``adopt_current_key``)."""
        self._key_source = source
