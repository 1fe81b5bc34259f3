"""Every claim of config/claims.yaml on synthetic runs whose values are set to the paper's.

The report says ``reproduced`` for every claim on synthetic runs whose values
are the paper's, and ``differs`` for every claim on runs shifted outside the tolerance. Each claim
gets its own world (``coolsampler.testkit.synthetic_claims``): the runs its filter selects, shaped so that its
quantity reduces to the paper's value. The paper values and the verdict logic are the real ones; only
the runs are made up.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from coolsampler.cli.claims import claims_text
from coolsampler.paper import claims_report as R
from coolsampler.results import claims as C
from coolsampler.results.metrics import write_metrics
from coolsampler.spec.study import Run, Temperature, load_study
from coolsampler.testkit import synthetic_claims as S

REPO = Path(__file__).resolve().parents[2]
CLAIMS = C.load_claims(REPO / "config" / "claims.yaml")
RUNS = load_study(REPO / "config" / "paper.yaml").runs
PLAN = C.plan(CLAIMS, RUNS)  # claim id -> the keys of the runs it reads

# Claims whose world the shapes cannot build, with the reason. Each must really fail to build
# (the test below checks it), so the list cannot go stale. Keep it short.
UNCONSTRUCTIBLE: dict[str, str] = {}

IDS = [c["id"] for c in CLAIMS.claims]
CLIFF_CLAIMS = C.load_claims(REPO / "config" / "cliff-round2-claims.yaml")
CLIFF_RUNS = load_study(REPO / "config" / "cliff-round2.yaml").runs


def _claim(cid: str) -> dict[str, Any]:
    return next(c for c in CLAIMS.claims if c["id"] == cid)


def test_every_quantity_has_an_inverse() -> None:
    assert set(S.SHAPERS) == set(C.QUANTITIES)


def test_the_exceptions_are_real_claims() -> None:
    assert set(UNCONSTRUCTIBLE) <= set(IDS)
    assert len(UNCONSTRUCTIBLE) <= 5


@pytest.mark.parametrize("cid", IDS)
def test_claim_reproduces_at_the_paper_value_and_differs_shifted(cid: str) -> None:
    c = _claim(cid)
    if cid in UNCONSTRUCTIBLE:
        with pytest.raises(S.Unconstructible):
            S.world(CLAIMS, c, RUNS)
        return
    at_paper = S.world(CLAIMS, c, RUNS)
    # the world holds exactly the runs the claim reads, each a whole log
    assert set(at_paper) == set(PLAN[cid])
    assert all(rd.status.complete for rd in at_paper.values())
    r = C.evaluate_claim(CLAIMS, c, at_paper, RUNS)
    if c.get("reported"):  # no paper value: the value is shown, never judged
        want = S.default(c["quantity"]["fn"], RUNS[0], c["quantity"].get("args") or {})
        assert r.verdict == "reported" and r.value == [want] * len(at_paper), (cid, R.fmt(r.value), r.reason)
        with pytest.raises(S.Unconstructible, match="reported, not asserted"):
            S.shifted(c, RUNS)
        return
    assert r.verdict == "reproduced", (cid, R.fmt(r.value), R.fmt_paper(c["paper"]), r.reason)

    off = S.shifted(c, RUNS)
    r = C.evaluate_claim(CLAIMS, c, S.world(CLAIMS, c, RUNS, off), RUNS)
    assert r.verdict == "differs", (cid, R.fmt(r.value), R.fmt_paper(c["paper"]), off)
    assert r.reason == "", (cid, r.reason)  # it differs by value, not by a NaN


def test_shifted_values_leave_the_tolerance() -> None:
    """The shift itself: every number of it is outside the paper's value +- tolerance."""
    for c in CLAIMS.claims:
        if c.get("reported"):
            continue
        p, off, tol = c["paper"], S.shifted(c, RUNS), c["tolerance"]
        if c["quantity"]["reduce"] == "count" or isinstance(p, (bool, str)) or p is None:
            assert off != p, c["id"]
            continue
        pairs = zip(p["each"], off["each"], strict=True) if isinstance(p, dict) else [(p, off)]
        for want, got in pairs:
            if got is None or isinstance(want, str) or want is None:
                assert got != want, c["id"]
            elif isinstance(want, list):
                lo, hi = want
                assert (lo is not None and got < lo - C._tol(tol, lo)) or (
                    hi is not None and got > hi + C._tol(tol, hi)
                )
            else:
                assert abs(got - want) > C._tol(tol, want), c["id"]


