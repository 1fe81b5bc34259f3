"""A study's drift probe (``drift_probe:``): which runs it reads, at which checkpoint, and the checks that
the checkpoint will be there.

The probe (``coolsampler.world.drift_probe``, rule ``drift_probe``) compares a run's initial model at its
sampler temperature with the learner of its step-``step`` checkpoint. That is the sampler the learner
was trained against only while the sampler has never been refreshed, so only runs with no refresh up to
``step`` (N >= step, no guard or schedule) are probed; and the checkpoint must exist after the run: a
save step that the run's last ``keep_checkpoints`` saves keep. Checked when the study is read, before
anything trains, in one line each. Pure Python: the rules and the probe read it, no training job does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from coolsampler.spec.study import Run, StudyError

# Where the probe (coolsampler.world.drift_probe) puts each term q(a) (log q(a) - log pi(a)) of the exact
# KL(q || pi) at an answer position: by the class of the CANDIDATE token a (a free word of rank < TAIL_RANK,
# one of rank >= TAIL_RANK, the digit a right step writes at this position, any other digit, anything
# else), and apart from that by the bin of q(a). Classes and bins each partition the candidates, so the
# parts of either add up to the total. The probe writes and the drift table and the claims read them, so
# they live here, importable without torch.
CLASSES = ("head", "tail", "right_digit", "wrong_digit", "other")
# (name, lower bound, upper bound) of q(a): the sampler's tail (q < 0.05), its middle (0.05 <= q <= 0.5),
# its mode (q > 0.5).
BINS = (("low", 0.0, 0.05), ("mid", 0.05, 0.5), ("high", 0.5, 1.0))
BIN_NAMES = tuple(name for name, _, _ in BINS)
# The three probes of a run: pi = the checkpoint's learner, pi = the initial model (the tempering offset,
# zero at Tb = 1), and their difference, the learner's drift.
PROBES = ("learner", "offset", "drift")
PROBE_FILE = "drift_probe.json"  # in the run directory (rule drift_probe)


@dataclass(frozen=True)
class DriftProbe:
    """Probe the runs that keep their initial sampler up to ``step`` at their step-``step`` checkpoint, on
    ``prompts`` of their world's validation prompts."""

    step: int
    prompts: int = 256

    def probed(self, runs: Sequence[Run]) -> list[Run]:
        """The runs whose sampler is still the initial model at ``step``: no refresh up to it."""
        return [r for r in runs if r.N >= self.step and r.refresh == "fixed"]


def actor_dir(run_dir: str | Path, step: int) -> Path:
    """The actor checkpoint of ``step`` in a run directory: verl's own layout (``global_step_<k>/actor``)
    under the ``checkpoints/`` directory that ``coolsampler.train.overrides`` makes its
    ``trainer.default_local_dir``."""
    return Path(run_dir) / "checkpoints" / f"global_step_{step}" / "actor"


def saved_steps(steps: int, save_every: int, keep: int) -> list[int]:
    """The checkpoints a run of ``steps`` steps leaves on disk: verl saves every ``save_every`` steps and
    at its last step, and the lifecycle keeps the newest ``keep``."""
    saves = sorted({*range(save_every, steps + 1, save_every), steps}) if save_every > 0 else []
    return saves[-keep:]


def study_drift_probe(raw: Mapping[str, Any], runs: Sequence[Run], origin: str) -> DriftProbe | None:
    """The study's drift probe, or None; one whose checkpoint a probed run would not keep, or that probes
    no run, stops with one line."""
    spec = raw.get("drift_probe")
    if not spec:
        return None
    probe = DriftProbe(int(spec["step"]), int(spec.get("prompts", 256)))
    probed = probe.probed(runs)
    if not probed:
        raise StudyError(
            f"{origin}: drift_probe.step {probe.step}: no run keeps its initial sampler that long (N >= step,"
            " no guard or schedule)"
        )
    recipe = raw.get("recipe") or {}
    save_every, keep = int(recipe.get("save_every", 0) or 0), int(recipe.get("keep_checkpoints", 1))
    for r in probed:
        kept = saved_steps(r.steps, save_every, keep)
        if probe.step not in kept:
            raise StudyError(
                f"{origin}: drift_probe.step {probe.step}: run {r.key} keeps the checkpoints of steps {kept}"
                f" (recipe save_every {save_every}, keep_checkpoints {keep}); set them so that it keeps"
                f" step {probe.step}"
            )
    return probe
