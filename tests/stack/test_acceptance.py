"""The acceptance check (``coolsampler acceptance``, coolsampler.testkit.acceptance).

Fast: model discovery in an offline hub cache, the random-1.5B fallback (architecture and tokenizer),
the offline unpatched-verl tree, and the checks on synthetic logs. Slow: the whole check on the CPU
stack, which is how the script itself is tested where there is no GPU.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_acceptance_on_the_cpu_stack(tmp_path):
    """The whole script on the CPU stack (toy model): N=4 staleness run of 6 steps with the tap (two
    sampler versions, a stale validation at step 3), N=1 and N=8 timing runs; --quick leaves out the
    unpatched-verl run (tests/stack/test_verl_stack.py runs upstream verl)."""
    out = tmp_path / "acc"
    cmd = [
        sys.executable,
        "-m",
        "coolsampler.cli",
        "acceptance",
        "--platform",
        "cpu",
        "--steps",
        "6",
        "--quick",
        "--sft-steps",
        "25",
        "--budget-s",
        "840",
        "--out",
        str(out),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=880)
    summary = json.loads((out / "summary.json").read_text())
    status = {c["name"]: c["status"] for c in summary["checks"]}
    assert proc.returncode == 0 and summary["passed"], proc.stdout[-4000:] + proc.stderr[-2000:]
    assert status["staleness sequence, N=4"] == "pass"
    # the engine's state at every step, seen through its log-probs: versions 0 (steps 1-4, step 4 after
    # the stale validation of step 3) and 4 (steps 5-6), each told apart from the other
    assert status["sampler holds its snapshot at every step (staleness)"] == "pass"
    assert status["sampler versions told apart (staleness)"] == "pass"
    assert status["KL resets at each refresh and grows within a cycle (staleness)"] == "pass"
    assert status["sampler log-probs = log_softmax(z/Tb)"] == "pass"
    assert status["learner old log-probs = log_softmax(z/Tl)"] == "pass"
    assert status["step time N=8 / N=1"] == "info"  # printed, judged on gpu only
    assert status["peak host memory (PSS of the run's session)"] == "pass"
    assert "| staleness sequence, N=4 | 0 1 2 3 0 1 |" in (out / "summary.md").read_text()
