"""The tool names and schemas every host's model is told, frozen.

A change to a name, a description or a schema changes what models are told,
so this test fails until the fixture is regenerated on purpose:

    BLESS_TOOL_CONTRACTS=1 .venv/bin/pytest tests/unit/tools/test_tool_contracts.py

The fixture is generated with the default install: every fetch mode served.
Besides the shared schema it freezes the per-runtime variants: the top-level
rules only Anthropic takes, and the parameters OpenAI strict mode gets.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from memseal.engine import Engine
from memseal.tools import MemoryTools, ToolScope
from memseal.tools.specs import openai_strict, root_rules

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "tool_contracts.json"


def _contracts(tools: MemoryTools) -> dict[str, Any]:
    toolset = tools.toolset()
    annotations = {d["name"]: d["annotations"] for d in toolset.mcp_tools()}
    return {
        "fetch_modes": list(tools.modes),
        "tools": [
            {
                "name": spec.name,
                "description": spec.description,
                "side_effects": tools.side_effects(spec.name),
                "annotations": annotations[spec.name],
                "parameters": spec.parameters,
                "anthropic_root_rules": root_rules(spec.name),
                "openai_strict_parameters": openai_strict(spec.parameters),
            }
            for spec in tools.specs()
        ],
    }


async def test_the_tool_contracts_are_unchanged(engine: Engine) -> None:
    tools = MemoryTools(engine, ToolScope.placed_at("team:acme/agent:writer"))
    assert tools.modes == ("exact", "semantic", "hybrid")
    current = _contracts(tools)
    text = json.dumps(current, indent=2, ensure_ascii=False) + "\n"
    if os.environ.get("BLESS_TOOL_CONTRACTS") == "1":
        FIXTURE.write_text(text, encoding="utf-8")
    assert FIXTURE.is_file(), "no fixture: run once with BLESS_TOOL_CONTRACTS=1"
    frozen = json.loads(FIXTURE.read_text(encoding="utf-8"))
    assert current == frozen, (
        "the tool contracts changed; if on purpose, regenerate with BLESS_TOOL_CONTRACTS=1"
    )
    # Property order is part of what a model reads, so compare the text too.
    assert text == FIXTURE.read_text(encoding="utf-8")
