"""The rehearsal of a study: every distinct arm through the real stack, in minutes, on a CPU.

A GPU study (``config/paper.yaml``) cannot be run in CI, so its rehearsal runs the code path its runs
take with only these substitutions, all explicit here or in the platform definition:

* platform: ``cpu`` (``coolsampler.train.platform.CPU_SUBSTITUTIONS``: device, precision, engine, process counts);
* model: every model -> ``toy-qwen2-rehearsal``, a tiny Qwen2 warm-started to answer sums in both
  answer formats (``coolsampler.world.toy.REHEARSAL_*``), to ~95% greedy accuracy
  (``REHEARSAL_TARGET_ACC``; ~89% of samples at T=0.8): the paper's saturation controllers reheat only
  while at least half of a step's groups are all correct, which a weaker model never reaches in 4 steps;
  at this accuracy about 2/3 of the groups of 4 are all correct and the rest mixed, so the controller
  arms change the sampler temperature within their steps and rewards still vary;
* data: each task -> toy sums in that task's format and ``data_source``, so each task's own reward
  route runs (GSM8K: ``#### <n>``; MATH: ``\\boxed{<n>}``); each prompt starts with its task's format
  cue (``REHEARSAL_CUES``: ``#`` or ``\\``), a one-character stand-in for the paper prompts' format
  instruction, so that a sum the model knows scores on its task's route, not one time in two;
* batch and lengths: ``REHEARSAL_RECIPE``; steps and validation: ``REHEARSAL_STEPS`` /
  ``REHEARSAL_VAL_EVERY`` (a cut run stops one step early, as its paper run does).

Everything else (refresh interval, learning rate, correction, sampler/learner temperature,
schedules, controllers, seeds, replicates, checkpoints) is the paper run's own. The arms are the
fewest runs of the study that together cover every distinct arm (correction, kind of Tb, tied
learner, replicate, model, task) *and* every panel of every figure and table, so that the rehearsal
draws every one of them from real logs.

These run in a one-process shape (one learner rank, one sampler). The rehearsal's *two-rank shape*
(``two_rank_study``) runs the fewest arms that reach every rank-, replica- and sleep-dependent path of
a paper run, on the ``cpu-2rank`` platform (``coolsampler.train.platform.CPU_TWO_RANK``): the
staleness gate refreshing inside the run, the sampler temperature's controller, μ-GRPO, checkpoints
and their resume, and the staleness guard (``two_rank_guard_arm``: a run refreshed by
``TWO_RANK_GUARD``, which fires at its checkpoint of step 3). One more substitution there: the refresh
interval N is scaled down to ``TWO_RANK_N`` (the guard's to ``TWO_RANK_GUARD_N``) so that refreshes, a
stale validation and a checkpoint inside a cycle fit in ``TWO_RANK_STEPS`` steps. No verl, vLLM or
torch here.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from coolsampler.spec import corrections
from coolsampler.spec.guard import GuardSpec
from coolsampler.spec.study import Run, Study
from coolsampler.spec.targets import panel_filters

REHEARSAL_STEPS = 4
REHEARSAL_VAL_EVERY = 2
REHEARSAL_RECIPE: dict[str, Any] = {
    "prompts_per_step": 4,
    "samples_per_prompt": 4,
    "max_prompt_length": 16,
    "max_response_length": 16,
    "val_samples": 32,
    "save_every": 2,  # checkpoints as the paper runs make them (every run checkpoints)
}


def arm(run: Run) -> tuple[Any, ...]:
    """What makes a run a distinct code path: correction, kind of sampler temperature (and the KL gate),
    tied learner, replicate, model, task, and how its sampler is refreshed (every N, guard, schedule)."""
    return (
        run.correction, run.Tb.kind, run.Tb.kl_gate, run.Tl == "tied", run.replicate, run.model, run.task,
        run.refresh,
    )  # fmt: skip


def code_path_label(run: Run) -> str:
    """The code path an arm of the rehearsal exercises (``arm``), in words for rehearsal.md."""
    parts = [
        run.model,
        run.task,
        run.correction,
        f"Tb {run.Tb.label_kind}",
        "learner tied" if run.Tl == "tied" else "learner 1",
    ]
    if run.replicate:
        parts.append(run.replicate)
    return ", ".join(parts)


def choose_runs(study: Study) -> list[Run]:
    """The fewest runs (greedy set cover, deterministic: study order breaks ties) covering every arm
    and every (target, panel) of the study's figures and tables."""
    covers: dict[str, set[Any]] = {r.key: {("arm", arm(r))} for r in study.runs}
    for target, entry in study.figures.items():
        for panel, filt in panel_filters(entry).items():
            for r in study.select(filt):
                covers[r.key].add(("panel", target, panel))
    need = set().union(*covers.values()) if covers else set()
    chosen: list[Run] = []
    while need:
        best = max(study.runs, key=lambda r: len(covers[r.key] & need))  # max keeps the first of ties
        gain = covers[best.key] & need
        if not gain:
            break
        chosen.append(best)
        need -= gain
    order = {r.key: i for i, r in enumerate(study.runs)}
    return sorted(chosen, key=lambda r: order[r.key])


