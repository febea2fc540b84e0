"""The counters ``/metrics`` serves (Prometheus text format 0.0.4)."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Metrics", "tool_label"]


@dataclass
class Metrics:
    """Counters for ``/metrics`` (Prometheus text format 0.0.4)."""

    requests: dict[tuple[str, str, int], int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    in_flight: int = 0
    tool_calls: dict[tuple[str, str], int] = field(default_factory=dict)

    def observe(self, route: str, method: str, status: int, took: float) -> None:
        """Count one answered request to ``route`` that took ``took`` seconds."""
        key = (route, method, status)
        self.requests[key] = self.requests.get(key, 0) + 1
        self.seconds[route] = self.seconds.get(route, 0.0) + took
        self.counts[route] = self.counts.get(route, 0) + 1

    def tool(self, name: str, outcome: str) -> None:
        """Count one tool call and its outcome (``ok`` or the error code)."""
        key = (name, outcome)
        self.tool_calls[key] = self.tool_calls.get(key, 0) + 1

    def text(self, open_runs: int) -> str:
        """The counters as Prometheus text, with ``open_runs`` as the open-runs gauge."""
        lines = [
            "# HELP memseal_http_requests_total HTTP requests by route, method and status.",
            "# TYPE memseal_http_requests_total counter",
        ]
        for (route, method, status), n in sorted(self.requests.items()):
            lines.append(
                f'memseal_http_requests_total{{route="{route}",method="{method}",'
                f'status="{status}"}} {n}'
            )
        lines += [
            "# HELP memseal_http_request_seconds Time spent answering requests, by route.",
            "# TYPE memseal_http_request_seconds summary",
        ]
        for route, total in sorted(self.seconds.items()):
            lines.append(f'memseal_http_request_seconds_sum{{route="{route}"}} {total:.6f}')
            lines.append(
                f'memseal_http_request_seconds_count{{route="{route}"}} {self.counts[route]}'
            )
        lines += [
            "# HELP memseal_tool_calls_total Tool calls by tool and outcome (ok or an error code).",
            "# TYPE memseal_tool_calls_total counter",
        ]
        for (name, outcome), n in sorted(self.tool_calls.items()):
            lines.append(f'memseal_tool_calls_total{{tool="{name}",outcome="{outcome}"}} {n}')
        lines += [
            "# HELP memseal_http_in_flight Requests being answered now.",
            "# TYPE memseal_http_in_flight gauge",
            f"memseal_http_in_flight {self.in_flight}",
            "# HELP memseal_runs_open Durable runs this process holds open.",
            "# TYPE memseal_runs_open gauge",
            f"memseal_runs_open {open_runs}",
        ]
        return "\n".join(lines) + "\n"


def tool_label(name: object) -> str:
    """The ``tool`` label of a call to ``name``: a tool's name, or ``other`` (a label per
    unknown name would let callers grow the metrics without bound)."""
    from memseal.tools import TOOL_NAMES

    return name if isinstance(name, str) and name in TOOL_NAMES else "other"