RUN = Run("qwen2.5-math-1.5b", "gsm8k", 192, 2e-6, "tis", Temperature("fixed", 1.0), 1.0, 1, 300, 10)


@pytest.mark.parametrize(
    ("fn", "args", "target"),
    [
        ("final", {}, 0.61),
        ("peak", {}, 0.83),
        ("val_first", {}, 0.42),
        ("val_at", {"step": 190}, 0.53),
        ("max_val", {"until": 170}, 0.805),
        ("first_at_least", {"threshold": 0.85}, 120),
        ("onset", {}, 190),
        ("onset", {}, None),
        ("onset", {"until": 144}, 120),
        ("severe", {}, 190),
        ("kind", {}, "transient"),
        ("kind", {}, "sustained"),
        ("kind", {}, None),
        ("recovered_at", {}, 200),
        ("back_at", {}, 240),
        ("kl_cross", {"threshold": 1.0}, 179),
        ("kl_cross", {"threshold": 0.1, "first_cycle": True}, 57),
        ("kl_cross", {"threshold": 1.0}, None),
        ("kl_max", {}, 13.5),
        ("kl_at", {"step": 110}, 0.055),
        ("kl_fixed", {}, 0.125),
        ("kl_to_init", {"step": 90}, 0.004),
        ("lead", {}, 11),
        ("lead", {"event": "severe"}, -12),
        ("lead", {}, None),
        ("last5", {}, 0.857),
        ("whole", {}, 0.787),
        ("last_step", {}, 287),
        ("refreshes", {}, 1),
        ("staleness_at_onset", {}, 124),
        ("col_mean", {"col": "clip_frac", "cycle": 2}, 0.9),
        ("col_max", {"col": "temperature"}, 1.05),
        ("col_min", {"col": "temperature"}, 0.19),
        ("cycle_reading", {"reading": "kl"}, [0.31, 15.6]),
        ("cycle_reading", {"reading": "entropy_start", "cycle": 2}, 0.18),
        ("cycle_change", {"reading": "clip"}, -0.09),
        ("collapse", {}, 150),
        ("collapse", {}, None),
        ("kl_growth", {"since": 16, "until": 40, "base": 1}, 0.07),
    ],
)
def test_a_shaped_run_measures_its_target(fn: str, args: dict[str, Any], target: Any) -> None:
    """Each inverse on its own: the measure of the shaped table is the target (steps: exactly here,
    the targets are validation steps; values: to float precision)."""
    got = C.QUANTITIES[fn](C.RunData(RUN, S.shape(RUN, fn, target, args), None), **args)
    if isinstance(target, list):
        assert got == pytest.approx(target)
    elif isinstance(target, float):
        assert got == pytest.approx(target, abs=1e-12)
    else:
        assert got == target


def test_shapes_keep_the_metrics_schema() -> None:
    from coolsampler.spec.metrics_schema import COLUMNS

    # the paper's claims, then the guard study's criterion (the one quantity only it uses: interval), then
    # the cliff study's predictions (rise_lead, col_gap_at)
    files = [
        (CLAIMS, RUNS),
        (C.load_claims(REPO / "config" / "guard-claims.yaml"), load_study(REPO / "config" / "guard.yaml").runs),
        (CLIFF_CLAIMS, CLIFF_RUNS),
        # round 4's collapse and KL growth
        (C.load_claims(REPO / "config" / "cliff-claims.yaml"), load_study(REPO / "config" / "cliff.yaml").runs),
        # round 5's end and drift probe
        (
            C.load_claims(REPO / "config" / "cliff-round5-claims.yaml"),
            load_study(REPO / "config" / "cliff-round5.yaml").runs,
        ),
        # round 6's values at the onset
        (
            C.load_claims(REPO / "config" / "cliff-round6-claims.yaml"),
            load_study(REPO / "config" / "cliff-round6.yaml").runs,
        ),
    ]
    for fn in S.SHAPERS:
        claims, runs = next((cl, r) for cl, r in files if any(c["quantity"]["fn"] == fn for c in cl.claims))
        c = next(c for c in claims.claims if c["quantity"]["fn"] == fn)
        if fn == "probe":  # read from the run's drift_probe.json: no metrics shape makes it
            with pytest.raises(S.Unconstructible):
                S.world(claims, c, runs)
            continue
        for rd in S.world(claims, c, runs).values():
            assert list(rd.metrics.columns) == list(COLUMNS), fn
            assert {k: str(t) for k, t in rd.metrics.dtypes.items()} == {k: v[0] for k, v in COLUMNS.items()}, fn


