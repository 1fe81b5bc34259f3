"""``coolsampler status``, ``plan``, ``runs`` and ``--version`` on fabricated run directories.

The run directories are written as ``coolsampler.train.launch`` / ``train_job`` / rule parse leave them
(``attempts/NN.jsonl`` and ``train.log`` while training; ``run.yaml`` + ``train.jsonl`` once finished;
``metrics.parquet`` + ``status.json`` after parsing), with file times set to put a run at a chosen age.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from coolsampler.cli import main
from coolsampler.cli.plan import make_plan, summary, wall_hours
from coolsampler.cli.status import hmm, run_state, stall_threshold, study_states, watchdog_stall_s
from coolsampler.spec.settings import step_seconds
from coolsampler.spec.study import load_study
from coolsampler.train.memory import checkpoint_bytes
from tests.dry_run import results_config, temp_results

REPO = Path(__file__).resolve().parents[2]
SMOKE, PAPER = REPO / "config" / "config.yaml", REPO / "config" / "paper.yaml"


def record(step: int, *, val: float | None = None, kl: float | None = 0.01, t: float = 1.5) -> dict:
    """One line of verl's file logger: a training step (with verl's timers), or a validation (step 0)."""
    data: dict = {}
    if step > 0:
        data = {"training/global_step": step, "rollout_corr/kl": kl, "timing_s/step": t}
    if val is not None:
        data["val-core/arith/acc/mean@1"] = val
        if step > 0:
            data["timing_s/testing"] = 0.5
    return {"step": step, "data": data}


def write_log(path: Path, steps: range, *, val_every: int = 8, t: float = 1.5) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    recs = [record(0, val=0.49)] + [
        record(s, val=0.5 + s / 1000 if s % val_every == 0 else None, kl=0.001 * s, t=t) for s in steps
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))


def age(path: Path, seconds: float) -> None:
    t = time.time() - seconds
    os.utime(path, (t, t))


@pytest.fixture
def smoke():
    return load_study(SMOKE)


ATTEMPT = "attempt 1: verl's output goes to verl.log\n"  # how coolsampler.train.launch starts an attempt


def fabricate(results: Path, study) -> dict[str, str]:
    """Run directories for the first runs of the smoke study: done, running, stalled, failed (two ways),
    starting; the rest not started. Returns key -> the state it must get."""
    keys = [r.key for r in study.runs]
    want = {}
    d = results / "runs"

    k = keys[0]  # done and parsed, its log whole
    write_log(d / k / "train.jsonl", range(1, 65))
    (d / k / "run.yaml").write_text(yaml.safe_dump({"settings": {"N": 32}, "platform": "cpu"}))
    (d / k / "status.json").write_text(json.dumps(dict(complete=True, last_step=64, expected_steps=64, problems=[])))
    (d / k / "train.benchmark.tsv").write_text("s\th:m:s\n160.0\t0:02:40\n")
    want[k] = "done"

    k = keys[1]  # running: step 20 of 64, its log written just now (the job's log quiet, verl's beside it)
    write_log(d / k / "attempts" / "01.jsonl", range(1, 21))
    (d / k / "train.log").write_text(f"{ATTEMPT}[coolsampler] {k}: step 20/64  reward 0.5  (0:01 elapsed)\n")
    (d / k / "verl.log").write_text("$ python -m verl.trainer.main_ppo ...\nsome Ray noise\n")
    want[k] = "running"

    k = keys[2]  # stalled: step 12, nothing for 10 minutes (smoke stall_min is 3), no error in the log
    write_log(d / k / "attempts" / "01.jsonl", range(1, 13))
    (d / k / "train.log").write_text("$ python -m verl.trainer.main_ppo ...\n")
    age(d / k / "attempts" / "01.jsonl", 600)
    age(d / k / "train.log", 600)
    want[k] = "stalled"

    k = keys[3]  # failed, said by the training job after the watchdog's retry
    write_log(d / k / "attempts" / "01.jsonl", range(1, 30))
    write_log(d / k / "attempts" / "02.jsonl", range(17, 31))
    (d / k / "train.log").write_text(
        "$ python -m verl.trainer.main_ppo ...\n"
        f"[coolsampler] {k}: attempt 1 stalled: no new step for 180s (last step 29/64); retrying\n"
        "$ python -m verl.trainer.main_ppo ... trainer.resume_mode=resume_path\n"
        f"[coolsampler] {k}: failed: timeout: 1800s exceeded at step 30/64\n"
    )
    want[k] = "failed"

    k = keys[4]  # failed: verl died with a Python error (in verl.log), nothing since, no verdict line
    write_log(d / k / "attempts" / "01.jsonl", range(1, 6))
    (d / k / "train.log").write_text(ATTEMPT)
    (d / k / "verl.log").write_text(
        "$ python -m verl.trainer.main_ppo ...\n"
        "\x1b[36m(TaskRunnerV1 pid=1)\x1b[0m UserWarning: torchtitan engine is not available: "
        "ModuleNotFoundError(\"No module named 'torchtitan'\")\n"
        "Traceback (most recent call last):\n"
        '  File "x.py", line 1, in <module>\n'
        "ray.exceptions.RayTaskError(RuntimeError): \x1b[36mray::TaskRunner.run()\x1b[0m boom in the weight push\n"
    )
    for p in (d / k / "attempts" / "01.jsonl", d / k / "train.log", d / k / "verl.log"):
        age(p, 900)
    want[k] = "failed"

    k = keys[5]  # starting: the command line is in the log, verl's file logger not up yet
    (d / k).mkdir(parents=True)
    (d / k / "train.log").write_text("$ python -m verl.trainer.main_ppo ...\nstarting Ray\n")
    want[k] = "running"
    for k in keys[6:]:
        want[k] = "not started"
    return want


def test_status_of_fabricated_runs(tmp_path: Path, smoke, capsys) -> None:
    want = fabricate(tmp_path, smoke)
    states = {s.key: s for s in study_states(smoke, tmp_path)}
    assert {k: s.state for k, s in states.items()} == want
    keys = [r.key for r in smoke.runs]
    done, running, stalled, failed, died, starting = (states[k] for k in keys[:6])
    assert done.step == 64 and done.val_acc == pytest.approx(0.564) and done.detail == ""
    # running: step k/T, the last validation (step 16), the KL of step 20, ETA = mean step time x steps left
    assert (running.step, running.total, running.val_step) == (20, 64, 16)
    assert running.val_acc == pytest.approx(0.516) and running.kl == pytest.approx(0.020)
    mean_step = (20 * 1.5 + 2 * 0.5) / 20  # validation (timing_s/testing) runs outside verl's step timer
    assert running.eta_s == pytest.approx(mean_step * 44)
    assert stalled.step == 12 and "no new step for 0:10" in stalled.detail and stalled.eta_s is None
    assert stalled.limit_s == 120  # min(max(10 x 1.5 s, 2 x 2.0 s, 120 s), the smoke study's stall_min 3 min)
    assert failed.detail == "timeout: 1800s exceeded at step 30/64" and failed.step == 30
    assert died.detail.startswith("ray.exceptions.RayTaskError(RuntimeError): ") and "boom" in died.detail
    assert starting.step == 0 and "starting" in starting.detail

    assert main(["status", "--study", str(SMOKE), "--results", str(tmp_path)]) == 1  # a failed/stalled run
    out = capsys.readouterr().out
    assert "9 runs: 1 done, 2 running, 1 stalled, 2 failed, 3 not started" in out
    line = next(x for x in out.splitlines() if x.startswith(keys[1] + " "))
    assert "running" in line and "20/64" in line and "0.516@16" in line and "0:01" in line


def test_status_mid_resume_is_the_current_attempts(tmp_path: Path, smoke, capsys) -> None:
    """The first attempt reached step 29 and was killed; the second resumed from the checkpoint of step 16,
    validated there and is at step 20. Until it passes 29, the step, the validation and the ETA are its own
    (the join cut at the resume point, as train.jsonl will be), not the killed attempt's."""
    run = smoke.runs[0]
    d = tmp_path / "runs" / run.key
    write_log(d / "attempts" / "01.jsonl", range(1, 30))  # validations at 8, 16, 24
    resumed = [
        {"step": 16, "data": {"val-core/arith/acc/mean@1": 0.7}},
        *(record(s, kl=0.5, t=3.0) for s in (17, 18, 19, 20)),
    ]
    (d / "attempts" / "02.jsonl").write_text("".join(json.dumps(r) + "\n" for r in resumed))
    (d / "train.log").write_text(
        f"{ATTEMPT}[coolsampler] {run.key}: attempt 1 preempted; retrying\nattempt 2: resuming\n"
    )
    st = run_state(run, d, watchdog_s=180)
    assert (st.state, st.attempts, st.detail) == ("running", 2, "attempt 2")
    assert (st.step, st.val_step, st.val_acc, st.kl) == (20, 16, 0.7, 0.5)
    assert st.eta_s == pytest.approx(3.0 * (run.steps - 20))
    assert main(["status", "--study", str(SMOKE), "--results", str(tmp_path)]) == 3
    row = next(x for x in capsys.readouterr().out.splitlines() if x.startswith(run.key + " "))
    assert f" 20/{run.steps} " in row and " 0.700@16 " in row


