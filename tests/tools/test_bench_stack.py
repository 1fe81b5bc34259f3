"""The stack benchmark's pure parts (workflow/tools/bench_stack.py; the benchmark itself runs verl)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from coolsampler.spec.study import parse_key
from coolsampler.train.overrides import RunPaths, verl_overrides
from coolsampler.train.platform import get_platform

SCRIPT = Path(__file__).resolve().parents[2] / "workflow" / "tools" / "bench_stack.py"
spec = importlib.util.spec_from_file_location("bench_stack", SCRIPT)
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


def test_budgets_pass_and_fail():
    r = {
        "startup_s": 29.0,
        "peak_pss_sum_gb": 3.5,
        "peak_uss_sum_gb": 2.0,
        "step_phase_median_s": {"step": 1.0},
        "floor_s": {"step": 0.1},
    }
    got = {b["budget"].split(" <=")[0]: b["pass"] for b in bench.budgets(r)}
    assert got == {"start-up": True, "peak memory (sum of PSS)": False, "median step": False}


def test_before_speed_work_is_the_old_vllm_process_layout():
    run = parse_key("toy-qwen2/arith/N4_lr1e-4_tis_Tb1_Tl1_s1_st16")
    ov = verl_overrides(run, RunPaths("m", "t", "v", "o"), platform="cpu", study_recipe={})
    env = get_platform("cpu").env()
    assert env["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    assert any(o.endswith("engine_kwargs.vllm.distributed_executor_backend=uni") for o in ov)
    old_ov, old_env = bench.before_speed_work(ov, env)
    assert "VLLM_ENABLE_V1_MULTIPROCESSING" not in old_env and old_env["VLLM_CPU_KVCACHE_SPACE"] == "1"
    assert env[bench.PREFORK_ENV] == "1" and old_env[bench.PREFORK_ENV] == "0"  # every worker a fresh interpreter
    assert bench.without_prefork(ov, env) == (ov, {**env, bench.PREFORK_ENV: "0"})
    assert (
        set(ov) - set(old_ov) == {o for o in ov if "distributed_executor_backend" in o or "kv_cache_memory_bytes" in o}
        and len(ov) - len(old_ov) == 2
    )


def test_process_labels_follow_ray_titles():
    class P:
        def __init__(self, cmd):
            self._cmd = cmd

        def cmdline(self):
            return self._cmd

        def name(self):
            return "python"

    assert bench.process_label(P(["ray::WorkerDict.__init__ extra"])) == "ray::WorkerDict.__init__"
    assert bench.process_label(P(["python", "-m", "verl.trainer.main_ppo", "x=1"])) == "verl.trainer.main_ppo"
    assert bench.process_label(P(["python", "/x/log_monitor.py", "--a"])) == "log_monitor.py"


def test_at_once_trains_k_copies_together_and_reports_each_ks_time_per_run(tmp_path, monkeypatch):
    """``--at-once``: for each K, K copies start together (each its own directory, rule train's overrides),
    and the report is the wall time per run against the first K's (verl itself: the benchmark's real run)."""
    import json
    import threading
    import time
    from types import SimpleNamespace

    running, peak, seen = [0], [0], []
    lock = threading.Lock()

    def fake_run_verl(overrides, *, jsonl, log, total_steps, **kw):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
            seen.append(next(o for o in overrides if o.startswith("trainer.default_local_dir=")))
        time.sleep(0.2)
        steps = total_steps if "at-once-3/2" not in str(jsonl) else 1  # one of the three stops early
        jsonl.write_text(
            "".join(json.dumps({"step": t, "data": {"training/global_step": t}}) + "\n" for t in range(1, steps + 1))
        )
        with lock:
            running[0] -= 1

    monkeypatch.setattr(bench.launch, "run_verl", fake_run_verl)
    args = SimpleNamespace(steps=4, timeout=60)
    world = (tmp_path / "m", tmp_path / "t", tmp_path / "v")
    bench.at_once(args, "toy-qwen2/arith/N4_lr1e-4_tis_Tb1_Tl1_s1_st4", {}, world, tmp_path, [1, 3])
    rows = json.loads((tmp_path / "at_once.json").read_text())
    assert [(r["at_once"], r["complete"]) for r in rows] == [(1, 1), (3, 2)]
    assert peak[0] == 3 and len(set(seen)) == 4  # the three ran together; every run its own directory
    assert rows[0]["per_run_vs_first"] == 1.0 and rows[1]["per_run_s"] == round(rows[1]["wall_s"] / 3, 1)


def test_at_once_takes_positive_counts_only():
    """A bad ``--at-once`` is argparse's one-line error, before any world is built."""
    import pytest

    assert bench.counts("1,2,3") == [1, 2, 3]
    for bad in ("0", "2,x", "", "-1"):
        with pytest.raises(ValueError):
            bench.counts(bad)
