"""``coolsampler claims`` against claims files with the mistakes a researcher makes writing their own, and
against runs whose ``run.yaml`` is not one, run in-process.

Families, each written as the YAML a person would type (so YAML's own readings, ``1e-4`` as text, are in
play): a measure's arguments (missing, another type, out of range, a column or word that does not exist),
a filter's values (a number YAML read as text, a correction in the wrong case, an unknown temperature
kind), the paper's value (a range upside down or bounding nothing, one value per run where one comes out),
each alone and beside a good claim before or after it. Each must be one line, ``coolsampler claims:
<file>: <claim or filter>.<field>: <problem>``, exit 2, no traceback, before any run is read. A claim that
cannot be judged on the runs given (``reduce: one`` over two) and a run whose ``run.yaml`` is not a
mapping of settings are instead one line each, and the good claims and runs are still judged.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.cli.test_fuzz_files import assert_one_line, cli, write

REPO = Path(__file__).resolve().parents[2]
DEGRADES = REPO / "examples" / "verl-logs" / "degrades"  # toy N32 run; {N: 32} selects it alone
STABLE = REPO / "examples" / "verl-logs" / "stable"  # toy N4 run

GOOD = "{id: good, where: Sec 3.1, text: the final score of the N32 run, runs: toy, tolerance: 0.01,"
GOOD += " quantity: {fn: final, reduce: one}, paper: 0.5}"


def claims_yaml(bad: str, *, runs: str = "toy", paper: str = "0.5", filters: str = "", where: str = "after") -> str:
    """A claims file with the claim ``bad`` (its quantity ``bad``, its ``runs`` and ``paper``) alone, or
    ``where`` before or after the good claim; ``filters``: more named filters."""
    claim = f"{{id: bad, where: Sec 3.1, text: a claim of the toy runs, runs: {runs}, tolerance: 0.01,"
    claim += f" quantity: {bad}, paper: {paper}}}"
    items = {"alone": [claim], "before": [claim, GOOD], "after": [GOOD, claim]}[where]
    return "filters:\n  toy: {N: 32}\n" + filters + "claims:\n" + "".join(f"  - {c}\n" for c in items)


# ------------------------------------------------------------------------------------------------ arguments
# case -> (quantity, the field the line names, words of the problem)
ARGS: dict[str, tuple[str, str, str]] = {
    "val_at-no-step": ("{fn: val_at, reduce: one}", "quantity.args.step", "missing"),
    "kl_at-no-step": ("{fn: kl_at, reduce: one, args: {}}", "quantity.args.step", "missing"),
    "kl_growth-no-until": ("{fn: kl_growth, reduce: one, args: {since: 10}}", "quantity.args.until", "missing"),
    "col_mean-no-col": ("{fn: col_mean, reduce: one, args: {since: 1}}", "quantity.args.col", "missing"),
    "threshold-quoted": ("{fn: first_at_least, reduce: one, args: {threshold: '0.5'}}", "threshold", "quotes"),
    "threshold-word": ("{fn: first_at_least, reduce: one, args: {threshold: half}}", "threshold", "a number"),
    "threshold-nan": ("{fn: first_at_least, reduce: one, args: {threshold: .nan}}", "threshold", "a number"),
    "step-word": ("{fn: val_at, reduce: one, args: {step: ten}}", "quantity.args.step", "a whole number"),
    "step-fraction": ("{fn: val_at, reduce: one, args: {step: 4.5}}", "quantity.args.step", "a whole number"),
    "step-yes": ("{fn: val_at, reduce: one, args: {step: yes}}", "quantity.args.step", "a whole number"),
    "step-list": ("{fn: val_at, reduce: one, args: {step: [10, 20]}}", "quantity.args.step", "a whole number"),
    "step-negative": ("{fn: kl_to_init, reduce: one, args: {step: -3}}", "quantity.args.step", ">= 0"),
    "last-zero": ("{fn: end, reduce: one, args: {last: 0}}", "quantity.args.last", ">= 1"),
    "cycle-zero": ("{fn: col_max, reduce: one, args: {col: kl, cycle: 0}}", "quantity.args.cycle", ">= 1"),
    "since-after-until": ("{fn: max_val, reduce: one, args: {since: 60, until: 10}}", "args.until", "since <= until"),
    "col-unknown": ("{fn: col_mean, reduce: one, args: {col: no_such_column}}", "quantity.args.col", "not a column"),
    "col-typo": ("{fn: at_onset, reduce: one, args: {col: entropyy}}", "quantity.args.col", "'entropy'"),
    "minus-typo": (
        "{fn: col_gap_at, reduce: one, args: {col: val_acc_sampled, minus: val_ac, step: 8}}",
        "quantity.args.minus",
        "'val_acc'",
    ),
    "reading-unknown": ("{fn: cycle_change, reduce: one, args: {reading: kll}}", "args.reading", "entropy_start"),
    "event-unknown": ("{fn: lead, reduce: one, args: {event: collapse}}", "quantity.args.event", "onset, severe"),
    "first_cycle-word": ("{fn: kl_cross, reduce: one, args: {first_cycle: maybe}}", "args.first_cycle", "true or"),
    "band-negative": ("{fn: back_at, reduce: one, args: {band: -0.1}}", "quantity.args.band", ">= 0"),
    "paired-no-since": (
        "{fn: kl_mean_ratio, reduce: paired, versus: toy, args: {until: 20}}",
        "quantity.args.since",
        "missing",
    ),
}


@pytest.mark.parametrize("where", ["alone", "after"])
@pytest.mark.parametrize("case", list(ARGS))
def test_fuzz_claim_arguments(case: str, where: str, tmp_path: Path, capsys) -> None:
    quantity, field, words = ARGS[case]
    f = write(tmp_path / "my-claims.yaml", claims_yaml(quantity, where=where))
    line = assert_one_line(cli(capsys, "claims", str(DEGRADES), "--claims", str(f)), "claims", f)
    assert line.startswith(f"coolsampler claims: {f}: claim bad: ") and field in line and words in line, line


# ------------------------------------------------------------------------------------------------ filters
# case -> (filter, the setting the line names, words of the problem)
FILTERS: dict[str, tuple[str, str, str]] = {
    "lr-exponent": ("{lr: 1e-4, N: 32}", "lr", "decimal point"),
    "lr-quoted": ("{lr: '0.0001'}", "lr", "without quotes"),
    "N-quoted": ("{N: '32'}", "N", "without quotes"),
    "N-word": ("{N: thirty-two}", "N", "not a number"),
    "N-in-list": ("{N: [4, '32']}", "N", "without quotes"),
    "seed-bool": ("{seed: yes}", "seed", "not a number"),
    "correction-case": ("{correction: TIS}", "correction", "did you mean 'tis'"),
    "correction-unknown": ("{correction: grpo}", "correction", "allowed: tis, none"),
    "Tb-word": ("{Tb: hot}", "Tb", "not a temperature"),
    "Tb_kind-case": ("{Tb_kind: Fixed}", "Tb_kind", "fixed"),
    "Tl-word": ("{Tl: tide}", "Tl", "a number or tied"),
    "refresh-unknown": ("{refresh: sometimes}", "refresh", "fixed, guard, schedule"),
}


@pytest.mark.parametrize("place", ["runs", "filters", "versus"])
@pytest.mark.parametrize("case", list(FILTERS))
def test_fuzz_claim_filters(case: str, place: str, tmp_path: Path, capsys) -> None:
    filt, setting, words = FILTERS[case]
    quantity = "{fn: final, reduce: one}"
    if place == "runs":
        text, field = claims_yaml(quantity, runs=filt), f"claim bad: runs.{setting}: "
    elif place == "filters":
        text, field = claims_yaml(quantity, runs="mine", filters=f"  mine: {filt}\n"), f"filters.mine.{setting}: "
    else:
        quantity = f"{{fn: final, reduce: difference, versus: {filt}}}"
        text, field = claims_yaml(quantity), f"claim bad: quantity.versus.{setting}: "
    f = write(tmp_path / "my-claims.yaml", text)
    line = assert_one_line(cli(capsys, "claims", str(DEGRADES), "--claims", str(f)), "claims", f)
    assert f"coolsampler claims: {f}: {field}" in line and words in line, line
    assert "not among these logs" not in line


# ------------------------------------------------------------------------------------------------ paper values
# case -> (quantity, paper, words of the problem)
PAPERS: dict[str, tuple[str, str, str]] = {
    "range-upside-down": ("{fn: final, reduce: one}", "[0.9, 0.1]", "low end is above the high end"),
    "range-of-nothing": ("{fn: final, reduce: one}", "[null, null]", "bounds nothing"),
    "range-of-nothing-each": ("{fn: final, reduce: each}", "[~, ~]", "bounds nothing"),
    "steps-upside-down": ("{fn: onset, reduce: each}", "[200, 100]", "low end is above"),
    "each-of-a-mean": ("{fn: final, reduce: mean}", "{each: [0.5, 0.6]}", "gives one value"),
    "each-of-a-count": ("{fn: onset, reduce: count}", "{each: [1]}", "gives one value"),
    "each-of-one": ("{fn: final, reduce: one}", "{each: [0.5]}", "gives one value"),
    "each-of-a-count-bound": ("{fn: final, reduce: each, count_at_least: 0.4}", "{each: [1]}", "gives one value"),
    "each-of-a-difference": ("{fn: final, reduce: difference, versus: toy}", "{each: [0.1]}", "gives one value"),
    "brackets-number": (
        "{fn: staleness_at_onset, reduce: brackets, versus: toy, value: 30}",
        "1",
        "true or false",
    ),
    "word-of-a-number": ("{fn: final, reduce: one}", "transient", "only fn kind"),
}


@pytest.mark.parametrize("where", ["alone", "before"])
@pytest.mark.parametrize("case", list(PAPERS))
def test_fuzz_claim_paper_values(case: str, where: str, tmp_path: Path, capsys) -> None:
    quantity, paper, words = PAPERS[case]
    f = write(tmp_path / "my-claims.yaml", claims_yaml(quantity, paper=paper, where=where))
    line = assert_one_line(cli(capsys, "claims", str(DEGRADES), "--claims", str(f)), "claims", f)
    assert line.startswith(f"coolsampler claims: {f}: claim bad: paper: ") and words in line, line


# ------------------------------------------------------------------------------------------------ not judgeable here
# a reduce-one claim whose filter selects both toy runs: that claim is its own line, the good one is judged
UNJUDGED = {
    "one-of-a-model": "{model: toy-qwen2}",
    "one-of-a-task": "{task: arith}",
    "one-of-a-list": "[{N: 4}, {N: 32}]",
    "one-of-everything": "{}",
    "one-of-a-learning-rate": "{lr: 1.0e-4}",
}


@pytest.mark.parametrize("where", ["before", "after"])
@pytest.mark.parametrize("case", list(UNJUDGED))
def test_fuzz_claim_that_cannot_be_judged_here(case: str, where: str, tmp_path: Path, capsys) -> None:
    f = write(tmp_path / "my-claims.yaml", claims_yaml("{fn: peak, reduce: one}", runs=UNJUDGED[case], where=where))
    r = cli(capsys, "claims", str(DEGRADES), str(STABLE), "--claims", str(f))
    assert "Traceback" not in r.out + r.err and r.rc == 0 and not r.err, (r.rc, r.out, r.err)
    lines = r.out.splitlines()
    bad = [x for x in lines if x.split()[2:3] == ["bad"]]
    assert len(bad) == 1 and bad[0].startswith("  not run ") and "cannot be judged on these runs" in bad[0], r.out
    assert "reduce one needs exactly one run, the filter selects 2" in bad[0]
    assert [x for x in lines if x.startswith("  differs    good ")], r.out  # still judged
    assert lines[0].startswith("2 run(s) read; 1 of the 2 claims judged") and "not run 1," in lines[-1], r.out


# ------------------------------------------------------------------------------------------------ bad run.yaml
# a run directory whose run.yaml is not the run's settings, beside a good run: one line, the good run is read
RUN_YAML: dict[str, tuple[str, str]] = {
    "a-list": ("- N: 4\n- seed: 1\n", "not a list"),
    "a-number": ("42\n", "not the int"),
    "not-yaml": ("settings: {key: [\n", "not valid YAML"),
    "a-tag": ("settings: !!python/object/apply:os.system [id]\n", "tag"),
    "settings-a-list": ("settings: [N, 4]\n", "expected a mapping of the run's settings"),
    "key-a-number": ("settings: {key: 5}\n", "is not a run key"),
    "duplicate-key": ("settings: {key: a}\nsettings: {key: b}\n", "duplicate key"),
}


@pytest.mark.parametrize("case", list(RUN_YAML))
def test_fuzz_claims_run_yaml(case: str, tmp_path: Path, capsys) -> None:
    content, words = RUN_YAML[case]
    bad = tmp_path / "bad-run"
    shutil.copytree(STABLE, bad)
    write(bad / "run.yaml", content)
    f = write(tmp_path / "my-claims.yaml", "claims:\n" + f"  - {GOOD.replace('runs: toy', 'runs: {N: 32}')}\n")
    r = cli(capsys, "claims", str(bad), str(DEGRADES), "--claims", str(f))
    line = assert_one_line(r, "claims", bad / "run.yaml", quiet=False, rc=1)
    assert words in line, line
    assert r.out.startswith("1 run(s) read;") and "  differs    good " in r.out, r.out
