"""The paper rehearsal's studies and the helpers its tests share: the fast checks of its plan
(tests/train/test_rehearsal_plan.py) and its two real-stack halves, the one-process arms
(tests/stack/test_rehearsal.py) and the two-rank shape (tests/stack/test_rehearsal_two_rank.py).

Why two halves: the whole rehearsal is one Snakemake target of 22 runs, the longest test by far; as one
test it held one pytest worker for its whole length while the other ran out of work. Its two shapes share
nothing but the warm-started model (each half builds its own), so each is a test that a worker takes on
its own, and both workers stay busy.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from coolsampler.spec.study import load_study
from coolsampler.train.rehearsal import code_path_label, rehearsal_study, two_rank_study
from coolsampler.worker.controller import kl_from_metrics, make_controller
from coolsampler.worker.cpu_sleep import SLEPT
from tests.stack import records

REPO = Path(__file__).resolve().parents[2]
PAPER = load_study(REPO / "config/paper.yaml")
REHEARSAL = rehearsal_study(PAPER, "results/rehearsal")
TWO_RANK = two_rank_study(PAPER, "results/rehearsal/two-rank")
KILLED = TWO_RANK.runs[0]  # the controller's arm: preempted at step 3, resumed by the rehearsal
GUARDED = TWO_RANK.runs[-1]  # the guard's arm: preempted after its firing at step 3, resumed there
GATED = [r for r in TWO_RANK.runs if r.guard is None]  # refreshed every TWO_RANK_N steps
PUSHED_RE = re.compile(r"staleness gate: rank (\d+) pushed the weights of step (\d+)")
SLEPT_RE = re.compile(
    re.escape(SLEPT).replace(r"\{pid\}", r"(\d+)").replace(r"\{level\}", r"(\d+)").replace(r"\{served\}", r"(\d+)")
)
SMK = [sys.executable, "-m", "snakemake", "--cores", "2", "--configfile=config/paper.yaml"]


def arms(study, root: Path, shape: str) -> list[dict[str, str]]:
    """The rehearsal summary's arms (rule rehearsal's params) of one shape's runs under ``root``."""
    return [
        {"key": r.key, "arm": code_path_label(r), "dir": str(root / "runs" / r.key), "shape": shape} for r in study.runs
    ]


def snakemake(work: Path, targets: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*SMK, *targets], cwd=work, capture_output=True, text=True, timeout=5200, check=False, env=env
    )


def _logged(run_dir: Path, step: int) -> bool:
    """The attempt's log has ``step`` (a checkpoint the log does not cover is no resume point)."""
    pattern = re.compile(rf'"step":\s*{step},')
    return any(pattern.search(a.read_text(errors="replace")) for a in (run_dir / "attempts").glob("*.jsonl"))


def _controller_replay(run_dir: Path, run) -> tuple[list[float], list[float]]:
    """The run's logged sampler temperatures, and the controller's own rule replayed on the inputs verl
    logged (saturated fraction, KL), from the run's start: across a resume, the restored controller
    must go on as if never stopped."""
    rec = records(run_dir / "train.jsonl")
    ctrl = make_controller(run.Tb.to_config(), total_steps=run.steps)
    logged, replayed = [], []
    for t in range(1, run.steps + 1):
        logged.append(rec[t]["sampler/temperature"])
        replayed.append(ctrl.temperature(t))
        ctrl.update(t, rec[t]["sampler/saturated_frac"], kl_from_metrics(rec[t]))
    return logged, replayed


def _last_attempt(log: str) -> str:
    """verl.log holds every attempt of a run, each from its command line ("$ ...") on."""
    return log[log.rindex("\n$ ") :] if "\n$ " in log else log
