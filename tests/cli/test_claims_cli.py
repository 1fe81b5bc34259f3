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


STABLE = REPO / "examples" / "verl-logs" / "stable"  # the other toy run: N4, so {N: 32} selects only degrades


def claims_file(tmp_path: Path, *claims: str) -> Path:
    """A claims file of the given claims (each a YAML flow mapping of quantity, runs and paper)."""
    body = "".join(
        f"  - {{id: {cid}, where: Sec 3.1, text: a claim of the toy runs, tolerance: 0.01, {rest}}}\n"
        for cid, rest in (c.split(" ", 1) for c in claims)
    )
    path = tmp_path / "my-claims.yaml"
    path.write_text("claims:\n" + body)
    return path


GOOD = "good runs: {N: 32}, quantity: {fn: final, reduce: one}, paper: 0.5"


def test_a_measures_bad_argument_is_one_line_naming_the_file_claim_and_field(tmp_path: Path, capsys) -> None:
    f = claims_file(tmp_path, "bad runs: {N: 32}, quantity: {fn: val_at, reduce: one}, paper: 0.5", GOOD)
    assert main(["claims", "--claims", str(f), str(LOG)]) == 2
    out, err = capsys.readouterr()
    assert (
        err == f"coolsampler claims: {f}: claim bad: quantity.args.step: missing; val_at needs step (a whole number)\n"
    )
    assert not out


def test_a_filter_value_no_run_can_hold_is_one_line_not_runs_not_among_the_logs(tmp_path: Path, capsys) -> None:
    f = claims_file(tmp_path, "bad runs: {lr: 1e-4, N: 32}, quantity: {fn: final, reduce: one}, paper: 0.5", GOOD)
    assert main(["claims", "--claims", str(f), str(LOG)]) == 2
    out, err = capsys.readouterr()
    assert err.startswith(f"coolsampler claims: {f}: claim bad: runs.lr: '1e-4' is not a number") and not out
    assert "decimal point" in err and err.count("\n") == 1


def test_a_claim_that_cannot_be_judged_is_its_own_line_and_the_others_are_judged(tmp_path: Path, capsys) -> None:
    one = "bad runs: {model: toy-qwen2}, quantity: {fn: final, reduce: one}, paper: 0.5"  # both runs
    f = claims_file(tmp_path, one, GOOD)
    assert main(["claims", "--claims", str(f), str(LOG), str(STABLE)]) == 0
    out = capsys.readouterr().out
    bad = [line for line in out.splitlines() if " bad " in line]
    assert len(bad) == 1 and bad[0].startswith("  not run ") and "cannot be judged on these runs" in bad[0]
    assert "reduce one needs exactly one run, the filter selects 2" in bad[0]
    assert any(line.startswith("  differs    good ") for line in out.splitlines())
    assert "claims not run: their runs are not among these logs" not in out
    assert out.splitlines()[-1].startswith("counts: 2 claims:") and "not run 1" in out.splitlines()[-1]


def test_a_run_yaml_that_is_not_a_mapping_is_one_line_and_the_other_runs_are_read(tmp_path: Path, capsys) -> None:
    import shutil

    bad = tmp_path / "bad"
    shutil.copytree(STABLE, bad)
    (bad / "run.yaml").write_text("- N: 4\n- seed: 1\n")
    assert main(["claims", "--claims", str(claims_file(tmp_path, GOOD)), str(bad), str(LOG)]) == 1
    out, err = capsys.readouterr()
    assert err.splitlines() == [
        f"coolsampler claims: {bad / 'run.yaml'}:1: a run.yaml is a mapping of keys (key: value), not a list"
    ]
    assert out.startswith("1 run(s) read;") and "  differs    good " in out
