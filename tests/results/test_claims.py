"""config/claims.yaml and coolsampler.results.claims (its report: coolsampler.paper.claims_report): the paper's
statements as checkable claims.

Synthetic runs (coolsampler.testkit.synthetic) stand in for the paper's 53: every claim is computed on them,
then (a) with the paper value set to what the runs show, every claim must say ``reproduced``, and
(b) shifted outside its tolerance, every claim must say ``differs``. The converse, runs shaped to the
paper's own values, is tests/results/test_claims_synthetic.py. Missing runs give ``not run``, a
run that stopped early ``incomplete``. The paper study's dry listing has runs for every claim.
"""

from __future__ import annotations

import copy
import functools
import math
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest
import yaml

from coolsampler.cli.claims import claims_text
from coolsampler.paper import claims_report as R
from coolsampler.paper.claims_rule import run_snakemake
from coolsampler.results import claims as C
from coolsampler.results.metrics import write_metrics
from coolsampler.spec.metrics_schema import RunStatus
from coolsampler.spec.study import Run, load_study
from coolsampler.testkit.synthetic import demo_runs, make_metrics
from tests.dry_run import results_config, temp_results

REPO = Path(__file__).resolve().parents[2]
CLAIMS = REPO / "config" / "claims.yaml"
PAPER = REPO / "config" / "paper.yaml"


@pytest.fixture(scope="module")
def claims() -> C.Claims:
    return C.load_claims(CLAIMS)


@pytest.fixture(scope="module")
def paper_runs() -> list[Run]:
    return load_study(PAPER).runs


def synthetic_data(runs: list[Run]) -> dict[str, C.RunData]:
    """Paper-shaped synthetic metrics for every run of the paper study (coolsampler.testkit.synthetic)."""
    demo = {r.key: (m, s) for r, m, s in demo_runs()}
    out = {}
    for i, r in enumerate(runs):
        if r.key in demo:
            m, s = demo[r.key]
        else:  # the re-run and the cut replicate: same curve family, own seed and length
            # the cut run drops at 280 (Fig 8), in its second cycle; the 0.7 re-run at 200 (Sec 4)
            collapse = 280 if r.replicate == "cut" else 200
            m = make_metrics(r.N, r.steps, r.val_every, r.Tb.initial, collapse, seed=9000 + i)
            s = RunStatus(True, r.steps, r.steps, [])
        out[r.key] = C.RunData(r, m, s)
    return out


@pytest.fixture(scope="module")
def data(paper_runs: list[Run]) -> dict[str, C.RunData]:
    return synthetic_data(paper_runs)


# --------------------------------------------------------------------------------------------------
# The claims file


def test_claims_cover_the_paper(claims: C.Claims) -> None:
    where = [c["where"] for c in claims.claims]
    assert len(where) >= 150
    for section in ("Sec 3.1", "Sec 3.2", "Sec 3.3", "Sec 4", "Table 1", "Table 2", "Table 3", "Table 4"):
        assert sum(w == section for w in where) >= 10, section
    for fig in ("Fig 3", "Fig 4", "Fig 6", "Fig 7", "Fig 8"):
        assert fig in where
    # the examples are claims
    ids = {c["id"] for c in claims.claims}
    for cid in (
        "s31-fig1b-tb1-kl1",  # "At Tb=1 it reaches one nat at step 179"
        "s31-last5-n96-vs-n192",  # "the last-five mean is 0.857 at N=96 uncooled ..."
        "s31-whole-n192-cooled",  # "... and the whole-run mean 0.790 against 0.787"
        "s32-kl110-15b-cooled",  # "at step 110 the cooled 1.5B runs sit at 0.05-0.06 nats"
        "s4-controller-heats",  # "the controller heated to 1.05 in the second cycle"
        "s4-controller-collapses",  # "... and collapsed to 0.19"
        "s4-lead-uncooled",  # "leads the onset by 9-42 steps"
        "s32-klinit-ratio",  # "the KL to its initial policy at step 90 is 2-8 times smaller"
        "s33-staleness-144-between",  # the staleness budget
    ):
        assert cid in ids, cid