def rehearsal_run(run: Run) -> Run:
    """The paper run with the rehearsal's steps and validation interval (a cut run one step short)."""
    short = run.steps < run.task_info.steps
    return replace(run, steps=REHEARSAL_STEPS - 1 if short else REHEARSAL_STEPS, val_every=REHEARSAL_VAL_EVERY)


# The two-rank shape: N -> 2, six steps, validation and checkpoints every 3. Step 3 is then a stale
# validation (a fresh push, and the stale sampler pushed back) and a checkpoint inside a cycle (3 mod 2
# = 1: resuming it needs the stale sampler's snapshot); steps 2, 4 and 6 refresh.
TWO_RANK_N = 2
TWO_RANK_STEPS = 6
TWO_RANK_VAL_EVERY = 3
TWO_RANK_RECIPE: dict[str, Any] = {**REHEARSAL_RECIPE, "save_every": 3}
TWO_RANK_DIR = "two-rank"  # below the rehearsal's results

# The two-rank guard arm: the staleness guard's whole path (its signal read from the step's reduced
# metrics in the driver, the decision, the push on both ranks, the gate's state in the checkpoint, the
# resume) in six steps. N 4 is its longest interval and min 3 keeps it from firing before step 3. Its
# threshold is below even the fp32 noise of a fresh sampler (|pi - q| measured 2e-7 there, 2e-5 to 3e-4
# one or two learner steps stale, 2026-12-04), so it fires as soon as min allows: at 3 (a checkpoint,
# where the rehearsal kills and resumes it) and 6, where a fixed N=4 gate refreshes at 4 only. What the
# rehearsal checks is the mechanism, not the guard's judgement (config/guard.yaml measures that).
TWO_RANK_GUARD_N = 4
TWO_RANK_GUARD = GuardSpec("probs_diff", 1e-9, window=1, min=3)


def two_rank_arms(study: Study) -> list[Run]:
    """The fewest runs of the study that reach every path the two-rank shape exists for: the first
    μ-GRPO run, and the first run whose sampler temperature is a controller (the KL-gated saturation
    controller if the study has one). Both have N > 1 (the gate) and checkpoint; the controller's run
    is the one the rehearsal kills and resumes (it restores the stale sampler *and* the controller)."""

    def first(pred) -> Run | None:
        return next((r for r in study.runs if r.N > 1 and pred(r)), None)

    controller = first(lambda r: r.Tb.kind == "saturation" and r.Tb.kl_gate) or first(
        lambda r: r.Tb.kind in ("saturation", "kl_cooling")
    )
    own_loss = first(lambda r: (c := corrections.get(r.correction)) is not None and c.loss is not None)
    return [r for r in (controller, own_loss) if r is not None]


def _is_weighted(run: Run) -> bool:
    """The run's correction applies IS weights (TIS): every guard signal is logged under it."""
    c = corrections.get(run.correction)
    return c is not None and c.is_weights


