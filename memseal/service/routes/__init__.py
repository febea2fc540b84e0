"""The HTTP routes, one :class:`fastapi.APIRouter` per OpenAPI tag.

:data:`ROUTERS` is in the order the app includes them (the order of the
OpenAPI document). A route's docstring starts with a form feed
(``\\f``): FastAPI puts what comes before one into the operation's
description, and the ``summary`` says there what the route does, so the
docstrings are for readers of the code only.
"""

from __future__ import annotations

from typing import Final

from fastapi import APIRouter

from . import admin, audit, browse, ledger, ops, runs, tlog, tools

__all__ = ["ROUTERS"]

ROUTERS: Final[tuple[APIRouter, ...]] = (
    ops.router,
    tools.router,
    runs.router,
    ledger.router,
    admin.router,
    browse.router,
    audit.router,
    tlog.router,
)
