"""What a test's ``snakemake -n`` in the checkout adds so that it never reads the checkout's own results.

Why: a dry run plans what is missing. In the checkout, once the user has trained a study as the README
says (``snakemake --cores 2``, then the tests), its runs are done and a dry run of it lists no job, so a
test that counts its jobs fails for that user and passes in CI, which tests before any study. Each
test that dry-runs a study in the checkout therefore points the study's results at a temporary folder
(``--config results=<tmp>``, the one place every command reads them: ``coolsampler.spec.study
.study_results``); ``tests/test_workflow.py::test_no_test_dry_runs_a_study_in_the_checkouts_results``
holds every test to it. The shared folder (results/build, data, models) stays the checkout's: what is
built there is the same for every study.
"""

from __future__ import annotations

from pathlib import Path


def temp_results(tmp_path: Path, results: str = "results") -> Path:
    """A temporary folder that ends in the study's own results path (``results``, ``results/smoke``), so
    that a listing's paths still contain it."""
    out = tmp_path / results
    out.mkdir(parents=True, exist_ok=True)
    return out


def results_config(results: str | Path) -> list[str]:
    """The options that put a study's results at ``results``; last on a command line (``--config``
    takes every word after it)."""
    return ["--config", f"results={results}"]
