"""Write the fixtures of the other trainers' logs: the smoke study's two example runs in each system's layout.

    python workflow/tools/source_fixtures.py             # every system of coolsampler.results.sources
    python workflow/tools/source_fixtures.py prime-rl    # one

For each system, ``tests/fixtures/sources/<system>/{stable,degrades}/`` gets the example runs of
``examples/verl-logs`` (real verl runs of the smoke study: one stable, one that degrades) re-dressed by
``coolsampler.testkit.redress`` under the system's own keys, in the first format its ``Source`` names, as the
file its logger writes; where the system logs no lag, a ``config.yaml`` beside it holds the bound's setting,
as the system saves its configuration. A ``PROVENANCE.md`` says what each value was made from. The values
are the example runs' own (their lag is the gate's sawtooth, written as the system's lag key): a fixture
tests the reading of a layout, not the system's behaviour.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "workflow"))

from coolsampler.results.own_logs import read_run  # noqa: E402
from coolsampler.results.sources import Source, sources  # noqa: E402
from coolsampler.testkit.redress import redress  # noqa: E402

EXAMPLES = REPO / "examples" / "verl-logs"
FIXTURES = REPO / "tests" / "fixtures" / "sources"
RUNS = ("stable", "degrades")
FORMAT_WRITER = {"flat JSONL": "components JSONL"}  # a reader's format -> the writer of that layout
# A column verl never logs, written from the example's nearest verl column so that the fixture holds its key
# (said in PROVENANCE.md): kl_pi_theta is kl's estimator against pi_theta, equal to kl where a step makes one
# update.
STAND_INS = {"kl_pi_theta": "kl"}


def stand_ins(source: Source) -> dict[str, str]:
    """The columns ``source`` maps that the example runs fill from a stand-in (``STAND_INS``)."""
    mapped = {k.column for k in source.keys}
    return {c: of for c, of in STAND_INS.items() if c in mapped}


SYSTEM_WRITER = {"verl-fully-async": "verl JSONL rows"}  # a system whose layout is its own: several rows a step
# The example's batch: 64 trajectories a step (its training scores are multiples of 1/64).
BATCH = 64
TRIGGER = 4  # verl fully_async's default trigger_parameter_sync_step: micro-steps a parameter version


def example_records(run: str) -> dict[int, dict[str, Any]]:
    """The example run's verl records, one per step."""
    from coolsampler.spec.runlog import read_jsonl

    return read_jsonl(EXAMPLES / run / "train.jsonl")[0]


def fully_async_keys(run: str) -> Callable[[int, dict[str, Any]], dict[str, Any]]:
    """The fully_async recipe's own keys of each step (fully_async_trainer.py L1038-1049, the rollouter's
    get_statistics L1166-1185, its sync row L614-623), made from the example run: its gate's lag says which
    steps trained stale trajectories (all 64 of a step at once), nothing is dropped, the defaults are verl's."""
    raw = example_records(run)
    stale = 0

    def add(step: int, data: dict[str, Any]) -> dict[str, Any]:
        nonlocal stale
        r = raw.get(step, {})
        out: dict[str, Any] = {}
        if "timing_s/gen" in r:
            out["fully_async/rollouter/active_time"] = r["timing_s/gen"]
        if step > 0:
            stale += BATCH if (r.get("staleness/staleness") or 0) >= 1 else 0
            out |= {
                "training/global_step": TRIGGER * step,
                "training/epoch": 0,
                "fully_async/count/stale_trajectory_processed": float(stale),
                "fully_async/count/current_param_version": float(step - 1),
                "fully_async/count/dropped_stale_samples": 0.0,
                "fully_async/static/staleness_threshold": 0.1,
            }
        return out

    return add


def trl_async_keys(run: str) -> Callable[[int, dict[str, Any]], dict[str, Any]]:
    """AsyncGRPOTrainer's weight-sync time (async_grpo_trainer.py L1143): the example's own
    ``timing_s/update_weights`` of the step."""
    raw = example_records(run)

    def add(step: int, data: dict[str, Any]) -> dict[str, Any]:
        t = raw.get(step, {}).get("timing_s/update_weights")
        return {"weight_sync_time_s": t} if t is not None and step > 0 else {}

    return add


