"""The HTTP service over one data folder (see docs/service.md and docs/design.md).

Importing this package imports no web framework: ``memseal tokens`` uses
:mod:`memseal.service.tokens` where FastAPI is not installed or not wanted.
:func:`create_app` is looked up on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .app import create_app

__all__ = ["create_app"]


def __getattr__(name: str) -> Any:
    # Lazy: `from memseal.service import create_app` imports FastAPI, the package does not.
    if name == "create_app":
        from .app import create_app

        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
