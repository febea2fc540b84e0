"""The plots of ``benchmarks/bench.py``: throughput against calls in flight, latency CDF.

Imported by ``bench.py`` (run that). matplotlib is in the ``bench`` extra; without it
``write_plots`` writes nothing and says why. Both plots are PNGs:

* ``bench-throughput.png``: calls/s against calls in flight (log scale) for the bare
  floor, memseal's recorded ``memory_store`` and the eventsourcing peer, medians of the
  rounds of one run;
* ``bench-latency-cdf.png``: the share of calls done within a latency, for live recorded
  ``memory_fetch`` calls and the replay hits of the same calls (one run each, one call
  at a time).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

THROUGHPUT = "bench-throughput.png"
LATENCY_CDF = "bench-latency-cdf.png"


def write_plots(
    folder: Path,
    widths: Sequence[int],
    throughput: Mapping[str, Sequence[float]],
    latencies: Mapping[str, Sequence[float]],
    title: str,
) -> list[Path] | str:
    """The two PNGs in ``folder`` (the paths), or why none was written.

    ``throughput`` maps a contestant to its calls/s at each of ``widths``;
    ``latencies`` maps a kind of call to its latencies in ms.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only: no display on a server or in CI
        import matplotlib.pyplot as plt
        from matplotlib import ticker
    except ImportError:
        return "matplotlib is not installed (pip install -e '.[bench]'): no plots"
    folder.mkdir(parents=True, exist_ok=True)

    figure, axes = plt.subplots(figsize=(7, 4.5), dpi=100)
    for name, rates in throughput.items():
        axes.plot(widths, rates, marker="o", label=name)
    axes.set_xscale("log", base=2)
    axes.set_xticks(list(widths), [str(w) for w in widths])
    axes.set_xlabel("calls in flight")
    axes.set_ylabel("calls/s")
    axes.set_ylim(bottom=0)
    axes.set_title(f"Durable calls/s against calls in flight\n{title}", fontsize=9)
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    throughput_png = folder / THROUGHPUT
    figure.savefig(throughput_png)
    plt.close(figure)

    figure, axes = plt.subplots(figsize=(7, 4.5), dpi=100)
    for name, samples in latencies.items():
        ordered = sorted(samples)
        shares = [(i + 1) / len(ordered) for i in range(len(ordered))]
        axes.step(ordered, shares, where="post", label=f"{name} ({len(ordered)} calls)")
    axes.set_xscale("log")
    # Plain numbers (0.2, 0.5, 1, 2, ...) rather than powers of ten at every minor tick.
    axes.xaxis.set_major_locator(ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axes.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    axes.xaxis.set_minor_formatter(ticker.NullFormatter())
    axes.set_xlabel("latency, ms (log scale)")
    axes.set_ylabel("share of calls done")
    axes.set_ylim(0, 1)
    axes.set_title(f"Latency CDF, one call at a time\n{title}", fontsize=9)
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    cdf_png = folder / LATENCY_CDF
    figure.savefig(cdf_png)
    plt.close(figure)
    return [throughput_png, cdf_png]