EXTRA_KEYS: dict[str, Callable[[str], Callable[[int, dict[str, Any]], dict[str, Any]]]] = {
    "verl-fully-async": fully_async_keys,
    "trl-async": trl_async_keys,
}
EXTRA_TEXT = {
    "verl-fully-async": (
        " The recipe's own keys are made from the example run (`source_fixtures.fully_async_keys`):"
        " `training/global_step` = 4 x the version (the default trigger_parameter_sync_step),"
        " `fully_async/count/current_param_version` = step - 1 (the training row's off-by-one),"
        " `fully_async/count/stale_trajectory_processed` adds 64 trajectories (the example's batch) at each step"
        " the gate's lag is at least 1, `fully_async/count/dropped_stale_samples` stays 0,"
        " `fully_async/static/staleness_threshold` is the default 0.1, and each step's sync row holds"
        " `fully_async/rollouter/active_time` = the example's `timing_s/gen`. Each step is written as the"
        " recipe logs it: its sync row, its validation row where it validates, then its training row, all at"
        " the same step. The mismatch keys are the bypass mode's `actor/rollout_corr/*` (the recipe's default),"
        " valued as the example's `rollout_corr/*` (which compare with pi_old, not pi_theta)."
    ),
    "trl": (
        " The example logs no per-token log-prob difference and applies no TRL-style IS weight, so the"
        " `sampling/*` keys are absent, as in a GRPOTrainer run without vLLM (TRL writes them only with"
        " `use_vllm=True`, grpo_trainer.py L2579, L2779); the test suite reads them from a hand-written"
        " `log_history`. `kl` is the example's `actor/kl_loss` (verl's k3-type KL to the reference).\n\n"
        "**Could GRPOTrainer make a real fixture on this CPU?** From the research note (`trl.md` section 7;"
        " nothing was run): by its code, yes, with conditions: a model built from a tiny config"
        " (`AutoModelForCausalLM.from_config`) passed as an instance, `processing_class` passed explicitly (a"
        " locally built tokenizer with an `eos_token`), plain-callable rewards, `use_vllm=False` (the default),"
        " `beta=0.0` (the default; a nonzero beta rebuilds the reference model from a Hub id the from-config model"
        " lacks), `bf16=False` or `use_cpu=True`, and `trainer.save_state()` to write"
        " `<output_dir>/trainer_state.json`. TRL itself is not installed in this project's environment"
        " (transformers 5.19.0, accelerate 1.15.0 and datasets 5.2.0 are). Such a run would give the real"
        " `log_history` layout with `reward`, `entropy`, `completions/*` and `clip_ratio/*`, but none of the"
        " `sampling/*` mismatch keys (vLLM only) and no lag; AsyncGRPOTrainer needs a running vLLM server and"
        " cannot run here at all. So this fixture is re-dressed, not run."
    ),
    "trl-async": (
        " `weight_sync_time_s` is the example's `timing_s/update_weights`. `ratio` (`is_raw_mean`) and `kl`"
        " (`k3_kl`) take the example's values where it has them (it logs no raw ratio: `ratio` is absent)."
    ),
}


def fixture_file(source: Source) -> str:
    """The name of the file a run of ``source`` writes; empty for TensorBoard event files, which are
    written into the run's directory itself (what a user names)."""
    name = re.sub(r"<[^>]*>", "train", Path(source.files).name)  # a name a run's configuration gives
    return "" if name.startswith("events.out.tfevents") else name


def bound_config(source: Source) -> str | None:
    """A saved configuration holding the bound's setting at twice its default (so that a test sees it read,
    not defaulted), for a system that logs no lag."""
    b = source.bound
    if b is None or source.lag.measured or not b.paths:
        return None
    value = 2 * (b.default if b.default is not None else 1)
    lines, indent = [], ""
    *parents, leaf = b.paths[0].split(".")
    for p in parents:
        lines.append(f"{indent}{p}:")
        indent += "  "
    lines.append(f"{indent}{leaf}: {value:g}")
    return "\n".join(lines) + "\n"


def write(source: Source) -> Path:
    out = FIXTURES / source.system
    shutil.rmtree(out, ignore_errors=True)
    fmt = SYSTEM_WRITER.get(source.system) or FORMAT_WRITER.get(source.formats[0], source.formats[0])
    for run in RUNS:
        metrics = read_run(EXAMPLES / run / "train.jsonl").metrics
        for column, of in stand_ins(source).items():
            metrics[column] = metrics[of]
        extra = EXTRA_KEYS[source.system](run) if source.system in EXTRA_KEYS else None
        dest = out / run / fixture_file(source) if fixture_file(source) else out / run
        redress(metrics, source, fmt, dest, extra=extra)
        if (config := bound_config(source)) is not None:
            (out / run / "config.yaml").write_text(config)
    keys = "\n".join(f"| `{k.key}` | `{k.column}` | {k.cite} |" for k in source.keys)
    (out / "PROVENANCE.md").write_text(
        f"# {source.system}: fixtures\n\n"
        f"Made by `python workflow/tools/source_fixtures.py {source.system}` from `examples/verl-logs/stable` and"
        " `examples/verl-logs/degrades` (real verl runs of the smoke study; their own PROVENANCE.md): every value"
        " is the example run's, re-dressed by `coolsampler.testkit.redress` under the keys below in the layout"
        f" {source.system}'s logger writes ({source.files}; format {source.formats[0]}). Where a column's value"
        " is a lag, it is the example run's gate lag ((t-1) mod N), written under this system's lag key: the"
        " fixture tests the reading of the layout and the keys, not the system's behaviour."
        + (
            " A `config.yaml` beside each log holds the bound's setting at twice its default."
            if bound_config(source)
            else ""
        )
        + "".join(
            f" Its `{column}` (no verl key) holds the example's `{of}`, which is the same quantity only where a step"
            " makes one update."
            for column, of in stand_ins(source).items()
        )
        + (
            f" Its keys are logged at the example's step less their offset ({source.step})"
            + (
                ", so the example's validation before step 1 has no step there and is left out."
                if any(k.offset for k in source.keys if k.column == "val_acc")
                else "."
            )
            if any(k.offset for k in source.keys)
            else ""
        )
        + EXTRA_TEXT.get(source.system, "")
        + f"\n\nKeys, as read at {source.repo} {source.commit}:\n\n| key | column | source |\n|---|---|---|\n{keys}\n"
        + ("\nHow the layout was followed:\n\n" + "".join(f"- {n}\n" for n in source.notes) if source.notes else "")
    )
    return out


