"""A claims file is checked like a study before any run is read: each measure's arguments against its
function's signature (required, type, range, a column the metrics table has), each filter against the
values a run can hold (the study's ``figures:`` rules and hints), and the paper's value against what the
reduction gives. Each mistake is one ``ClaimError`` line naming the file, the claim and the field, not a
traceback mid-evaluation nor a verdict that blames the logs. A claim that cannot be judged on the runs
given (``reduce: one`` over two) is that claim's "not run"; the others are still judged."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from coolsampler.results import claims as C
from coolsampler.spec.metrics_schema import RunStatus
from coolsampler.spec.study import parse_key

BASE = {"where": "Sec 3.1", "text": "a claim of the toy runs", "runs": {"N": 4}, "paper": 0.5, "tolerance": 0.01}


def doc(quantity: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    """A one-claim file (claim ``c1``): ``quantity`` (default the final validation of one run), and any
    field of the claim replaced by ``fields``."""
    claim = {"id": "c1", **BASE, "quantity": quantity or {"fn": "final", "reduce": "one"}, **fields}
    return {"filters": {"fixed": {"N": 4}}, "claims": [claim]}


def refused(d: dict[str, Any]) -> str:
    with pytest.raises(C.ClaimError) as e:
        C.check_claims(d, "my-claims.yaml")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("my-claims.yaml: "), msg
    return msg


@pytest.mark.parametrize(
    ("args", "fn", "field", "words"),
    [
        ({}, "val_at", "step", "missing"),
        ({"threshold": "0.5"}, "first_at_least", "threshold", "without quotes"),
        ({"step": "ten"}, "val_at", "step", "a whole number"),
        ({"step": 4.5}, "val_at", "step", "a whole number"),
        ({"step": True}, "val_at", "step", "a whole number"),
        ({"step": -1}, "val_at", "step", ">= 0"),
        ({"last": 0}, "end", "last", ">= 1"),
        ({"since": 60, "until": 10}, "max_val", "until", "since <= until"),
        ({"col": "no_such_column"}, "col_mean", "col", "not a column of the metrics table"),
        ({"col": "is_es"}, "at_onset", "col", "did you mean 'is_ess'"),
        ({"col": "val_acc_sampled", "minus": "val_ac", "step": 10}, "col_gap_at", "minus", "'val_acc'"),
        ({"reading": "kll"}, "cycle_change", "reading", "entropy_start"),
        ({"reading": "kl", "cycle": 0}, "cycle_reading", "cycle", ">= 1"),
        ({"event": "onsett"}, "lead", "event", "onset, severe"),
        ({"threshold": float("nan")}, "kl_cross", "threshold", "a number"),
        ({"first_cycle": "yes"}, "kl_cross", "first_cycle", "true or false"),
    ],
)
def test_a_measures_arguments_are_checked_against_its_signature(args, fn, field, words) -> None:
    msg = refused(doc({"fn": fn, "reduce": "one", "args": args}))
    assert f"claim c1: quantity.args.{field}: " in msg and words in msg, msg


def test_a_paired_measures_arguments_are_checked_too() -> None:
    q = {"fn": "kl_mean_ratio", "reduce": "paired", "versus": "fixed", "args": {"since": 10}}
    assert "quantity.args.until: missing" in refused(doc(q, paper=[0.5, None]))


@pytest.mark.parametrize(
    ("where", "filt", "field", "words"),
    [
        ("runs", {"lr": "1e-4"}, "runs.lr", "decimal point"),
        ("runs", {"correction": "TIS"}, "runs.correction", "did you mean 'tis'"),
        ("runs", {"correction": "is"}, "runs.correction", "allowed: tis, none"),
        ("runs", {"N": "4"}, "runs.N", "without quotes"),
        ("runs", [{"N": 4}, {"seed": "1"}], "runs[1].seed", "not a number"),
        ("runs", {"Tb": "hot"}, "runs.Tb", "not a temperature"),
        ("runs", {"Tb_kind": "Linear"}, "runs.Tb_kind", "linear"),
        ("runs", {"refresh": "guarded"}, "runs.refresh", "fixed, guard, schedule"),
        ("filters", {"lr": "2e-6"}, "filters.fixed.lr", "decimal point"),
    ],
)
def test_a_filter_is_checked_like_a_figures_filter(where, filt, field, words) -> None:
    d = doc() if where == "runs" else {**doc(), "filters": {"fixed": filt}}
    if where == "runs":
        d["claims"][0]["runs"] = filt
    msg = refused(d)
    assert f": {field}: " in msg and words in msg, msg
    if where == "runs":
        assert "claim c1: " in msg


def test_a_versus_filter_is_checked_too() -> None:
    q = {"fn": "final", "reduce": "difference", "versus": {"correction": "TIS"}}
    assert "claim c1: quantity.versus.correction: 'TIS' is not a correction" in refused(doc(q))


@pytest.mark.parametrize(
    ("quantity", "paper", "words"),
    [
        (None, [0.9, 0.1], "low end is above the high end"),
        (None, [None, None], "bounds nothing"),
        ({"fn": "final", "reduce": "mean"}, {"each": [0.5, 0.6]}, "gives one value"),
        ({"fn": "final", "reduce": "each", "count_at_least": 0.5}, {"each": [1]}, "gives one value"),
        ({"fn": "final", "reduce": "difference", "versus": "fixed"}, {"each": [0.1]}, "gives one value"),
        ({"fn": "staleness_at_onset", "reduce": "brackets", "versus": "fixed", "value": 3}, 1, "true or false"),
        ({"fn": "onset", "reduce": "one"}, "transient", "only fn kind"),
    ],
)
def test_a_paper_value_must_fit_the_reduction(quantity, paper, words) -> None:
    msg = refused(doc(quantity, paper=paper))
    assert "claim c1: paper: " in msg and words in msg, msg


@pytest.mark.parametrize(
    ("quantity", "paper"),
    [
        (None, [None, 0.5]),
        (None, [0.5, 0.5]),
        ({"fn": "final", "reduce": "each"}, {"each": [0.5, 0.6]}),
        ({"fn": "cycle_reading", "reduce": "one", "args": {"reading": "kl"}}, {"each": [0.1, 0.2]}),
        ({"fn": "final", "reduce": "difference", "versus": "fixed", "per": "seed"}, {"each": [0.1]}),
        ({"fn": "kind", "reduce": "one"}, "transient"),
        ({"fn": "val_at", "reduce": "one", "args": {"step": 10}}, 0.5),
        ({"fn": "max_val", "reduce": "one", "args": {"since": 10, "until": 10}}, 0.5),
        ({"fn": "diag_lead", "reduce": "one", "args": {"threshold": None}}, None),
        ({"fn": "collapse", "reduce": "realizations"}, [1, None]),
    ],
)
def test_what_a_claim_may_say_is_still_accepted(quantity, paper) -> None:
    C.check_claims(doc(quantity, paper=paper), "my-claims.yaml")


def _run_data(key: str, values: list[float]) -> C.RunData:
    run = parse_key(key)
    metrics = pd.DataFrame({"step": [8 * (i + 1) for i in range(len(values))], "val_acc": values})
    return C.RunData(run, metrics, RunStatus(complete=True, last_step=run.steps, expected_steps=run.steps, problems=[]))


def test_a_claim_that_cannot_be_judged_on_these_runs_leaves_the_others_judged() -> None:
    keys = ["toy-qwen2/arith/N4_lr1e-4_tis_Tb1_Tl1_s1", "toy-qwen2/arith/N4_lr1e-4_tis_Tb1_Tl1_s2"]
    data = {k: _run_data(k, [0.2, 0.5]) for k in keys}
    d = doc()  # reduce one, and the filter selects both runs
    d["claims"].append({"id": "c2", **BASE, "quantity": {"fn": "final", "reduce": "each"}})
    claims = C.Claims(d["filters"], d["claims"])
    one, each = C.evaluate(claims, [rd.run for rd in data.values()], data)
    assert one.verdict == "not run" and one.reason.startswith(C.UNJUDGED), one.reason
    assert "reduce one needs exactly one run, the filter selects 2" in one.reason
    assert each.verdict == "reproduced" and each.value == [0.5, 0.5]


@pytest.mark.parametrize(("content", "words"), [("{", "not a JSON drift probe"), ("[1, 2]", "a JSON list")])
def test_a_drift_probe_that_is_not_a_json_object_is_an_input_error(tmp_path, content: str, words: str) -> None:
    from coolsampler.spec.drift import PROBE_FILE
    from coolsampler.spec.inputs import InputError

    rd = _run_data("toy-qwen2/arith/N4_lr1e-4_tis_Tb1_Tl1_s1", [0.2, 0.5])
    metrics = tmp_path / "metrics.parquet"
    rd.metrics.to_parquet(metrics, index=False)
    (tmp_path / PROBE_FILE).write_text(content)
    with pytest.raises(InputError) as e:
        C.load_run_data(rd.run, metrics, None)
    assert e.value.file == str(tmp_path / PROBE_FILE) and words in str(e.value)
