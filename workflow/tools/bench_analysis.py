"""Benchmark: 55 synthetic paper-shaped runs x 300 steps -> every table and figure; prints wall time.

Usage: python workflow/tools/bench_analysis.py [OUTDIR]  (default: a temporary directory).
Target: <= 15 s on 2 cores. The synthetic data generation is timed separately from the rendering,
since a real study reads parquet instead.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from coolsampler.paper.render import render
from coolsampler.spec.targets import TARGETS
from coolsampler.testkit.synthetic import demo_panels, demo_runs


def main(outdir: Path) -> float:
    t0 = time.perf_counter()
    runs = demo_runs()
    t1 = time.perf_counter()
    for target, spec in TARGETS.items():
        ts = time.perf_counter()
        suffixes = spec.suffixes
        render(target, demo_panels(target, runs), "bench", "bench000", [outdir / f"{target}{s}" for s in suffixes])
        print(f"  {target:7s} {time.perf_counter() - ts:6.2f} s")
    t2 = time.perf_counter()
    print(f"{len(runs)} runs: generate {t1 - t0:.2f} s, tables+figures {t2 - t1:.2f} s, total {t2 - t0:.2f} s")
    return t2 - t0


if __name__ == "__main__":
    if len(sys.argv) > 1:
        out = Path(sys.argv[1])
        out.mkdir(parents=True, exist_ok=True)
        main(out)
    else:
        with tempfile.TemporaryDirectory() as d:
            main(Path(d))