# verl itself is no Source (its keys are the schema's own): its asynchronous modes' fixtures are the example
# logs as its own file logger writes them, written here record by record.
PATCHED_KEYS = re.compile(r"^(staleness|sampler|guard)/")  # only coolsampler's patched verl logs these
TRIMMED_KEYS = re.compile(r"^(perf/|timing_s/|timing_per_token_ms/|global_seqlen/)")  # verl's, nothing reads them
STALENESS = "training/off_policy/trajectory_staleness"


def verl_v1_async(run: str, dest: Path) -> None:
    """An example run as verl 0.9.1's V1 trainer in ``colocate_async`` logs it: its own keys, none of the
    patches', and the lag (the gate's, ``staleness/staleness``) as its trajectory_staleness, which the gated
    run's verl under-reports after each validation push. Every trajectory of a step is drawn from one weight
    version, so the step's mean, max and min (and the oldest-version reading) are that one lag."""
    lines = []
    for line in (EXAMPLES / run / "train.jsonl").read_text().splitlines():
        rec = json.loads(line)
        data = {k: v for k, v in rec["data"].items() if not PATCHED_KEYS.match(k) and not TRIMMED_KEYS.match(k)}
        lag = rec["data"].get("staleness/staleness")
        if lag is not None:
            for key in (STALENESS, STALENESS + "_worst"):
                data |= {f"{key}/mean": float(lag), f"{key}/max": int(lag), f"{key}/min": int(lag)}
        lines.append(json.dumps({"step": rec["step"], "data": data}, separators=(",", ":")))
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text("\n".join(lines) + "\n")


VERL_PROVENANCE = {
    "verl-v1-async": (
        "verl's V1 trainer (`trainer.use_v1=true`, `trainer.v1.trainer_mode=colocate_async`): its file logger's"
        ' `{"step": k, "data": {...}}` lines (verl/utils/tracking.py L529-548 in verl 0.9.1), read by the'
        " schema's own keys (no Source module). Each record is the example run's, with the keys only"
        " coolsampler's patched verl writes (`staleness/*`, `sampler/*`, `guard/*`) removed (and, to keep it small,"
        " verl's own `perf/*`, `timing_s/*`, `timing_per_token_ms/*` and `global_seqlen/*`, which nothing reads), and"
        " `training/off_policy/trajectory_staleness/{mean,max,min}` (and `..._worst/*`) set to the gate's lag"
        " (its `staleness/staleness`, (t-1) mod N): verl/trainer/ppo/v1/trainer_base.py L1978-1991 in upstream"
        " 0.9.1, `(global_steps - 1) - max_global_steps` per trajectory, one weight version per step here. The"
        " degrading run's lag reaches 31, which a real colocate_async run could not reach under the default"
        " `trainer.v1.sampler.max_off_policy_threshold` 8 (its groups would be evicted,"
        " `training/off_policy/evicted_samples`, verl/trainer/ppo/v1/replay_buffer.py L367): the fixture tests"
        " the reading of the layout and the keys, not verl's behaviour. No run.yaml: verl writes none."
    ),
}
VERL_WRITERS: dict[str, Callable[[str, Path], None]] = {"verl-v1-async": verl_v1_async}


def write_verl(system: str) -> Path:
    out = FIXTURES / system
    shutil.rmtree(out, ignore_errors=True)
    for run in RUNS:
        VERL_WRITERS[system](run, out / run / "train.jsonl")
    (out / "PROVENANCE.md").write_text(
        f"# {system}: fixtures\n\nMade by `python workflow/tools/source_fixtures.py {system}` from"
        " `examples/verl-logs/stable` and `examples/verl-logs/degrades` (real verl runs of the smoke study; their"
        f" own PROVENANCE.md), as {VERL_PROVENANCE[system]}\n"
    )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("systems", nargs="*", help="systems to write (default: every one)")
    args = ap.parse_args(argv)
    known = sources()
    unknown = [s for s in args.systems if s not in known and s not in VERL_WRITERS]
    if unknown:
        ap.error(f"unknown system(s) {', '.join(unknown)}; known: {', '.join([*known, *VERL_WRITERS])}")
    for name in args.systems or [*known, *VERL_WRITERS]:
        out = write_verl(name) if name in VERL_WRITERS else write(known[name])
        print(f"wrote {out.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