def test_stall_threshold_is_derived_from_the_step_time() -> None:
    # ten median steps, or twice the longest (a validation step), at least two minutes, at most the watchdog's
    assert stall_threshold([1.5] * 10, watchdog_s=180) == 120
    assert stall_threshold([38.4] * 10 + [100.0], watchdog_s=3600) == pytest.approx(384)
    assert stall_threshold([38.4] * 10 + [300.0], watchdog_s=3600) == 600
    assert stall_threshold([400.0], watchdog_s=3600) == 3600
    assert stall_threshold([], watchdog_s=180) == 180
    assert watchdog_stall_s(load_study(SMOKE)) == 180  # config.yaml stall_min: 3
    assert watchdog_stall_s(load_study(PAPER)) == 3600  # the gpu platform's stall_min


def test_a_run_is_stalled_only_past_its_threshold(tmp_path: Path, smoke) -> None:
    run = smoke.runs[0]
    write_log(tmp_path / "attempts" / "01.jsonl", range(1, 11))
    (tmp_path / "train.log").write_text("$ verl\n")
    now = (tmp_path / "attempts" / "01.jsonl").stat().st_mtime
    assert run_state(run, tmp_path, watchdog_s=180, now=now + 119).state == "running"
    assert run_state(run, tmp_path, watchdog_s=180, now=now + 121).state == "stalled"
    # start-up of a second attempt (its file not written yet): the watchdog's start-up limit, not attempt 1's age
    with (tmp_path / "train.log").open("a") as f:
        f.write(f"[coolsampler] {run.key}: attempt 1 stalled: no new step; retrying\n$ verl again\n")
    age(tmp_path / "attempts" / "01.jsonl", 3000)
    st = run_state(run, tmp_path, watchdog_s=180)
    assert st.state == "running" and "starting (attempt 2)" in st.detail and st.limit_s == 360
    assert run_state(run, tmp_path, watchdog_s=180, now=time.time() + 400).state == "stalled"