def test_claims_report_from_paper_valued_run_directories(tmp_path: Path) -> None:
    """claims.md through the command line's code path: every claim's world written as run directories
    (metrics.parquet + status.json), read back by ``coolsampler claims`` (``claims_text``) with that
    claim, and the results written as one report: every verdict ``reproduced``."""
    results: list[C.Result] = []
    asserted = [c for c in CLAIMS.claims if not c.get("reported")]  # reported ones: the test below
    for i, c in enumerate(asserted):
        if c["id"] in UNCONSTRUCTIBLE:
            continue
        paths = []
        for key, rd in S.world(CLAIMS, c, RUNS).items():
            d = tmp_path / f"w{i}" / key
            write_metrics(rd.metrics, rd.status, d / "metrics.parquet", d / "status.json")
            paths.append(str(d))
        text, (res, _) = claims_text(C.Claims(CLAIMS.filters, [c]), paths)
        assert "cannot read" not in text, text
        results += res
    out = tmp_path / "report"
    budget = C.staleness_budget([], {})
    R.write_report(results, budget, "paper-valued synthetic", out / "claims.md", out / "claims.csv")
    df = pd.read_csv(out / "claims.csv")
    assert len(df) == len(asserted) - len(UNCONSTRUCTIBLE)
    assert set(df.verdict) == {"reproduced"}, df[df.verdict != "reproduced"][["id", "paper", "ours"]]
    md = (out / "claims.md").read_text()
    assert f"{len(df)} claims: reproduced **{len(df)}**, differs **0**" in md
    assert not any(isinstance(r.value, float) and math.isnan(r.value) for r in results)


def test_cli_writes_claims_md_for_a_paper_valued_world(tmp_path: Path) -> None:
    """``coolsampler claims PATH... --claims FILE --out DIR`` on one claim's written world."""
    import yaml

    from coolsampler.cli import main

    c = _claim("s31-n192-tb1-kl1")
    paths = []
    for key, rd in S.world(CLAIMS, c, RUNS).items():
        d = tmp_path / "runs" / key
        write_metrics(rd.metrics, rd.status, d / "metrics.parquet", d / "status.json")
        paths.append(str(d))
    f = tmp_path / "one.yaml"
    f.write_text(yaml.safe_dump({"filters": CLAIMS.filters, "claims": [c]}))
    assert main(["claims", *paths, "--claims", str(f), "--out", str(tmp_path / "rep")]) == 0
    df = pd.read_csv(tmp_path / "rep" / "claims.csv")
    assert list(df.verdict) == ["reproduced"] and df.ours[0] == "179 / 171 / 181"


def test_a_reported_claim_lists_the_leads_of_the_degrading_runs_only(tmp_path: Path) -> None:
    """A reported claim through the command line's code path: its world written as run directories, one
    run changed to degrade without its diagnostic crossing and one to stay stable; the verdict is
    ``reported``, never judged, and the value lists the degrading runs' leads (a stable run has none)."""
    c = _claim("diag-lead-rkl-token")
    assert c["reported"] and "paper" not in c and c["quantity"]["reduce"] == "degrading"
    runs = [r for r in RUNS if r.model == "qwen2.5-math-1.5b" and r.task == "gsm8k" and r.N == 192][:4]
    world = S.world(C.Claims(CLAIMS.filters, [c]), c, runs)
    silent, calm = runs[1].key, runs[2].key
    world[silent] = C.RunData(runs[1], S.shape(runs[1], "diag_lead", None, {"diagnostic": "rkl_token"}),
                              world[silent].status)  # fmt: skip
    world[calm] = C.RunData(runs[2], S.shape(runs[2], "onset", None, {}), world[calm].status)
    paths = []
    for key, rd in world.items():
        d = tmp_path / "runs" / key
        write_metrics(rd.metrics, rd.status, d / "metrics.parquet", d / "status.json")
        paths.append(str(d))
    text, (res, _) = claims_text(C.Claims(CLAIMS.filters, [c]), paths)
    (r,) = res
    order = [k for k in sorted(world, key=lambda k: (world[k].run.seed, world[k].run.key)) if k != calm]
    want = {k: (None if k == silent else 10) for k in order}
    assert r.verdict == "reported" and r.value == [want[k] for k in order], (r.value, text)
    assert "reported" in text and "paper reported, not asserted" in text
    out = tmp_path / "rep"
    R.write_report(res, C.staleness_budget([], {}), "s", out / "claims.md", out / "claims.csv")
    df = pd.read_csv(out / "claims.csv")
    assert list(df.verdict) == ["reported"] and df.paper[0] == "reported, not asserted"
    assert "reported **1**" in (out / "claims.md").read_text()