def test_every_claim_selects_paper_runs(claims: C.Claims, paper_runs: list[Run]) -> None:
    C.check_selects(claims, paper_runs)  # raises on a claim with no run
    listing = C.plan(claims, paper_runs)
    assert all(listing.values())
    assert {k for keys in listing.values() for k in keys} == {r.key for r in paper_runs}


def test_a_claim_selecting_no_paper_run_is_an_error(paper_runs: list[Run]) -> None:
    doc = copy.deepcopy(_raw())
    doc["claims"][3]["runs"] = {"model": "qwen2.5-math-1.5b", "N": 999}
    bad = C.Claims(doc["filters"], doc["claims"][:5])
    with pytest.raises(C.ClaimError) as e:
        C.check_selects(bad, paper_runs)
    msg = str(e.value)
    assert "\n" not in msg and doc["claims"][3]["id"] in msg and "runs" in msg


@functools.cache
def _raw() -> dict[str, Any]:
    return yaml.load(CLAIMS.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506


def _mutated(edit: Any) -> dict[str, Any]:
    doc = copy.deepcopy(_raw())
    edit(doc)
    return doc


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (lambda d: d["claims"][0].pop("paper"), ["s31-n96-tb1-final", "paper"]),
        (lambda d: d["claims"][0]["quantity"].update(reduce="median"), ["s31-n96-tb1-final", "quantity.reduce"]),
        (lambda d: d["claims"][1].update(runs="no_such_filter"), ["s31-n96-tb1-stable", "runs", "no_such_filter"]),
        (lambda d: d["claims"][0]["quantity"].update(fn="nope"), ["s31-n96-tb1-final", "quantity.fn", "nope"]),
        (lambda d: d["claims"][0]["quantity"].update(args={"stpe": 3}), ["s31-n96-tb1-final", "quantity.args", "stpe"]),
        (lambda d: d["claims"][1].update(id=d["claims"][0]["id"]), ["s31-n96-tb1-final", "duplicate"]),
        (lambda d: d["claims"][3]["quantity"].pop("versus"), ["s31-n96-reach085-earlier", "versus"]),
        (lambda d: d["claims"][0].update(tolerance=-1), ["s31-n96-tb1-final", "tolerance"]),
        (lambda d: d["claims"][0].update(where="Section 3"), ["s31-n96-tb1-final", "where"]),
        (lambda d: d["claims"][0].update(shows=["fig9"]), ["s31-n96-tb1-final", "shows"]),
    ],
)
def test_bad_claims_fail_in_one_line_naming_claim_and_field(edit: Any, words: list[str]) -> None:
    with pytest.raises(C.ClaimError) as e:
        C.check_claims(_mutated(edit), "claims.yaml")
    msg = str(e.value)
    assert "\n" not in msg
    for w in words:
        assert w in msg, (w, msg)


# --------------------------------------------------------------------------------------------------
# Verdicts on synthetic runs


def _values(claims: C.Claims, runs: list[Run], data: dict[str, C.RunData]) -> list[C.Result]:
    res = C.evaluate(claims, runs, data)
    assert {r.verdict for r in res} <= {"reproduced", "differs"}
    return res


def asserted(claims: C.Claims) -> C.Claims:
    """The claims with a paper value (the reported ones are shown, never judged)."""
    return C.Claims(claims.filters, [c for c in claims.claims if not c.get("reported")])