def test_done_but_incomplete_or_unparsed(tmp_path: Path, smoke) -> None:
    run = smoke.runs[0]
    write_log(tmp_path / "train.jsonl", range(1, 41))
    (tmp_path / "run.yaml").write_text("settings: {}\n")
    assert run_state(run, tmp_path, watchdog_s=180).detail == "not parsed yet (rule parse)"
    (tmp_path / "status.json").write_text(
        json.dumps(dict(complete=False, last_step=40, expected_steps=64, problems=["stopped at step 40 of 64"]))
    )
    st = run_state(run, tmp_path, watchdog_s=180)
    assert st.state == "done" and st.detail == "log incomplete: stopped at step 40 of 64"


def test_status_exit_codes(tmp_path: Path, capsys) -> None:
    # nothing run yet: 3 (not all done, nothing failed); every run done: 0
    assert main(["status", "--study", str(SMOKE), "--results", str(tmp_path)]) == 3
    for r in load_study(SMOKE).runs:
        write_log(tmp_path / "runs" / r.key / "train.jsonl", range(1, 65))
        (tmp_path / "runs" / r.key / "run.yaml").write_text("settings: {}\n")
    assert main(["status", "--study", str(SMOKE), "--results", str(tmp_path)]) == 0
    assert main(["status", "--study", str(PAPER), "--results", str(tmp_path)]) == 3
    assert "53 runs: 0 done, 0 running, 0 stalled, 0 failed, 53 not started" in capsys.readouterr().out


def test_hmm() -> None:
    seconds = (0, 59, 61, 3600, 3 * 3600 + 20 * 60 + 1, None)
    assert [hmm(x) for x in seconds] == ["0:00", "0:01", "0:01", "1:00", "3:20", "-"]


