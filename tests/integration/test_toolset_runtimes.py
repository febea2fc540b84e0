"""``to_openai_agents()`` and ``to_pydantic_ai()`` reach their adapters by import alone.

The toolsets live in ``memseal.tools`` and the adapters beside them, so the methods
import what they need when called: nothing has to be registered with the tools layer
when memseal is imported. Each check runs in a fresh interpreter that imports only what
a user imports (``memseal``, the runtime's SDK), so an adapter that worked only because
some other module had been imported first (a registry filled at import time, as
``memseal.integrations`` once did) fails here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from memseal.memory import STORE_ENV

# The documented calls, on an async run, the recorded tools and the sync facade; then one
# call through each runtime's own entry point, keyed by its call id.
_USER = """
import asyncio, json, sys
from pathlib import Path

import memseal

assert "memseal.integrations" not in sys.modules, "import memseal imported the integrations"
SCOPE = memseal.ToolScope.placed_at("team:acme/agent:writer")


async def main(data: Path) -> dict[str, object]:
    from agents import FunctionTool
    from agents.tool_context import ToolContext
    from pydantic_ai import Tool

    async with memseal.open(data, embedder=None) as memory, memory.run("r", SCOPE) as run:
        agents_tools = run.toolset().to_openai_agents()
        pydantic_tools = run.toolset().to_pydantic_ai()
        recorded = memory.tools(SCOPE, run_id="bound").toolset().to_pydantic_ai()
        assert all(isinstance(t, FunctionTool) for t in agents_tools)
        assert all(isinstance(t, Tool) for t in [*pydantic_tools, *recorded])
        store = next(t for t in agents_tools if t.name == "memory_store")
        context = ToolContext(
            context=None, tool_name=store.name, tool_call_id="c1", tool_arguments="{}"
        )
        stored = await store.on_invoke_tool(context, json.dumps({"learning": {"text": "tea"}}))
        return {
            "agents": [t.name for t in agents_tools],
            "pydantic_ai": [t.name for t in pydantic_tools],
            "stored": "id" in json.loads(stored) and run.step_of("c1") is not None,
            "integrations": "memseal.integrations" in sys.modules,
        }


data = Path(sys.argv[1])
out = asyncio.run(main(data / "async"))
with memseal.open_sync(data / "sync", embedder=None) as sync:
    out["sync"] = [t.name for t in sync.toolset(SCOPE).to_openai_agents(strict=False)]
print(json.dumps(out))
"""

# The extra is missing: the interpreter cannot import the SDK.
_MISSING = """
import sys

sys.modules[sys.argv[1]] = None  # what `import` meets when the package is not installed
import memseal

try:
    getattr(memseal.tools.AsyncToolset(), sys.argv[2])()
except ImportError as exc:
    print(exc)
"""


def _python(*args: str) -> subprocess.CompletedProcess[str]:
    # The folder store, whatever store the suite's environment names: imports are the subject.
    env = {k: v for k, v in os.environ.items() if k != STORE_ENV}
    return subprocess.run(
        [sys.executable, *args], env=env, capture_output=True, text=True, timeout=180
    )


def test_a_fresh_interpreter_gets_both_runtimes_from_the_toolset(tmp_path: Path) -> None:
    done = _python("-c", _USER, str(tmp_path))
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    names = ["memory_store", "memory_fetch", "memory_get", "memory_list"]
    assert set(names) <= set(out["agents"])
    assert out["pydantic_ai"] == out["agents"]
    assert out["sync"] == out["agents"]
    assert out["stored"] is True
    assert out["integrations"] is False  # the adapters came from the tools layer alone


def test_a_missing_extra_still_says_which_one_to_install() -> None:
    cases = {
        ("agents", "to_openai_agents"): (
            "to_openai_agents() needs openai-agents; "
            "install it with `pip install memseal[openai-agents]`"
        ),
        ("pydantic_ai", "to_pydantic_ai"): (
            "to_pydantic_ai() needs pydantic-ai-slim; "
            "install it with `pip install memseal[pydantic-ai]`"
        ),
    }
    for (package, method), message in cases.items():
        done = _python("-c", _MISSING, package, method)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == message