def test_reported_claims_are_shown_not_judged(
    claims: C.Claims, paper_runs: list[Run], data: dict[str, C.RunData]
) -> None:
    """Each diagnostic's lead over the onset, over the degrading runs only; the forward KL's is Table 2's lead."""
    res = {r.claim["id"]: r for r in C.evaluate(claims, paper_runs, data) if r.claim.get("reported")}
    assert res and {r.verdict for r in res.values()} == {"reported"}
    degrading = sorted((d for d in data.values() if C.degrades(d)), key=C._order)
    assert 10 < len(degrading) < len(data)  # the synthetic paper study: Table 2's runs, not every run
    assert res["diag-lead-kl"].value == [C.m_lead(d) for d in degrading]
    assert all(len(r.value) == len(degrading) for r in res.values())
    # no IS weights without the correction: the ESS lead of a degrading uncorrected run is not there
    none = [i for i, d in enumerate(degrading) if d.run.correction == "none"]
    assert none and all(res["diag-lead-ess"].value[i] is None for i in none)


def as_paper(value: Any, original: Any) -> Any:
    """The paper value of the claim's own shape that says exactly what the runs show."""
    if isinstance(value, list):
        vals = [C.scalar(v) for v in value]
        if all(v is None for v in vals) and original is None:
            return None
        if isinstance(original, list) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
            return [min(vals), max(vals)]
        if len(vals) == 1 and not isinstance(original, dict):
            return vals[0]
        return {"each": vals}
    v = C.scalar(value)
    if isinstance(original, list) and isinstance(v, (int, float)) and not isinstance(v, bool):
        return [v, v]
    return v


def shifted(paper: Any, tol: Any) -> Any:
    """A paper value outside the tolerance of ``paper`` (every element of it)."""

    def one(p: Any) -> Any:
        if p is None:
            return 12345
        if isinstance(p, bool):
            return not p
        if isinstance(p, str):
            return "transient" if p == "sustained" else "sustained"
        return p + 3 * C._tol(tol, p) + 0.05 * max(1.0, abs(p)) + 0.01

    if isinstance(paper, dict):
        return {"each": [one(p) for p in paper["each"]]}
    if isinstance(paper, list):
        lo, hi = paper
        d = (hi - lo) + 3 * max(C._tol(tol, lo), C._tol(tol, hi)) + 0.05 * max(1.0, abs(hi)) + 0.01
        return [lo + d, hi + d]
    return one(paper)


def test_paper_valued_runs_reproduce_every_claim_and_shifted_ones_differ(
    claims: C.Claims, paper_runs: list[Run], data: dict[str, C.RunData]
) -> None:
    claims = asserted(claims)
    res = _values(claims, paper_runs, data)
    for r in res:
        assert not (isinstance(r.value, float) and math.isnan(r.value)), r.claim["id"]
    at_paper = copy.deepcopy(claims)
    for c, r in zip(at_paper.claims, res, strict=True):
        c["paper"] = as_paper(r.value, c["paper"])
    got = C.evaluate(at_paper, paper_runs, data)
    wrong = [(r.claim["id"], r.value, r.claim["paper"]) for r in got if r.verdict != "reproduced"]
    assert not wrong, wrong
    off = copy.deepcopy(at_paper)
    for c in off.claims:
        c["paper"] = shifted(c["paper"], c["tolerance"])
    got = C.evaluate(off, paper_runs, data)
    wrong = [(r.claim["id"], r.value, r.claim["paper"]) for r in got if r.verdict != "differs"]
    assert not wrong, wrong


def test_synthetic_runs_shaped_like_the_paper_reproduce_its_events(
    claims: C.Claims, paper_runs: list[Run], data: dict[str, C.RunData]
) -> None:
    """The synthetic study collapses where the paper's runs did, so these claims hold as written."""
    got = {r.claim["id"]: r for r in C.evaluate(claims, paper_runs, data)}
    for cid in (
        "t2-n192-tb1-onset",
        "s31-n192-tb1-severe",
        "s33-7b-192-onset-uncooled",
        "s33-7b-192-onset-cooled",
        "s33-staleness-uncooled",
        "s33-staleness-cooled",
        "s33-staleness-144-between",
        "s4-n288-same-staleness",
        "s4-n288-onset-tb08",
        "t1-n192-tb1-degraded",
        "t1-n96-tb1-refreshes",
    ):
        assert got[cid].verdict == "reproduced", (cid, got[cid].value)
    # the synthetic KL crosses one nat on its own schedule, not the paper's 179/171/181
    assert got["s31-n192-tb1-kl1"].verdict == "differs"