def test_reported_claims_cover_every_diagnostic_and_state_no_paper_value() -> None:
    from coolsampler.results.diagnostics import DIAGNOSTICS

    reported = [c for c in CLAIMS.claims if c.get("reported")]
    assert {c["quantity"]["args"]["diagnostic"] for c in reported} == {d.name for d in DIAGNOSTICS}
    assert all("paper" not in c and "tolerance" not in c and c["quantity"]["fn"] == "diag_lead" for c in reported)
    # the paper's own forward-KL claims stay asserted
    assert not _claim("s31-kl-precedes-collapse").get("reported") and not _claim("s4-lead-uncooled").get("reported")


# The cliff study's predictions that use a quantity of their own (config/cliff-round2-claims.yaml: P4 the gap of
# two columns at a step, P5 a rise's lead), on its runs' shape (56 steps, validation every 8).
@pytest.mark.parametrize("cid", ["p4-gap-shrinks", "p5-digit-error-leads"])
def test_cliff_prediction_holds_at_its_bound_and_fails_shifted(cid: str) -> None:
    c = next(c for c in CLIFF_CLAIMS.claims if c["id"] == cid)
    r = C.evaluate_claim(CLIFF_CLAIMS, c, S.world(CLIFF_CLAIMS, c, CLIFF_RUNS), CLIFF_RUNS)
    assert r.verdict == "reproduced", (cid, R.fmt(r.value), r.reason)
    off = S.shifted(c, CLIFF_RUNS)
    r = C.evaluate_claim(CLIFF_CLAIMS, c, S.world(CLIFF_CLAIMS, c, CLIFF_RUNS, off), CLIFF_RUNS)
    assert r.verdict == "differs", (cid, R.fmt(r.value), off)


def test_cli_reads_a_world_study_runs_by_the_study_their_run_yaml_names(tmp_path: Path, capsys) -> None:
    """``coolsampler claims`` on run directories of a generated world: the world's model and task are the
    study's own, so the run keys parse only with that study. run.yaml's ``study:`` finds it in the
    checkout's config/; an unknown study name is one error that points to ``--study FILE``, which reads
    them again."""
    import yaml

    from coolsampler.cli import main

    c = next(c for c in CLIFF_CLAIMS.claims if c["id"] == "p4-gap-shrinks")
    f = tmp_path / "p4.yaml"
    f.write_text(yaml.safe_dump({"filters": CLIFF_CLAIMS.filters, "claims": [c]}))

    def write(study: str) -> list[str]:
        paths = []
        for key, rd in S.world(CLIFF_CLAIMS, c, CLIFF_RUNS).items():
            assert key.startswith("chain-")  # the world's own model, unknown outside its study
            d = tmp_path / study / "runs" / key
            write_metrics(rd.metrics, rd.status, d / "metrics.parquet", d / "status.json")
            (d / "run.yaml").write_text(yaml.safe_dump({"study": study, "settings": {"key": key}}))
            paths.append(str(d))
        return paths

    assert main(["claims", *write("cliff-round2"), "--claims", str(f), "--out", str(tmp_path / "rep")]) == 0
    assert list(pd.read_csv(tmp_path / "rep" / "claims.csv").verdict) == ["reproduced"]
    capsys.readouterr()

    moved = write("renamed")
    assert main(["claims", *moved, "--claims", str(f)]) == 1
    err = capsys.readouterr().err
    assert "no single config/*.yaml here is study 'renamed'" in err and "--study FILE" in err
    assert main(["claims", *moved, "--claims", str(f), "--study", str(REPO / "config" / "cliff-round2.yaml")]) == 0
    assert "reproduced p4-gap-shrinks" in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:  # a study file that exists nowhere: argparse's usage error
        main(["claims", *moved, "--study", str(tmp_path / "none.yaml")])
    assert e.value.code == 2 and "no such file" in capsys.readouterr().err
