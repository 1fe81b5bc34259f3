"""Benchmark: `coolsampler analyze` on 50 MB of each system's log, against 50 MB of verl's, in one run.

    python workflow/tools/bench_sources.py [--mb 50] [--systems prime-rl,trl]

Each log is the smoke study's degrading example run, re-dressed in the system's layout
(``coolsampler.testkit.redress``) and repeated over more steps until the file (or the TensorBoard
directory) holds ``--mb`` megabytes; verl's is its own JSONL, built the same way. Each is analysed in a fresh
process (``coolsampler analyze``), and the wall time and the process's peak memory (its maximum resident set)
are printed, with each system's ratio to verl's: the claim is the ratios of one run, on one machine.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "workflow"))

from coolsampler.results.own_logs import read_run  # noqa: E402
from coolsampler.results.sources import sources  # noqa: E402
from coolsampler.testkit.redress import redress, write_verl_jsonl  # noqa: E402

EXAMPLE = REPO / "examples" / "verl-logs" / "degrades" / "train.jsonl"
WRITERS = {"flat JSONL": "components JSONL"}


def grown(metrics: pd.DataFrame, steps: int) -> pd.DataFrame:
    """The example's steps repeated until ``steps`` (each repeat's steps shifted past the last)."""
    reps = -(-steps // int(metrics["step"].max()))
    parts = []
    last = 0
    for _ in range(reps):
        m = metrics[metrics["step"] > 0].copy()
        m["step"] = m["step"] + last
        last = int(m["step"].max())
        parts.append(m)
    return pd.concat([metrics[metrics["step"] == 0], *parts], ignore_index=True)


def size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.is_dir() else path.stat().st_size


def build(name: str, metrics: pd.DataFrame, dest: Path, mb: float) -> Path:
    """The system's log of about ``mb`` megabytes at ``dest``: a small one first, to size the real one."""

    def write(m: pd.DataFrame, at: Path) -> Path:
        if name == "verl":
            raw = {s: d for s, d in _verl_records()}
            rows = [(int(s), raw[(int(s) - 1) % 64 + 1 if s else 0]) for s in m["step"]]
            at.parent.mkdir(parents=True, exist_ok=True)
            write_verl_jsonl(rows, at)
            return at
        src = sources()[name]
        fmt = WRITERS.get(src.formats[0], src.formats[0])
        target = at if fmt != "TensorBoard" else at.parent / at.stem
        return redress(m, src, fmt, target)

    probe = write(grown(metrics, 640), dest.parent / f"probe-{dest.name}")
    per_step = size(probe) / 640
    return write(grown(metrics, int(mb * 1e6 / per_step)), dest)


def _verl_records() -> list[tuple[int, dict]]:
    from coolsampler.spec.runlog import read_jsonl

    return sorted(read_jsonl(EXAMPLE)[0].items())


def analyse(path: Path) -> tuple[float, float]:
    """Wall seconds and peak resident memory (MB) of ``coolsampler analyze PATH`` in a fresh process (the
    process reads its own peak when it is done)."""
    code = (
        "import resource, sys; from coolsampler.cli import main; main(['analyze', sys.argv[1]]);"
        " print('MAXRSS', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)"
    )
    t = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, cwd=REPO)
    wall = time.perf_counter() - t
    peak = next((int(ln.split()[1]) for ln in done.stderr.splitlines() if ln.startswith("MAXRSS")), 0)
    return wall, peak / 1024


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=50.0, help="megabytes of each log (default 50)")
    ap.add_argument("--systems", help="comma-separated systems (default: every one)")
    args = ap.parse_args(argv)
    names = ["verl", *(args.systems.split(",") if args.systems else sources())]
    metrics = read_run(EXAMPLE).metrics
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            src = sources().get(name)
            leaf = "train.jsonl" if src is None else Path(src.files).name.replace("<", "").replace(">", "")
            path = build(name, metrics, Path(tmp) / name / leaf, args.mb)
            wall, peak = analyse(path)
            rows.append((name, size(path) / 1e6, wall, peak))
            print(f"{name:18s} {size(path) / 1e6:6.1f} MB  {wall:6.1f} s  peak {peak:6.0f} MB", flush=True)
    _, _, w0, p0 = rows[0]
    print("\nratio to verl's (time, peak memory):")
    for name, _, w, p in rows[1:]:
        print(f"  {name:18s} {w / w0:5.2f}  {p / p0:5.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