def test_missing_runs_are_not_run_and_list_the_runs(claims: C.Claims, paper_runs: list[Run]) -> None:
    res = C.evaluate(claims, paper_runs, {})
    assert {r.verdict for r in res} == {"not run"}
    assert all(r.runs for r in res)
    assert all("no logs yet" in r.reason for r in res)
    # runs outside the study: not run, no run listed
    res = C.evaluate(claims, [], {})
    assert all(r.verdict == "not run" and not r.runs and "no run of the study" in r.reason for r in res)


def test_one_missing_run_makes_its_claims_not_run(
    claims: C.Claims, paper_runs: list[Run], data: dict[str, C.RunData]
) -> None:
    gone = "qwen2.5-math-1.5b/gsm8k/N192_lr2e-6_tis_Tb1_Tl1_s43"
    part = {k: v for k, v in data.items() if k != gone}
    for r in C.evaluate(claims, paper_runs, part):
        assert (r.verdict == "not run") == (gone in r.runs + r.versus), r.claim["id"]


def test_a_run_that_stopped_early_makes_its_claims_incomplete(
    claims: C.Claims, paper_runs: list[Run], data: dict[str, C.RunData]
) -> None:
    key = "qwen2.5-math-1.5b/gsm8k/N192_lr2e-6_tis_Tb1_Tl1_s1"
    d = dict(data)
    m = data[key].metrics
    d[key] = C.RunData(data[key].run, m[m.step <= 250], RunStatus(False, 250, 300, ["log ends at step 250"]))
    res = C.evaluate(claims, paper_runs, d)
    for r in res:
        if key in r.runs + r.versus:
            assert r.verdict == "incomplete" and key in r.reason, r.claim["id"]
            assert r.value is not None or r.claim["quantity"]["fn"] in ("onset", "kl_cross", "lead", "severe")
        else:
            assert r.verdict in ("reproduced", "differs")
    assert any(r.verdict == "incomplete" for r in res)


# --------------------------------------------------------------------------------------------------
# Staleness budget


def test_staleness_budget_from_observed_onsets(paper_runs: list[Run], data: dict[str, C.RunData]) -> None:
    b = C.staleness_budget(paper_runs, data)
    row = lambda model, tb: b[(b.model == model) & (b.task == "gsm8k") & (b.Tb == tb) & (b.correction == "tis")  # noqa: E731
                             & (b.lr == 2e-6) & (b.Tl == "1")].iloc[0]  # fmt: skip
    b7_hot, b7_cold = row("qwen2.5-math-7b", "1"), row("qwen2.5-math-7b", "0.8")
    # synthetic 7B: uncooled onsets at step 120 (N=144 and 192), 119 steps stale; cooled at 180 (N=192),
    # 179 stale; N=144 cooled holds (staleness t - 1 - sampler_version: spec.guard.staleness)
    assert b7_hot.safe_N_below == 119 and b7_hot.degrading == 3
    assert b7_cold.first_cycle_safe_N_below == 179 and b7_cold.passed_first_refresh == 144
    assert b7_hot.first_cycle_safe_N_below < 144 < b7_cold.first_cycle_safe_N_below
    # the cut run's second-cycle onset at 280 is 280 - 1 - 144 = 135 steps stale: below 144
    assert b7_cold.safe_N_below == 135 and "135(N144)" in b7_cold.staleness_at_onset
    # staleness is read from the log's sampler_version: onset 250 at N=288 is 249 steps stale,
    # onset 300 at N=288 is 11 steps after the refresh at 288
    assert row("qwen2.5-math-1.5b", "0.6").staleness_at_onset == "11(N288)"


