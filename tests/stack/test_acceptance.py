"""The acceptance check (``coolsampler acceptance``) on the CPU stack, which is how the script itself is
tested where there is no GPU: with the gate deliberately broken it must fail, naming the sampler check;
with the real gate it must pass, the kill-and-resume arm included. The checks' parts without the real
stack: ``tests/cli/test_acceptance_checks.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.stack import preempt

# The toy model's warm start (at most; it stops at 30 % greedy accuracy): at 25 steps it solved no sum,
# every reward was 0, and the precondition failed, as it must for a model that learns nothing; at 100
# it solved 1-2 % greedily, rewards varying in some steps only.
SFT_STEPS = "400"


def _acceptance(out: Path, *args: str, timeout_s: float) -> tuple[int, dict, str]:
    """Run ``coolsampler acceptance --platform cpu`` in a session of its own; on timeout kill what it
    started, by the sessions of its own descendants. Returns (exit status, summary, output tail)."""
    cmd = [sys.executable, "-m", "coolsampler.cli", "acceptance", "--platform", "cpu", "--out", str(out), *args]
    log = out.parent / f"{out.name}.log"
    with log.open("w") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            preempt(proc)
            raise AssertionError(f"acceptance timed out after {timeout_s:.0f}s:\n{log.read_text()[-4000:]}") from None
    tail = log.read_text()[-4000:]
    assert (out / "summary.json").exists(), tail
    return rc, json.loads((out / "summary.json").read_text()), tail


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_acceptance_fails_on_a_broken_gate_and_passes_on_the_real_one(tmp_path):
    """1. ``--break-gate``: the staleness arm alone (5 steps, N=4: versions 0 and 4) with the sampler
    refreshed at every step.
    The gate's own bookkeeping still says stale, so the staleness sequence passes; what the engine held
    (its log-probs against each version's snapshot) fails, and the summary names that check.
    2. The real gate, on the same warm-started toy model: the N=4 staleness arm of 6 steps with the tap (two
    sampler versions, a stale validation at step 3), the kill-and-resume arm (killed at step 4's save,
    resumed from step 2 inside the cycle). No timing arms (``--timing-steps 0``): the CPU stack judges no
    step time, and two more verl start-ups would cost this test 3 of its minutes; the timing checks are
    tested on synthetic logs, upstream verl in tests/stack/test_verl_stack.py. Everything passes."""
    t0 = time.time()
    broken = tmp_path / "broken"
    rc, summary, tail = _acceptance(
        broken, "--steps", "5", "--break-gate", "--sft-steps", SFT_STEPS, "--budget-s", "400", timeout_s=420
    )
    status = {c["name"]: c["status"] for c in summary["checks"]}
    assert rc == 1 and not summary["passed"] and summary["broken_gate"], tail
    assert list(summary["runs"]) == ["staleness"]
    assert status["the model learnt: precondition of the sampler checks (staleness)"] == "pass", tail
    assert status["staleness sequence, N=4"] == "pass"  # the bookkeeping cannot see the fault
    assert status["sampler holds its snapshot at every step (staleness)"] == "fail", tail
    md = (broken / "summary.md").read_text()
    assert "sampler holds its snapshot at every step (staleness)" in md.split("Failed: ", 1)[1].splitlines()[0]
    broken_s = time.time() - t0

    real = tmp_path / "real"
    model = broken / "world" / "toy-model"  # one warm start for both
    args = ["--steps", "6", "--timing-steps", "0", "--model", str(model), "--budget-s", "840"]
    rc, summary, tail = _acceptance(real, *args, timeout_s=880 - (time.time() - t0))
    status = {c["name"]: c["status"] for c in summary["checks"]}
    assert rc == 0 and summary["passed"], tail + "\n" + json.dumps(summary["checks"], indent=1)
    assert status["the model learnt: precondition of the sampler checks (staleness)"] == "pass"
    assert status["staleness sequence, N=4"] == "pass"
    # the engine's state at every step, seen through its log-probs: versions 0 (steps 1-4, step 4 after
    # the stale validation of step 3) and 4 (steps 5-6), each told apart from the other
    assert status["sampler holds its snapshot at every step (staleness)"] == "pass"
    assert status["sampler versions told apart (staleness)"] == "pass"
    assert status["KL resets at each refresh and grows within a cycle (staleness)"] == "pass"
    assert status["sampler log-probs = log_softmax(z/Tb)"] == "pass"
    assert status["learner old log-probs = log_softmax(z/Tl)"] == "pass"
    # killed at step 4's save, resumed from step 2 with version 0 restored (patch 0004), refreshed after 4
    assert status["resumed inside a cycle, gate as uninterrupted (resume)"] == "pass"
    assert status["sampler holds its snapshot at every step (resume)"] == "pass"
    assert status["sampler versions told apart (resume)"] == "pass"
    assert status["step time"] == "info"  # not measured here; on gpu that fails
    assert status["peak host memory (PSS of the run's session)"] == "pass"
    assert "| staleness sequence, N=4 | 0 1 2 3 0 1 |" in (real / "summary.md").read_text()
    log = (real / "runs" / "resume" / "train.log").read_text()
    assert "attempt 2: resuming from the complete checkpoint of step 2" in log
    walls = {k: r["wall_s"] for k, r in summary["runs"].items()}
    print(f"broken gate {broken_s:.0f}s; real {summary['wall_s']:.0f}s, arms {walls}")
