"""``coolsampler status`` and ``fingerprint`` against odd status files, logs, references, flags and folders.

Both read many inputs: ``status`` every run directory of a study, ``fingerprint`` every run's metrics and
``run.yaml`` and every reference of the study. The contract each case holds: a bad input gets one line on
stderr, ``coolsampler <cmd>: <file>[:<key>]: <problem>``, never a traceback, exit 2; the other runs are still
shown (``status``: their rows; ``fingerprint``: their verdicts). ``fingerprint`` never says "matches" where
it compared nothing: a reference covering no step, a ``--steps`` below 1 and a references folder that does
not exist are refused.

The ``test_regression_*`` tests each pin one problem the code before these checks got wrong; the
``test_fuzz_*`` tests generate the cases, family by family. Every case runs the CLI in-process.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from coolsampler.results import fingerprint as fpr
from coolsampler.spec.inputs import InputError
from coolsampler.spec.study import load_study
from coolsampler.testkit.synthetic import write_study_results
from tests.cli.test_fuzz_files import Result, assert_flag_refused, assert_one_line, cli, write
from tests.cli.test_status_plan import write_log

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "config" / "config.yaml"
KEYS = [r.key for r in load_study(SMOKE).runs]
BAD, GOOD = KEYS[0], KEYS[1:4]  # status: one run's files are bad, three beside it are good and done
STATUS = {"complete": True, "last_step": 64, "expected_steps": 64, "problems": []}

# A study of two runs, 12 steps, validated every 5 (at steps 5 and 10): small enough to fingerprint per case.
MINI = (
    "name: mini\n"
    "profile: cpu\n"
    "defaults: {model: toy-qwen2, task: arith, lr: 1.0e-4, Tl: 1.0, correction: tis, Tb: 1.0, steps: 12,"
    " val_every: 5}\n"
    "runs:\n"
    "  - {N: 4, seed: 1}\n"
    "  - {N: 32, seed: 2}\n"
)


@pytest.fixture(autouse=True)
def _elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run where nothing is built: a shared models folder (``results/models``) is relative to here."""
    monkeypatch.chdir(tmp_path)


# ------------------------------------------------------------------------------------------ status


def finished(results: Path, key: str, *, status: str | bytes | None = None) -> Path:
    """A run trained and parsed: ``train.jsonl`` (64 steps), ``run.yaml``, ``status.json`` (``status``:
    its text instead of a whole log's)."""
    run = results / "runs" / key
    write_log(run / "train.jsonl", range(1, 65))
    (run / "run.yaml").write_text("settings: {}\n")
    write(run / "status.json", json.dumps(STATUS) if status is None else status)
    return run


def status_results(tmp: Path, **bad: Any) -> tuple[Path, Path]:
    """A results folder with the GOOD runs done and BAD's run as ``finished(**bad)``; (results, BAD's dir)."""
    results = tmp / "results"
    for key in GOOD:
        finished(results, key)
    return results, finished(results, BAD, **bad)


def status(capsys: pytest.CaptureFixture[str], results: Path) -> Result:
    return cli(capsys, "status", "--study", str(SMOKE), "--results", str(results))


def row(out: str, key: str) -> str:
    return next(x for x in out.splitlines() if x.startswith(key + " "))


def assert_status_refused(r: Result, file: Path, where: str | None = None) -> str:
    """One line naming ``file`` (and ``where``), exit 2, BAD's row says so, the good runs are still done."""
    line = assert_one_line(r, "status", file, quiet=False)
    if where is not None:
        assert f"{file}:{where}: " in line, line
    assert "bad input" in row(r.out, BAD) and " done " not in row(r.out, BAD), r.out
    for key in GOOD:
        assert " done " in row(r.out, key) and " 64/64 " in row(r.out, key), r.out
    assert f"{len(KEYS)} runs: 3 done, " in r.out and ", 1 bad input" in r.out, r.out
    return line


def test_regression_status_json_that_is_a_list_is_one_line(tmp_path: Path, capsys) -> None:
    results, run = status_results(tmp_path, status="[1, 2]")
    line = assert_status_refused(status(capsys, results), run / "status.json")
    assert "a JSON list" in line, line


def test_regression_status_complete_given_as_a_string_is_refused_not_done(tmp_path: Path, capsys) -> None:
    text = json.dumps({**STATUS, "complete": "false", "problems": ["stopped at step 40 of 64"]})
    results, run = status_results(tmp_path, status=text)
    assert_status_refused(status(capsys, results), run / "status.json", "complete")


def test_regression_status_problems_given_as_a_string_is_refused_not_spelt(tmp_path: Path, capsys) -> None:
    text = json.dumps({**STATUS, "complete": False, "problems": "cut at step 12"})
    results, run = status_results(tmp_path, status=text)
    r = status(capsys, results)
    assert_status_refused(r, run / "status.json", "problems")
    assert "c; u; t" not in r.out