def two_rank_guard_arm(study: Study) -> Run | None:
    """The two-rank guard arm: the study's first guard run, else its first fixed-temperature TIS run,
    with the rehearsal's guard (``TWO_RANK_GUARD``, N ``TWO_RANK_GUARD_N``) and the two-rank steps."""
    base = next((r for r in study.runs if r.guard is not None), None) or next(
        (r for r in study.runs if _is_weighted(r) and r.Tb.kind == "fixed" and r.schedule is None), None
    )
    if base is None:
        return None
    return replace(base, N=TWO_RANK_GUARD_N, guard=TWO_RANK_GUARD, steps=TWO_RANK_STEPS, val_every=TWO_RANK_VAL_EVERY)


def two_rank_run(run: Run) -> Run:
    return replace(run, N=TWO_RANK_N, steps=TWO_RANK_STEPS, val_every=TWO_RANK_VAL_EVERY, guard=None, schedule=None)


def _derived(
    study: Study,
    name: str,
    profile: str,
    results: str | Path,
    runs: list[Run],
    figures: dict[str, Any],
    recipe: dict[str, Any],
) -> Study:
    """A study of ``runs`` called ``name`` on the platform ``profile``, with ``study``'s models and tasks."""
    raw = {**study.raw, "name": name, "profile": profile}
    return Study(name, Path(results), runs, figures, dict(recipe), raw, models=study.models, tasks=study.tasks)


def two_rank_study(study: Study, results: str | Path) -> Study:
    """The rehearsal's two-rank shape: ``two_rank_arms``, N scaled to ``TWO_RANK_N``; no figures (the
    one-process rehearsal draws them all)."""
    runs = [two_rank_run(r) for r in two_rank_arms(study)] + [g for g in [two_rank_guard_arm(study)] if g]
    return _derived(study, f"{study.name}-rehearsal-2rank", "cpu-2rank", results, runs, {}, TWO_RANK_RECIPE)


def rehearsal_study(study: Study, results: str | Path) -> Study:
    """The study's rehearsal: its chosen runs, shortened, with the same figures and tables."""
    runs = [rehearsal_run(r) for r in choose_runs(study)]
    return _derived(study, f"{study.name}-rehearsal", "cpu", results, runs, study.figures, REHEARSAL_RECIPE)


def summarize(arms: list[dict[str, str]], targets: list[str], out: str | Path) -> list[str]:
    """Write the rehearsal's summary (markdown) and return one line per arm that is not whole.

    An arm is whole when its log has every step and validation point (status.json) and its job's wall
    time is known (train.benchmark.tsv); the targets exist because Snakemake drew them."""
    import json

    import pandas as pd

    lines = [
        "# Rehearsal",
        "",
        "Every distinct arm of the study, trained for a few steps through the real patched verl and vLLM on",
        "the cpu platform, with the rehearsal's substitutions (coolsampler.train.rehearsal); every figure and table",
        "below was drawn from these logs. The shape `cpu-2rank` runs the fewest arms again with two learner",
        "ranks, two sampler replicas, sleep/wake on and N scaled to refresh inside the run.",
        "",
        "| arm | shape | run key | steps | whole | wall s |",
        "|---|---|---|---|---|---|",
    ]
    problems = []
    for a in arms:
        d = Path(a["dir"])
        status = json.loads((d / "status.json").read_text())
        bench = d / "train.benchmark.tsv"
        wall = float(pd.read_csv(bench, sep="\t")["s"].iloc[0]) if bench.exists() else float("nan")
        whole = bool(status.get("complete"))
        steps = f"{status.get('last_step')}/{status.get('expected_steps')}"
        shape = a.get("shape", "cpu")
        lines.append(f"| {a['arm']} | {shape} | `{a['key']}` | {steps} | {'yes' if whole else 'NO'} | {wall:.0f} |")
        if not whole:
            problems.append(f"arm '{a['arm']}' ({a['key']}): {'; '.join(status.get('problems', []))}")
    lines += ["", "Drawn: " + ", ".join(f"`{Path(t).name}`" for t in targets if not t.endswith((".tex", ".png")))]
    Path(out).write_text("\n".join(lines) + "\n")
    return problems