def test_staleness_at_onset_uses_the_log_and_falls_back_to_the_gate() -> None:
    from coolsampler.spec.study import Temperature

    run = Run("qwen2.5-math-1.5b", "gsm8k", 96, 2e-6, "tis", Temperature(), 1.0, 1, 300, 10)
    m = make_metrics(96, 300, 10, 1.0, collapse_at=250)
    d = C.RunData(run, m, None)
    assert C.m_staleness_at_onset(d) == 250 - 1 - 192  # spec.guard.staleness: t - 1 - sampler_version
    d2 = C.RunData(run, m.drop(columns=["sampler_version"]), None)
    assert C.m_staleness_at_onset(d2) == 250 - 1 - 192


def test_the_staleness_measured_is_the_staleness_logged() -> None:
    """One definition (coolsampler.spec.guard.staleness): what the claims measure at a step is what the
    trainer logged there as ``staleness``, from the log's sampler_version and from the gate's schedule."""
    from coolsampler.spec.study import Temperature

    run = Run("qwen2.5-math-1.5b", "gsm8k", 4, 2e-6, "tis", Temperature(), 1.0, 1, 20, 5)
    m = make_metrics(4, 20, 5, 1.0)
    logged = dict(zip(m["step"], m["staleness"], strict=True))
    for metrics in (m, m.drop(columns=["sampler_version"])):
        d = C.RunData(run, metrics, None)
        assert {t: C.staleness_at(d, t) for t in logged} == logged


# --------------------------------------------------------------------------------------------------
# The report: Snakemake script body, dry run, command line


def _write_runs(root: Path, data: dict[str, C.RunData], keys: list[str]) -> None:
    for k in keys:
        d = root / "runs" / k
        rd = data[k]
        write_metrics(rd.metrics, rd.status, d / "metrics.parquet", d / "status.json")


def test_report_from_the_snakemake_script(tmp_path: Path, paper_runs: list[Run], data: dict[str, C.RunData]) -> None:
    keys = [r.key for r in paper_runs if r.model == "qwen2.5-math-7b"]
    _write_runs(tmp_path, data, keys)
    out = {n: tmp_path / f for n, f in [("md", "claims.md"), ("csv", "claims.csv"),
           ("budget_md", "staleness_budget.md"), ("budget_csv", "staleness_budget.csv")]}  # fmt: skip
    smk = SimpleNamespace(
        config=yaml.safe_load((REPO / "config" / "paper.yaml").read_text()),  # the study, as Snakemake has it
        input=SimpleNamespace(metrics=[str(tmp_path / "runs" / k / "metrics.parquet") for k in keys]),
        output=SimpleNamespace(**{k: str(v) for k, v in out.items()}),
        params=SimpleNamespace(
            claims=str(CLAIMS),
            study="paper",
            run_keys=[r.key for r in paper_runs],
            results=str(tmp_path),
            defined=["fig1", "fig3", "table2"],
            probe=False,
        ),  # fmt: skip
        log=[str(tmp_path / "claims.log")],
    )
    run_snakemake(smk)
    md = out["md"].read_text()
    df = pd.read_csv(out["csv"])
    assert len(df) == len(C.load_claims(CLAIMS).claims)
    seven = df[df.runs.str.contains("qwen2.5-math-7b") & ~df.runs.str.contains("1.5b").fillna(False)]
    assert set(seven.verdict) <= {"reproduced", "differs"} and len(seven) > 20
    assert set(df.verdict) >= {"not run", "reproduced"}
    assert "[fig3](fig3.pdf)" in md and "fig8 (not in this study)" in md
    assert "[table2](table2.md)" in md and "## Staleness budget" in md
    assert "qwen2.5-math-7b" in out["budget_md"].read_text()


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO / "workflow")}


