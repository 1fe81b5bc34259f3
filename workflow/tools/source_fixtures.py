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
import shutil
import sys
from pathlib import Path

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


def fixture_file(source: Source) -> str:
    """The name of the file a run of ``source`` writes; empty for TensorBoard event files, which are
    written into the run's directory itself (what a user names)."""
    name = Path(source.files).name
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
    fmt = FORMAT_WRITER.get(source.formats[0], source.formats[0])
    for run in RUNS:
        metrics = read_run(EXAMPLES / run / "train.jsonl").metrics
        for column, of in stand_ins(source).items():
            metrics[column] = metrics[of]
        redress(metrics, source, fmt, out / run / fixture_file(source) if fixture_file(source) else out / run)
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
        + f"\n\nKeys, as read at {source.repo} {source.commit}:\n\n| key | column | source |\n|---|---|---|\n{keys}\n"
        + ("\nHow the layout was followed:\n\n" + "".join(f"- {n}\n" for n in source.notes) if source.notes else "")
    )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("systems", nargs="*", help="systems to write (default: every one)")
    args = ap.parse_args(argv)
    known = sources()
    unknown = [s for s in args.systems if s not in known]
    if unknown:
        ap.error(f"unknown system(s) {', '.join(unknown)}; known: {', '.join(known)}")
    for name in args.systems or list(known):
        print(f"wrote {write(known[name]).relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