def test_plan_of_the_paper_study_from_the_paper_step_times(tmp_path: Path, capsys) -> None:
    paper = load_study(PAPER)
    plan = make_plan(paper, profile="gpu", results=tmp_path)
    s = summary(plan)
    runs = {(r.model, r.task, r.steps): 0 for r in paper.runs}
    for r in paper.runs:
        runs[(r.model, r.task, r.steps)] += 1
    hours = sum(n * steps * step_seconds(m, t) / 3600 for (m, t, steps), n in runs.items())
    assert s["runs"] == 53 and s["done"] == 0 and not s["unknown"]
    assert s["hours_all"] == pytest.approx(hours) and s["gpu_hours_all"] == pytest.approx(4 * hours)
    assert 200 < s["hours_all"] < 220  # the paper: "55 runs ... roughly 220 GPU-box-hours"
    assert s["wall_todo"] == pytest.approx(hours)  # the gpu-box profile: one 4-GPU run at a time
    disk = sum(checkpoint_bytes(r.model) for r in paper.runs)
    assert s["disk"] == disk
    # one run at a time (gpu-box), the largest first: a 7B save holds a second checkpoint
    assert s["disk_peak"] == disk + checkpoint_bytes("qwen2.5-math-7b")
    assert main(["plan", "--study", str(PAPER), "--profile", "slurm", "--results", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "16 at a time (profiles/slurm jobs: 16" in out and "paper (App. D)" in out
    assert "1.72 TiB kept by the runs' directories (one checkpoint each), 2.60 TiB at the peak" in out


def test_plan_marks_done_runs_and_uses_their_measured_step_time(tmp_path: Path, capsys) -> None:
    smoke = load_study(SMOKE)
    assert summary(make_plan(smoke, results=tmp_path))["unknown"]  # no finished run, no paper time: unknown
    fabricate(tmp_path, smoke)  # one finished cpu run: 64 steps of 1.5 s, 8 validations of 0.5 s, 160 s wall
    plan = make_plan(smoke, results=tmp_path)
    s = summary(plan)
    assert s["done"] == 1 and not s["unknown"] and plan.profile == "cpu" and plan.parallel == 2
    step = (64 * 1.5 + 8 * 0.5) / 64
    per_run = 160 / 3600  # start-up (benchmark wall - the steps' times) + 64 steps = the measured wall
    assert plan.groups[0].step_s == pytest.approx(step)
    assert s["hours_all"] == pytest.approx(9 * per_run) and s["hours_todo"] == pytest.approx(8 * per_run)
    assert s["wall_todo"] == pytest.approx(4 * per_run)  # 8 runs, two at a time
    disk = sum(p.stat().st_size for p in (tmp_path / "runs" / smoke.runs[0].key).rglob("*") if p.is_file())
    assert s["disk"] == 9 * disk
    assert main(["plan", "--results", str(tmp_path), "--runs"]) == 0
    out = capsys.readouterr().out
    assert "measured (1 run)" in out and f"done  {smoke.runs[0].key}" in out and f"todo  {smoke.runs[1].key}" in out
    # a finished run from another platform does not measure this one (on any profile the smoke study's
    # runs are cpu runs: the profile says where they train, not on what)
    run_yaml = tmp_path / "runs" / smoke.runs[0].key / "run.yaml"
    run_yaml.write_text(yaml.safe_dump({"settings": {"N": 32}, "platform": "gpu"}))
    assert summary(make_plan(smoke, profile="gpu", results=tmp_path))["unknown"]


def test_wall_hours_schedules_longest_first() -> None:
    assert wall_hours([3, 3, 3, 9], 2) == 9
    assert wall_hours([1] * 10, 4) == 3
    assert wall_hours([], 4) == 0


def test_runs_lists_every_key(capsys) -> None:
    assert main(["runs", "--study", str(PAPER)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == [r.key for r in load_study(PAPER).runs] and len(lines) == 53
    assert main(["runs", "--source"]) == 0
    first = capsys.readouterr().out.splitlines()[0].split("\t")
    assert first == [load_study(SMOKE).runs[0].key, load_study(SMOKE).runs[0].source]


def test_version(capsys) -> None:
    from coolsampler.train.version import installed_verl, package_version, patched_verl

    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"coolsampler {package_version()}\n")
    import tomllib

    assert package_version() == tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert patched_verl().startswith("0.9.1+coolsampler.")
    assert f"patched verl (from patches/verl): {patched_verl()}" in out
    assert f"installed verl: {installed_verl() or 'none'}" in out


def test_status_of_a_partial_paper_study(tmp_path: Path, capsys) -> None:
    """The paper study with one run at step 100 of 300 (paper step time, 38.4 s) and one done: the ETA is
    hours, in h:mm; the plan counts the done run out of what is left."""
    paper = load_study(PAPER)
    first, second = paper.runs[0], paper.runs[1]
    write_log(tmp_path / "runs" / first.key / "attempts" / "01.jsonl", range(1, 101), val_every=10, t=38.4)
    (tmp_path / "runs" / first.key / "train.log").write_text("$ apptainer exec --nv ... python3 -m verl...\n")
    write_log(tmp_path / "runs" / second.key / "train.jsonl", range(1, 301), val_every=10, t=38.4)
    (tmp_path / "runs" / second.key / "run.yaml").write_text(yaml.safe_dump({"platform": "gpu"}))
    states = study_states(paper, tmp_path)
    running = states[0]
    assert running.state == "running" and (running.step, running.total) == (100, 300)
    assert hmm(running.eta_s) == hmm((100 * 38.4 + 10 * 0.5) / 100 * 200) == "2:08"
    assert running.limit_s == pytest.approx(384)  # ten median steps, well below the gpu watchdog's hour
    assert main(["status", "--study", str(PAPER), "--results", str(tmp_path)]) == 3
    out = capsys.readouterr().out
    assert "53 runs: 1 done, 1 running, 0 stalled, 0 failed, 51 not started" in out
    line = next(x for x in out.splitlines() if x.startswith(first.key + " "))
    assert line.split()[1:] == ["running", "100/300", "0.600@100", "0.1", "2:08"]
    s = summary(make_plan(paper, profile="gpu", results=tmp_path))
    assert s["done"] == 1 and s["hours_todo"] < s["hours_all"]


def test_plan_on_gpu_shows_each_runs_processes_and_host_memory(tmp_path: Path, capsys) -> None:
    """Before submitting, a reader sees whether each model and task's run fits the study's machines, and
    what one job's mem_mb has to hold, process kind by kind."""
    argv = ["plan", "--study", str(PAPER), "--profile", "slurm", "--results", str(tmp_path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith("plan: 53 run(s) to train on 4 GPU(s) each, 852.0 GPU-hours")  # the cost first
    assert "memory of one run on the study's machines, modelled (memory.py" in out
    assert "qwen2.5-math-1.5b math on 4 x 31.7 GiB GPUs: fits" in out
    assert "qwen2.5-math-7b gsm8k on 4 x 95.6 GiB GPUs: fits" in out
    assert "AgentLoopWorker" not in out  # the process table: only with --detail
    assert main([*argv, "--detail"]) == 0
    out = capsys.readouterr().out
    assert "| AgentLoopWorker | " in out and "| CUDA host overhead (assumed) | " in out


SEVEN_B = "qwen2.5-math-7b/gsm8k/N192_lr2e-6_tis_Tb1_Tl1_s1"
EIGHTY = REPO / "config" / "hardware" / "80gb.yaml"


def test_plan_of_one_run_prints_its_cost_beside_the_command_that_trains_it(tmp_path: Path, capsys) -> None:
    """One paper arm on one GPU box: Appendix D's 9 hours on 4 GPUs, one checkpoint of disk (two while it
    saves), and the gpu-box command for its metrics table, with the study and the overlay as given."""
    argv = ["plan", "--study", str(PAPER), "--results", str(tmp_path), "--run", SEVEN_B]
    assert main([*argv, "--overlay", str(EIGHTY)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == (
        "plan: 1 run(s) to train on 4 GPU(s) each, 36.0 GPU-hours, 9:00 wall (h:mm), "
        f"{checkpoint_bytes('qwen2.5-math-7b') / 1024**3:.1f} GiB disk "
        f"({2 * checkpoint_bytes('qwen2.5-math-7b') / 1024**3:.1f} GiB during a save),"
        " memory fits 4 x 79.6 GiB GPUs (modelled)"
    )
    assert out[1] == (
        f"command: snakemake --profile profiles/gpu-box {tmp_path}/runs/{SEVEN_B}/metrics.parquet"
        f" --configfile config/paper.yaml config/hardware/80gb.yaml"
    )
    # the same card without the overlay's setting: the 7B does not fit, the plan says so and exits 1
    assert main([*argv, "--gpu-memory-gib", "79.6"]) == 1
    out = capsys.readouterr().out
    assert "memory DOES NOT FIT 4 x 79.6 GiB GPUs" in out
    assert "set models: {qwen2.5-math-7b: {gpu_memory_utilization: 0.45}}" in out
    assert main(["plan", "--study", str(PAPER), "--run", "qwen2.5-math-7b/gsm8k/N1_nope"]) == 2
    assert "is not in study paper; runs of that model/task" in capsys.readouterr().err
    # a run of no model/task of the study: the hint names the study whose runs it lists
    assert main(["plan", "--study", str(PAPER), "--run", "other-model/gsm8k/N1_nope"]) == 2
    assert "`coolsampler runs --study paper` lists them" in capsys.readouterr().err


def test_memory_on_your_own_gpus_from_the_command_line_or_an_override_file(capsys) -> None:
    """An 80 GB card: the paper's 7B does not fit at its settings; the override file declares the card and
    the setting that makes it fit, merged over the study as Snakemake merges a second --configfile."""
    assert main(["memory", "--study", str(PAPER), "--gpu-memory-gib", "79.6"]) == 1
    out = capsys.readouterr().out
    assert "qwen2.5-math-7b gsm8k on 4 x 79.6 GiB GPUs: DOES NOT FIT" in out
    assert main(["memory", "--study", str(PAPER), "--overlay", str(EIGHTY)]) == 0
    out = capsys.readouterr().out
    assert "qwen2.5-math-7b gsm8k on 4 x 79.6 GiB GPUs: fits" in out
    study = load_study(PAPER, overlays=[EIGHTY])
    assert study.raw["models"]["qwen2.5-math-1.5b"]["gpu_memory_gib"] == 79.6  # the card: the override's
    assert study.raw["models"]["qwen2.5-math-1.5b"]["micro_batch"] == 4  # the rest: the paper study's
    with pytest.raises(SystemExit) as e:  # refused as the flag is read, before any study is
        main(["memory", "--gpu-memory-gib", "0"])
    assert e.value.code == 2


def test_commands_find_the_checkouts_study_files_from_any_directory(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["runs"]) == 0  # the default study, config/config.yaml of the checkout
    assert len(capsys.readouterr().out.splitlines()) == len(load_study(SMOKE).runs)
    assert (
        main(["plan", "--study", "config/paper.yaml", "--overlay", "config/hardware/80gb.yaml", "--run", SEVEN_B]) == 0
    )
    command = capsys.readouterr().out.splitlines()[1]
    assert command.startswith(f"command: cd {REPO} && snakemake --profile profiles/gpu-box results/runs/{SEVEN_B}/")
    assert command.endswith("--configfile config/paper.yaml config/hardware/80gb.yaml")
    # a file of the current directory is given to the command run from the checkout by its full path
    (tmp_path / "mine.yaml").write_text((REPO / "config" / "hardware" / "80gb.yaml").read_text())
    assert main(["plan", "--study", "paper", "--overlay", "mine.yaml", "--run", SEVEN_B]) == 0
    assert capsys.readouterr().out.splitlines()[1].endswith(f"--configfile config/paper.yaml {tmp_path}/mine.yaml")


ONE_B5 = "qwen2.5-math-1.5b/gsm8k/N192_lr2e-6_tis_Tb0.8_Tl1_s1"


def test_plan_memory_and_the_job_agree_on_a_runs_gpus(tmp_path: Path, capsys) -> None:
    """A study giving the 1.5B one GPU a run: plan's cost, its memory line and memory's own verdict all
    count one GPU (never the platform's four), the paper's step time is scaled to it and labelled as a
    model, and a run that does not fit its GPU exits 1, as `memory` does."""
    one = tmp_path / "one.yaml"
    one.write_text("models:\n  qwen2.5-math-1.5b: {gpus_per_run: 1}\n")
    argv = ["plan", "--study", str(PAPER), "--results", str(tmp_path), "--overlay", str(one), "--run", ONE_B5]
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "4 GPU" not in out and "4 x 31.7" not in out and "(4 a run)" not in out
    assert out.startswith("plan: 1 run(s) to train on 1 GPU(s) each, 12.8 GPU-hours, 12:48 wall")
    assert "memory DOES NOT FIT 1 x 31.7 GiB GPUs" in out.splitlines()[0]
    assert "paper (App. D) x 4/1 GPUs, modelled" in out and "1 GPU(s) a run" in out
    assert main(["memory", "--study", str(PAPER), "--overlay", str(one)]) == 1
    assert "qwen2.5-math-1.5b gsm8k on 1 x 31.7 GiB GPUs: DOES NOT FIT" in capsys.readouterr().out
    # the shipped one-GPU file: one 80 GB card fits the 1.5B, by the model
    onegpu = str(REPO / "config" / "hardware" / "one-gpu.yaml")
    assert main(["plan", "--study", str(PAPER), "--results", str(tmp_path), "--overlay", onegpu, "--run", ONE_B5]) == 0
    assert "memory fits 1 x 79.6 GiB GPUs (modelled)" in capsys.readouterr().out.splitlines()[0]
    assert main(["memory", "--study", str(PAPER), "--overlay", onegpu]) == 0
    out = capsys.readouterr().out
    assert "qwen2.5-math-1.5b math on 1 x 79.6 GiB GPUs: fits" in out and "qwen2.5-math-7b gsm8k on 4 x" in out
    # what the training job gets: verl's GPU count is the same one
    from coolsampler.train.overrides import overrides_for

    study = tmp_path / "study.yaml"
    merged = load_study(PAPER, overlays=[onegpu]).raw
    study.write_text(yaml.safe_dump(merged))
    assert "trainer.n_gpus_per_node=1" in overrides_for(ONE_B5, str(study), "gpu")
    # the 7B on one 80 GB card: no setting the memory model knows makes it fit (the one-GPU page says so)
    seven = tmp_path / "seven.yaml"
    seven.write_text("models:\n  qwen2.5-math-7b: {gpus_per_run: 1, tensor_parallel: 1, gpu_memory_gib: 79.6}\n")
    assert main(["memory", "--study", str(PAPER), "--overlay", str(seven)]) == 1
    lines = [ln for ln in capsys.readouterr().out.splitlines() if "qwen2.5-math-7b" in ln or ln.startswith("-   set")]
    assert any("7b gsm8k on 1 x 79.6 GiB GPUs: DOES NOT FIT" in ln for ln in lines)
    assert not any(ln.startswith("-   set") and ln.endswith(": fits") for ln in lines), lines


def test_plan_prints_the_command_whole_for_runs_smaller_than_the_box(tmp_path: Path, capsys) -> None:
    """One GPU a run on the gpu-box profile (4 GPUs, a job given no devices of its own): the printed command
    carries `--resources gpu=1` after the target, so it trains one run at a time as printed, and the
    wall time counts one at a time; a 4-GPU run (the 80 GB overlay) needs no option beyond the profile."""
    from coolsampler.cli.plan import profile_gpus, snakemake_options

    assert profile_gpus("gpu") == 4 and profile_gpus("slurm") is None
    onegpu = REPO / "config" / "hardware" / "one-gpu.yaml"
    two = [ONE_B5, ONE_B5.replace("_s1", "_s43")]
    study = load_study(PAPER, overlays=[onegpu])
    plan = make_plan(study, results=tmp_path, keys=two)
    assert snakemake_options(plan) == ["--resources", "gpu=1"] and plan.parallel == 1
    assert summary(plan)["wall_todo"] == pytest.approx(summary(plan)["hours_todo"])  # one after the other
    argv = ["plan", "--study", str(PAPER), "--results", str(tmp_path), "--overlay", str(onegpu), "--run", ONE_B5]
    assert main(argv) == 0
    command = capsys.readouterr().out.splitlines()[1]
    words = command.removeprefix("command: ").split()
    target = words.index(f"{tmp_path}/runs/{ONE_B5}/metrics.parquet")
    at = words.index("--resources")
    assert words[at : at + 2] == snakemake_options(plan) and at == target + 1 and words[at + 2] == "--configfile"
    eighty = make_plan(load_study(PAPER, overlays=[EIGHTY]), results=tmp_path, keys=[SEVEN_B])
    assert snakemake_options(eighty) == [] and eighty.parallel == 1
    # on SLURM each job gets its own GPUs: nothing beyond the profile
    assert snakemake_options(make_plan(study, profile="slurm", results=tmp_path, keys=two)) == []


def test_memory_and_plan_check_your_own_hosts_memory(tmp_path: Path, capsys) -> None:
    """`--host-memory-gib` checks the host against one's own machine instead of the SLURM job's mem_mb
    (with --profile too: the smaller of the two); a host too small for a run is a DOES NOT FIT and exit 1."""
    from coolsampler.train.memory import HOST_MARGIN, slurm_train_mem_bytes

    slurm = REPO / "profiles" / "slurm" / "config.v8+.yaml"
    slurm_usable = f"{slurm_train_mem_bytes(slurm) * (1 - HOST_MARGIN) / 1024**3:.1f}"
    onegpu = ["--study", str(PAPER), "--overlay", str(REPO / "config" / "hardware" / "one-gpu.yaml")]
    assert main(["memory", *onegpu]) == 0
    assert f"host 52.1 of {slurm_usable} GiB" in capsys.readouterr().out
    assert main(["memory", *onegpu, "--host-memory-gib", "500"]) == 0  # larger than a SLURM job's: the host's
    out = capsys.readouterr().out
    assert "| host memory (500 GiB declared) |" in out and f"host 52.1 of {500 * (1 - HOST_MARGIN):.1f} GiB" in out
    assert main(["memory", *onegpu, "--host-memory-gib", "500", "--profile", str(slurm)]) == 0  # the smaller
    assert f"host 52.1 of {slurm_usable} GiB" in capsys.readouterr().out
    assert main(["memory", *onegpu, "--host-memory-gib", "40"]) == 1
    out = capsys.readouterr().out
    assert "qwen2.5-math-1.5b gsm8k on 1 x 79.6 GiB GPUs: DOES NOT FIT" in out and "host 52.1 of 36.0 GiB" in out
    plan = ["plan", *onegpu, "--results", str(tmp_path), "--run", ONE_B5]
    assert main([*plan, "--host-memory-gib", "40"]) == 1
    out = capsys.readouterr().out
    assert "memory DOES NOT FIT 1 x 79.6 GiB GPUs" in out.splitlines()[0] and "host 52.1 of 36.0 GiB" in out
    assert main([*plan, "--host-memory-gib", "125"]) == 0
    assert "host 52.1 of 112.5 GiB" in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:  # refused as the flag is read, before any study is
        main(["memory", *onegpu, "--host-memory-gib", "0"])
    assert e.value.code == 2
    assert "argument --host-memory-gib: '0': give a finite number > 0" in capsys.readouterr().err


def test_the_studys_time_limit_reaches_the_job_and_plan_warns_past_it(tmp_path: Path, capsys) -> None:
    """A study's runtime_min is the training job's time limit (SLURM --time), and plan warns when the
    study's watchdog limit (timeout_min) is not below the job's limit: the scheduler would stop the run."""
    over = tmp_path / "over.yaml"
    over.write_text("timeout_min: 1200\n")
    argv = ["plan", "--study", str(PAPER), "--results", str(tmp_path), "--profile", "slurm", "--run", ONE_B5]
    assert main([*argv, "--overlay", str(over)]) == 0
    assert (
        "WARNING: the study's timeout_min 1200 is not below the job's time limit (960 min)" in capsys.readouterr().out
    )
    longer = tmp_path / "longer.yaml"
    longer.write_text("timeout_min: 1200\nruntime_min: 1440\n")
    assert main([*argv, "--overlay", str(longer)]) == 0
    assert "WARNING" not in capsys.readouterr().out
    # what the job asks the scheduler for: the study's limit
    smk = [sys.executable, "-m", "snakemake", "-n", "--nolock", "--profile", "profiles/gpu-box"]
    R = temp_results(tmp_path)
    smk += [f"{R}/runs/{ONE_B5}/metrics.parquet", "--configfile", str(PAPER), str(longer), *results_config(R)]
    res = subprocess.run(smk, cwd=REPO, capture_output=True, text=True, timeout=600, check=False)
    assert res.returncode == 0, res.stderr[-3000:]
    resources = re.findall(r"^rule train:\n(?:.*\n)*?\s+resources: (.*)$", res.stdout + res.stderr, flags=re.M)
    assert resources and "runtime=1440" in resources[0].split(", "), resources
