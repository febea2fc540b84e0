"""One tool as an MCP ``Tool`` definition: its hints, and whether the scope refuses it.

The hints come from the tool's traits (:data:`~.catalog.TRAITS`): reads are
read-only, forget is destructive, every tool is idempotent. A tool the scope
offers and refuses whatever an approver answers (a write under a freeze: see
:mod:`.policy`) is marked refused, so an MCP client does not ask a person to
approve a call that can only be refused:

* its description starts by saying so, with the refusal's reason;
* its ``readOnlyHint`` is true and ``destructiveHint`` false: a refused call
  changes no memory;
* its ``_meta`` names the refusal's code (``"memseal/refusal": "frozen"``),
  for a client that reads it.
"""

from __future__ import annotations

import copy
from typing import Any, Final

from .catalog import TRAITS

__all__ = ["REFUSAL_META", "mcp_definition"]

#: The ``_meta`` field of a refused tool's definition: the refusal's code.
REFUSAL_META: Final = "memseal/refusal"


def _annotations(name: str) -> dict[str, Any]:
    traits = TRAITS.get(name)
    if traits is None:  # a tool of another source: claim nothing
        return {}
    return {
        "title": traits.title,
        "readOnlyHint": traits.read_only,
        "destructiveHint": traits.destructive,
        "idempotentHint": traits.idempotent,
        "openWorldHint": False,
    }


def mcp_definition(
    name: str, description: str, parameters: dict[str, Any], refusal: Any = None
) -> dict[str, Any]:
    """The MCP ``Tool`` (wire form) of one tool; ``refusal``: the policy refusal every
    call of it meets (a :class:`~.policy.Refusal`), or None."""
    definition: dict[str, Any] = {
        "name": name,
        "description": description,
        "inputSchema": copy.deepcopy(parameters),
    }
    annotations = _annotations(name)
    code = getattr(refusal, "code", None)
    if isinstance(code, str):
        reason = str(refusal).removeprefix(f"{name}: ")
        definition["description"] = (
            f"Refused: {reason}; a call changes nothing and needs no approval. {description}"
        )
        definition["_meta"] = {REFUSAL_META: code}
        if annotations:
            annotations["title"] = f"{annotations['title']} (refused: {code})"
            annotations["readOnlyHint"] = True
            annotations["destructiveHint"] = False
    if annotations:
        definition["title"] = annotations["title"]
        definition["annotations"] = annotations
    return definition
