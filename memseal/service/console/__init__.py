"""The web console: static ES modules served by the app at ``/`` and ``/console/``.

Plain ES modules and one stylesheet, no build step: the browser loads the files
as they are in the package, so the console works offline, needs no Node
toolchain to develop, and what a reviewer reads is what runs. Every datum
comes from the public ``/v1`` API with the tab's bearer token, so the
console shows only what the token's role and reach allow (see
docs/service.md, "The console").
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

__all__ = ["ASSETS"]

#: The folder of the console's files (package data).
ASSETS: Final = Path(__file__).parent / "static"
