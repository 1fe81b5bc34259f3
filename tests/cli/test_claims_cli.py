"""``coolsampler claims`` on a verl log of one run: the claims whose runs are not among the logs are
counted in one line, and ``--all`` lists each of them."""

from __future__ import annotations

from pathlib import Path

from coolsampler.cli import main

REPO = Path(__file__).resolve().parents[2]
LOG = REPO / "examples" / "verl-logs" / "degrades"  # one paper-shaped run (its run.yaml names the key)


def test_claims_not_run_are_counted_and_all_lists_each(capsys) -> None:
    assert main(["claims", str(LOG)]) == 0
    brief = capsys.readouterr().out
    hint = next(line for line in brief.splitlines() if "claims not run" in line)
    assert "--all lists them" in hint and "  not run  " not in brief
    not_run = int(hint.split("(")[1].split()[0])

    assert main(["claims", "--all", str(LOG)]) == 0
    full = capsys.readouterr().out
    listed = [line for line in full.splitlines() if line.startswith("  not run  ")]
    assert len(listed) >= not_run > 0 and "--all lists them" not in full
    assert all("no run of the study matches" in line or "not in these logs" in line for line in listed)
    # the judged claims and the counts are the same either way
    assert full.splitlines()[-1] == brief.splitlines()[-1]