def test_paper_dry_run_lists_the_runs_of_every_claim(paper_runs: list[Run], tmp_path: Path) -> None:
    R = temp_results(tmp_path)
    p = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--configfile=config/paper.yaml", f"{R}/claims.md",
         *results_config(R)],
        cwd=REPO, capture_output=True, text=True, timeout=300, env=_env(),
    )  # fmt: skip
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-3000:]
    assert f"checked by {len(paper_runs)} runs" in out
    assert "rule train" not in out and "train " not in out.split("Job stats:")[-1]
    for r in paper_runs:
        if not (R / "runs" / r.key / "metrics.parquet").exists():
            assert f"no metrics yet: {r.key}" in out


def test_cli_on_run_directories(tmp_path: Path, paper_runs: list[Run], data: dict[str, C.RunData]) -> None:
    keys = [r.key for r in paper_runs if r.model == "qwen2.5-math-7b" and r.N == 192]
    _write_runs(tmp_path, data, keys)
    text, (results, budget) = claims_text(C.load_claims(CLAIMS), [str(tmp_path / "runs" / k) for k in keys])
    n = R.counts(results)
    assert n["reproduced"] >= 5 and n["not run"] > 100
    assert "s33-7b-192-onset-cooled" in text and "not run: their runs are not among these logs" in text
    from coolsampler.cli import main

    assert main(["claims", *(str(tmp_path / "runs" / k) for k in keys), "--out", str(tmp_path / "rep")]) == 0
    assert (tmp_path / "rep" / "claims.md").exists()
    # a path that names no run is reported, not raised
    text, _ = claims_text(C.load_claims(CLAIMS), [str(tmp_path)])
    assert "cannot read" in text


def test_probe_relaxes_filters_to_the_mechanism(tmp_path: Path) -> None:
    """Stand-in runs (another model and task) exercise every claim whose mechanism they share."""
    from coolsampler.spec.study import Temperature

    runs = [
        Run("toy-qwen2", "arith", 32, 1e-4, corr, Temperature("fixed", tb), 1.0, seed, 64, 8)
        for corr in ("tis", "none")
        for tb in (1.0, 0.8)
        for seed in (1, 2)
    ]
    for i, r in enumerate(runs):
        m = make_metrics(r.N, r.steps, r.val_every, r.Tb.initial, 48 if r.correction == "none" else None, seed=i)
        write_metrics(
            m, RunStatus(True, 64, 64, []), tmp_path / r.key / "metrics.parquet", tmp_path / r.key / "status.json"
        )
    claims = C.load_claims(CLAIMS)
    paths = [str(tmp_path / r.key) for r in runs]
    _, (strict, _) = claims_text(claims, paths)
    assert {r.verdict for r in strict if not r.claim.get("reported")} == {"not run"}
    assert {r.verdict for r in strict if r.claim.get("reported")} == {"reported"}  # they select every run
    _, (probe, budget) = claims_text(claims, paths, probe=True)
    n = R.counts(probe)
    assert n["reproduced"] + n["differs"] > 100
    assert len(budget) == 4
    assert all("model" not in f for f in C.relax(claims).filters.values())


def test_smoke_study_is_probed_and_its_dry_run_lists_its_runs(tmp_path: Path) -> None:
    """No smoke run is the paper's: the report probes the claims on them, and says so. (``--forcerun
    claims``: the rule's message is printed even where this checkout has drawn the report already.)"""
    R = temp_results(tmp_path, "results/smoke")
    p = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", "--forcerun", "claims", f"{R}/claims.md", *results_config(R)],
        cwd=REPO, capture_output=True, text=True, timeout=300, env=_env(),
    )  # fmt: skip
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-3000:]
    smoke = load_study(REPO / "config" / "config.yaml")
    assert "(probe: no run is the paper's)" in out
    assert f"checked by {len(smoke.runs)} runs" in out
