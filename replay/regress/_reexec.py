"""Re-executing a recorded run: the cursor map regression replay and ``replay --update`` share.

Both rebuild, in a temporary log, the memory each recorded call observed,
from the entries of an :class:`~memseal.replay.evidence.source.EvidenceSource`,
then make the call again through the tools layer. :class:`Cursors` carries a
page's re-made cursor to the call that continues it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Cursors"]


class Cursors:
    """Each recorded ``next_cursor``, and the one its re-made page returned.

    A cursor holds a ref keyed by the instance secret, so a page re-made without the
    recording's secret returns another cursor text for the very same page. A later
    call continuing the recorded cursor is sent the re-made one, so what it continues
    is compared (or re-recorded) in that call's result.
    """

    def __init__(self) -> None:
        self.made: dict[str, str] = {}

    @staticmethod
    def continued(arguments: Any) -> str | None:
        """The cursor a call's arguments continue, if any."""
        cursor = arguments.get("cursor") if isinstance(arguments, dict) else None
        return cursor if isinstance(cursor, str) else None

    def send(self, arguments: Any) -> Any:
        """The arguments with a recorded cursor swapped for its re-made one."""
        cursor = self.continued(arguments)
        if cursor is None or cursor not in self.made:
            return arguments
        return {**arguments, "cursor": self.made[cursor]}

    def knows(self, arguments: Any) -> bool:
        """Whether a call continues no cursor, or one whose page was re-made with one."""
        cursor = self.continued(arguments)
        return cursor is None or cursor in self.made

    def seen(self, recorded: Any, new: Any) -> Any:
        """Keep the page's re-made cursor; ``new`` with the recorded one where both go on."""
        if not (isinstance(recorded, dict) and isinstance(new, dict)):
            return new
        old, made = recorded.get("next_cursor"), new.get("next_cursor")
        if not (isinstance(old, str) and isinstance(made, str)):
            return new
        self.made[old] = made
        return {**new, "next_cursor": old}