def test_regression_status_json_that_cannot_be_read_is_its_own_row(tmp_path: Path, capsys, monkeypatch) -> None:
    results, run = status_results(tmp_path)
    target, read = run / "status.json", Path.read_bytes

    def read_bytes(self: Path) -> bytes:
        if self == target:
            raise PermissionError(13, "Permission denied", str(self))
        return read(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    line = assert_status_refused(status(capsys, results), target)
    assert "cannot be read (Permission denied)" in line, line


def test_regression_run_directory_that_cannot_be_read_is_its_own_row(tmp_path: Path, capsys, monkeypatch) -> None:
    """As a directory of mode 000 does for a user other than root: every file in it fails to stat."""
    results, run = status_results(tmp_path)
    real = Path.stat

    def stat(self: Path, *, follow_symlinks: bool = True) -> Any:
        if run in self.parents:
            raise PermissionError(13, "Permission denied", str(self))
        return real(self, follow_symlinks=follow_symlinks)

    monkeypatch.setattr(Path, "stat", stat)
    assert "cannot be read (Permission denied)" in assert_status_refused(status(capsys, results), run)


def test_regression_one_utf16_train_jsonl_does_not_end_the_table(tmp_path: Path, capsys) -> None:
    results, run = status_results(tmp_path)
    log = run / "train.jsonl"
    log.write_bytes(log.read_text().encode("utf-16"))
    r = status(capsys, results)
    assert "not UTF-8" in assert_status_refused(r, log)
    assert all(row(r.out, k) for k in KEYS), r.out  # every run has its row: the table went on


def test_status_of_good_runs_reads_as_before(tmp_path: Path, capsys) -> None:
    """A whole log, an incomplete one and a UTF-8 BOM: read through the same loader, shown as before."""
    results = tmp_path / "results"
    finished(results, KEYS[0])
    cut = {**STATUS, "complete": False, "last_step": 40, "problems": ["stopped at step 40 of 64", "no val"]}
    finished(results, KEYS[1], status=json.dumps(cut))
    finished(results, KEYS[2], status=b"\xef\xbb\xbf" + json.dumps(STATUS).encode())
    r = status(capsys, results)
    assert r.rc == 3 and not r.err and "bad input" not in r.out, r.out + r.err
    for key in (KEYS[0], KEYS[2]):
        assert row(r.out, key).split() == [key, "done", "64/64", "0.564@64", "0.064", "-"], r.out
    assert row(r.out, KEYS[1]).endswith(" -    log incomplete: stopped at step 40 of 64; no val"), r.out
    assert f"{len(KEYS)} runs: 3 done, 0 running, 0 stalled, 0 failed, 6 not started\n" in r.out


# ------------------------------------------------------------------------------------- fingerprint


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The mini study's synthetic results and this machine's reference of them, made once (read-only)."""
    from coolsampler.cli import main

    base = tmp_path_factory.mktemp("fingerprint")
    study = write(base / "mini.yaml", MINI.replace("name: mini\n", f"name: mini\nresults: {base / 'res'}\n"))
    keys = write_study_results(load_study(study))
    assert main(["fingerprint", "--study", str(study), "--references", str(base / "refs"), "--write"]) == 0
    [ref] = sorted((base / "refs").glob("*.json"))
    return {"base": base, "study": study, "keys": keys, "ref": ref}


def own_copy(built: dict[str, Any], tmp: Path) -> tuple[Path, Path, Path]:
    """A copy of the built study, its results and references, to change: (study file, results, refs)."""
    shutil.copytree(built["base"] / "res", tmp / "res")
    shutil.copytree(built["base"] / "refs", tmp / "refs")
    study = write(tmp / "mini.yaml", MINI.replace("name: mini\n", f"name: mini\nresults: {tmp / 'res'}\n"))
    return study, tmp / "res", tmp / "refs"


def fingerprint(capsys: pytest.CaptureFixture[str], study: Path, refs: Path, *extra: str) -> Result:
    return cli(capsys, "fingerprint", "--study", str(study), "--references", str(refs), *extra)


def matched(out: str, keys: list[str]) -> None:
    """Each of ``keys`` matches this family's reference, over all 13 steps (0..12) and every exact column."""
    for key in keys:
        line = next(x for x in out.splitlines() if x.startswith(f"  run {key}: "))
        assert ": matches the reference of " in line and "(compared 13 steps x 14 columns; " in line, out


def test_regression_steps_below_one_are_refused(built: dict[str, Any], tmp_path: Path, capsys) -> None:
    for steps in ("0", "-3"):
        r = fingerprint(capsys, built["study"], tmp_path / "refs", "--write", "--steps", steps)
        assert "give a whole number > 0" in assert_flag_refused(r, "fingerprint", "--steps")
    assert not (tmp_path / "refs").exists()  # nothing written


def test_regression_a_reference_covering_no_step_is_refused(built: dict[str, Any], tmp_path: Path, capsys) -> None:
    ref = json.loads(built["ref"].read_text())
    for run in ref["runs"].values():
        run.update(steps=[], digest=fpr.run_fingerprint(pd.DataFrame({"step": []}))["digest"], columns={}, floats={})
    path = write(tmp_path / "refs" / built["ref"].name, json.dumps(ref))
    line = assert_one_line(fingerprint(capsys, built["study"], tmp_path / "refs"), "fingerprint", path, quiet=False)
    assert f"{path}:runs.{sorted(ref['runs'])[0]}.steps: covers no step" in line, line
    with pytest.raises(InputError, match="covers no step"):
        fpr.read(path)


def test_regression_a_change_at_step_10_is_found(built: dict[str, Any], tmp_path: Path, capsys) -> None:
    """The reproducibility gate, end to end: a reference over steps 0..10, then one run's validation
    accuracy and reward changed at step 10. The old reference over "step 0" passed it."""
    study, res, refs = own_copy(built, tmp_path)
    shutil.rmtree(refs)
    assert fingerprint(capsys, study, refs, "--write", "--steps", "0").rc == 2
    assert fingerprint(capsys, study, refs, "--write", "--steps", "10").rc == 0
    r = fingerprint(capsys, study, refs)
    assert r.rc == 0 and r.out.count("(compared 11 steps x 14 columns; ") == 2, r.out
    key = built["keys"][0]
    metrics = res / "runs" / key / "metrics.parquet"
    df = pd.read_parquet(metrics)
    at = df["step"] == 10
    assert df.loc[at, "val_acc"].notna().all()
    df.loc[at, "val_acc"] += 0.125
    df.loc[at, "reward"] += 0.125
    df.to_parquet(metrics)
    r = fingerprint(capsys, study, refs)
    assert r.rc == 1, r.out + r.err
    assert f"run {key}: differs from step 10, in reward, val_acc (compared 11 steps x 14 columns; " in r.out, r.out
    assert "matches" not in next(x for x in r.out.splitlines() if f"run {key}:" in x)


def test_regression_a_references_folder_that_does_not_exist_is_an_error(built: dict[str, Any], capsys) -> None:
    r = fingerprint(capsys, built["study"], Path("no-such-dir"))
    line = assert_one_line(r, "fingerprint", "no-such-dir")
    assert "no such folder of references" in line and "no reference committed" not in r.out, line


def test_regression_every_comparison_says_what_it_compared(built: dict[str, Any], capsys) -> None:
    r = fingerprint(capsys, built["study"], built["ref"].parent)
    assert r.rc == 0 and not r.err, r.out + r.err
    matched(r.out, built["keys"])
    # a comparison that compared nothing never says "matches", even handed one in memory
    run = fpr.run_fingerprint(pd.read_parquet(built["base"] / "res" / "runs" / built["keys"][0] / "metrics.parquet"))
    empty = {"steps": [], "digest": "", "columns": {}, "floats": {}}
    [diff] = fpr.compare({"runs": {"r": run}}, {"runs": {"r": empty}})
    assert not diff.same and "nothing compared" in diff.line("X") and "compared 0 steps x 0 columns" in diff.line("X")
    [diff] = fpr.compare({"runs": {"r": run}}, {"runs": {"r": {**run, "columns": {}}}})
    assert not diff.same and "nothing compared: the reference covers no column" in diff.line("X")


def test_regression_a_malformed_run_is_its_own_row(built: dict[str, Any], tmp_path: Path, capsys) -> None:
    study, res, refs = own_copy(built, tmp_path)
    bad, good = built["keys"]
    record = write(res / "runs" / bad / "run.yaml", "- a\n- list\n")
    r = fingerprint(capsys, study, refs)
    line = assert_one_line(r, "fingerprint", record, quiet=False)
    assert "mapping" in line, line
    assert f"  run {bad}: not compared ({record}" in r.out and "not trained here" not in r.out, r.out
    matched(r.out, [good])


def test_committed_references_load_and_match_themselves() -> None:
    """The shipped references read through the new checks, and each compared with itself matches over
    every step it covers (65 steps x 14 columns for the smoke study)."""
    paths = sorted((ROOT / "config" / "fingerprints").glob("*/*.json"))
    assert len(paths) >= 3
    for path in paths:
        ref = fpr.read(path)
        diffs = fpr.compare(ref, ref)
        assert diffs and all(d.same for d in diffs), path
        runs = [d.line(ref["cpu"]) for d in diffs if d.artefact.startswith("run ")]
        assert all("(compared 65 steps x 14 columns; learner metrics identical)" in x for x in runs), runs
