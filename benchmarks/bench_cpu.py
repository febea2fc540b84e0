"""Per-call CPU of each thread for ``benchmarks/bench.py``'s throughput rows.

Imported by ``bench.py`` (run that). A row's measured window is wrapped in
:meth:`CpuSplit.window`, entered on the thread that runs the event loop (the main
thread, which also runs the floor and the one-thread peer). At the window's two
edges it reads three clocks:

* **loop**: ``time.thread_time()`` of the calling thread;
* **writer**: the CPU clock of every live thread named ``memseal-writer`` or
  ``memseal-pg-writer`` (the log stores' group-commit writers), read with
  ``time.clock_gettime(time.pthread_getcpuclockid(ident))``: another thread's
  clock, read from outside it, in nanoseconds;
* **other**: ``time.process_time()`` (every thread of the process, those that
  ended inside the window included) less the two above: aiosqlite readers, the
  executor pools, the peer's threads.

Each is divided by the window's calls and kept in microseconds. A writer started
inside the window counts as other. A server in another process (the HTTP rows) is
in none of them. Where the platform has no ``pthread_getcpuclockid`` (macOS,
Windows) the split is not taken and the table says n/a.
"""

from __future__ import annotations

import contextlib
import statistics
import threading
import time
from collections.abc import Iterator

WRITERS = frozenset({"memseal-writer", "memseal-pg-writer"})
PARTS = ("loop", "writer", "other")
HEADS = tuple(f"{part} us/call" for part in PARTS)


def _thread_cpu(ident: int) -> float | None:
    try:
        return time.clock_gettime(time.pthread_getcpuclockid(ident))
    except (OSError, ValueError):  # the thread ended between the listing and the read
        return None


class CpuSplit:
    """The per-thread CPU of each named window, one sample a round."""

    def __init__(self) -> None:
        self.available = hasattr(time, "pthread_getcpuclockid") and hasattr(time, "clock_gettime")
        self.rounds: dict[str, list[dict[str, float]]] = {}

    @property
    def note(self) -> str:
        if self.available:
            return (
                "CPU us/call: loop = the event loop's thread, writer = the memseal-writer "
                "thread(s), other = the rest of this process (readers, pools, the peer's threads)"
            )
        return "CPU us/call: n/a (this platform has no per-thread CPU clock)"

    def _writers(self) -> dict[int, float]:
        clocks = {}
        for thread in threading.enumerate():
            if thread.name in WRITERS and thread.ident is not None:
                cpu = _thread_cpu(thread.ident)
                if cpu is not None:
                    clocks[thread.ident] = cpu
        return clocks

    @contextlib.contextmanager
    def window(self, key: str, calls: int) -> Iterator[None]:
        """Measure the enclosed calls as row ``key``; enter it on the event loop's thread."""
        if not self.available:
            yield
            return
        writers, loop, process = self._writers(), time.thread_time(), time.process_time()
        yield
        loop, process = time.thread_time() - loop, time.process_time() - process
        after = self._writers()
        writer = sum(after[i] - began for i, began in writers.items() if i in after)
        per_call = 1e6 / calls
        self.rounds.setdefault(key, []).append(
            {
                "loop": loop * per_call,
                "writer": writer * per_call,
                "other": max(0.0, process - loop - writer) * per_call,
            }
        )

    def medians(self) -> dict[str, dict[str, float]]:
        """Each row's median over its rounds, part by part."""
        return {
            key: {part: statistics.median(s[part] for s in samples) for part in PARTS}
            for key, samples in self.rounds.items()
        }

    def cells(self, key: str) -> tuple[str, str, str]:
        """The three table cells of row ``key``: figures, or n/a when not measured."""
        if key not in self.rounds:
            return ("n/a", "n/a", "n/a")
        median = self.medians()[key]
        return (f"{median['loop']:.0f}", f"{median['writer']:.0f}", f"{median['other']:.0f}")
