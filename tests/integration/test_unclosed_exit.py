"""A memory left open never keeps its process alive, and says that it was left open.

Each script opens a memory (or a run, or the sync facade), never closes it, and fails:
the interpreter must print the traceback and exit with status 1, not wait for ever on a
database thread (a crashed agent that hangs is never restarted by its supervisor).
"""

from __future__ import annotations

import asyncio
import gc
import os
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

import memseal
from memseal import ToolScope

_OPENERS = {
    "async": """
        async def main():
            memory = await memseal.open(FOLDER, **OPTIONS)
            raise RuntimeError("the agent failed")
        asyncio.run(main())
    """,
    "async-with-run": """
        async def main():
            memory = await memseal.open(FOLDER, **OPTIONS)
            run = memory.run("r1", ToolScope.placed_at("team:a/agent:w"))
            await run.__aenter__()
            await run.call("memory_store", {"learning": {"text": "left open"}})
            raise RuntimeError("the agent failed")
        asyncio.run(main())
    """,
    "sync": """
        memory = memseal.open_sync(FOLDER, **OPTIONS)
        memory.call("memory_store", {"learning": {"text": "left open"}})
        raise RuntimeError("the agent failed")
    """,
}


def _script(body: str, folder: Path, store: str | None) -> str:
    options = {} if store is None else {"store": store}
    head = f"""
        import asyncio
        import memseal
        from memseal import ToolScope
        FOLDER = {str(folder)!r}
        OPTIONS = {options!r}
    """
    return textwrap.dedent(head) + textwrap.dedent(body)


@pytest.mark.parametrize("opener", sorted(_OPENERS))
async def test_a_failing_script_with_an_open_memory_exits(
    tmp_path: Path, opener: str, store_url: str | None
) -> None:
    script = tmp_path / "agent.py"
    script.write_text(_script(_OPENERS[opener], tmp_path / "data", store_url))
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(script), stderr=asyncio.subprocess.PIPE, env=env
    )
    try:
        _, stderr = await asyncio.wait_for(process.communicate(), timeout=60)
    except TimeoutError:
        process.kill()
        await process.wait()
        pytest.fail(f"{opener}: the process never exited after its failure")
    assert process.returncode == 1, stderr.decode()
    assert "RuntimeError: the agent failed" in stderr.decode()


async def test_a_memory_dropped_open_warns(tmp_path: Path) -> None:
    memory = await memseal.open(tmp_path / "data")
    location = memory.location
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            holder = [memory]
            del memory
            holder.clear()
            gc.collect()
        messages = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
        assert any("never closed" in m and location in m for m in messages), messages
    finally:
        # The engine and store objects are still reachable from nothing; a fresh open of the
        # folder shows the data is intact and the store usable.
        async with memseal.open(tmp_path / "data") as again:
            await again.call("memory_store", {"learning": {"text": "after"}})


async def test_a_closed_memory_does_not_warn(tmp_path: Path) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        async with memseal.open(tmp_path / "data") as memory:
            await memory.call("memory_store", {"learning": {"text": "kept"}}, scope=ToolScope())
        del memory
        gc.collect()
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)]
