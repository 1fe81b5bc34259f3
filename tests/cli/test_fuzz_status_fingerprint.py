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


# ============================================================================================ fuzz
# status: status.json shapes, types and encodings. Each: (content, the key named or None, a word of the problem)

STATUS_JSON_CASES: dict[str, tuple[str | bytes, str | None, str]] = {
    "list": ("[1, 2]", None, "a JSON list"),
    "string": ('"done"', None, "a JSON string"),
    "null": ("null", None, "a JSON null"),
    "number": ("3", None, "a JSON number"),
    "boolean": ("true", None, "a JSON boolean"),
    "empty": ("", None, "not a JSON status"),
    "blank": ("  \n", None, "not a JSON status"),
    "truncated": ('{"complete": true, "last_', None, "not a JSON status"),
    "nested": ("[" * 100_000, None, "not a JSON status"),
    "utf16": (json.dumps(STATUS).encode("utf-16"), None, "utf-8"),
    "latin1": (json.dumps({**STATUS, "problems": ["caf\xe9"]}, ensure_ascii=False).encode("latin-1"), None, "utf-8"),
    "binary": (bytes(range(256)), None, "not a JSON status"),
    "complete-string": (json.dumps({**STATUS, "complete": "false"}), "complete", "true or false"),
    "complete-int": (json.dumps({**STATUS, "complete": 1}), "complete", "true or false"),
    "complete-null": (json.dumps({**STATUS, "complete": None}), "complete", "true or false"),
    "complete-missing": (json.dumps({k: v for k, v in STATUS.items() if k != "complete"}), "complete", "true or"),
    "last-step-negative": (json.dumps({**STATUS, "last_step": -1}), "last_step", "an integer >= 0"),
    "last-step-fraction": (json.dumps({**STATUS, "last_step": 12.5}), "last_step", "an integer >= 0"),
    "last-step-boolean": (json.dumps({**STATUS, "last_step": True}), "last_step", "an integer >= 0"),
    "last-step-string": (json.dumps({**STATUS, "last_step": "64"}), "last_step", "an integer >= 0"),
    "last-step-nan": (json.dumps({**STATUS, "last_step": float("nan")}), "last_step", "an integer >= 0"),
    "last-step-huge": ('{"complete": true, "last_step": 1e400, "expected_steps": 64}', "last_step", "an integer"),
    "expected-missing": (json.dumps({"complete": True, "last_step": 64}), "expected_steps", "an integer >= 0"),
    "problems-string": (json.dumps({**STATUS, "complete": False, "problems": "cut at step 12"}), "problems", "list"),
    "problems-numbers": (json.dumps({**STATUS, "problems": [1, 2]}), "problems", "list of strings"),
    "problems-mapping": (json.dumps({**STATUS, "problems": {"a": "b"}}), "problems", "list of strings"),
    "problems-nested": (json.dumps({**STATUS, "problems": [["cut"]]}), "problems", "list of strings"),
    "problems-null": (json.dumps({**STATUS, "problems": None}), "problems", "list of strings"),
}


@pytest.mark.parametrize("case", sorted(STATUS_JSON_CASES))
def test_fuzz_status_json(case: str, tmp_path: Path, capsys) -> None:
    content, where, problem = STATUS_JSON_CASES[case]
    results, run = status_results(tmp_path, status=content)
    line = assert_status_refused(status(capsys, results), run / "status.json", where)
    assert problem in line, line


# status: a run's log (train.jsonl once done, attempts/01.jsonl while running) in another encoding

LOG = "".join(
    json.dumps({"step": s, "data": {"training/global_step": s, "rollout_corr/kl": 0.01, "timing_s/step": 1.5}}) + "\n"
    for s in range(1, 9)
)
LOG_CASES: dict[str, tuple[bytes, str | None, str]] = {
    "utf16-bom": (LOG.encode("utf-16"), None, "not UTF-8"),
    "utf16-be-bom": (b"\xfe\xff" + LOG.encode("utf-16-be"), None, "not UTF-8"),
    "utf16-no-bom": (LOG.encode("utf-16-le"), None, "not UTF-8"),
    "utf32": (LOG.encode("utf-32"), None, "not UTF-8"),
    "latin1-line-3": (LOG.encode().replace(b'"step": 3,', b'"st\xe9p": 3,'), "3", "not UTF-8 (byte 0xe9)"),
    "nul-filled": (b"\x00" * 4096, None, "not UTF-8"),
}


@pytest.mark.parametrize("case", sorted(LOG_CASES))
@pytest.mark.parametrize("phase", ["done", "running"])
def test_fuzz_log_encoding(phase: str, case: str, tmp_path: Path, capsys) -> None:
    content, where, problem = LOG_CASES[case]
    results, run = status_results(tmp_path)
    if phase == "done":
        log = write(run / "train.jsonl", content)
    else:
        for name in ("train.jsonl", "run.yaml", "status.json"):
            (run / name).unlink()
        (run / "train.log").write_text("attempt 1: verl's output goes to verl.log\n")
        log = write(run / "attempts" / "01.jsonl", content)
    line = assert_status_refused(status(capsys, results), log, where)
    assert problem in line, line


def test_fuzz_log_with_a_utf8_bom_is_still_read(tmp_path: Path, capsys) -> None:
    results, run = status_results(tmp_path)
    log = run / "train.jsonl"
    log.write_bytes(b"\xef\xbb\xbf" + log.read_bytes())
    r = status(capsys, results)
    assert r.rc == 3 and not r.err and row(r.out, BAD).split()[1:4] == ["done", "64/64", "0.564@64"], r.out + r.err


# status: a directory where a file belongs, a file where a directory belongs, files this user may not read

PATH_CASES = ("status.json", "train.jsonl", "train.log", "attempts/01.jsonl")


@pytest.mark.parametrize("name", PATH_CASES)
def test_fuzz_a_directory_where_a_run_file_belongs(name: str, tmp_path: Path, capsys) -> None:
    results, run = status_results(tmp_path)
    if name in ("train.log", "attempts/01.jsonl"):  # a running run's files
        for done in ("train.jsonl", "run.yaml", "status.json"):
            (run / done).unlink()
        write_log(run / "attempts" / "01.jsonl", range(1, 5))
        (run / "train.log").write_text("attempt 1: verl's output goes to verl.log\n")
    (run / name).unlink()
    (run / name).mkdir()
    line = assert_status_refused(status(capsys, results), run / name)
    assert "Is a directory" in line, line


def test_fuzz_a_file_where_the_run_directory_belongs(tmp_path: Path, capsys) -> None:
    results, run = status_results(tmp_path)
    shutil.rmtree(run)
    run.write_text("not a run\n")
    assert "a file where the run's directory should be" in assert_status_refused(status(capsys, results), run)


@pytest.mark.parametrize("name", ["train.jsonl", "train.log"])
def test_fuzz_a_run_file_that_cannot_be_read(name: str, tmp_path: Path, capsys, monkeypatch) -> None:
    results, run = status_results(tmp_path)
    if name == "train.log":
        for done in ("train.jsonl", "run.yaml", "status.json"):
            (run / done).unlink()
        write_log(run / "attempts" / "01.jsonl", range(1, 5))
        (run / "train.log").write_text("attempt 1: verl's output goes to verl.log\n")
    target, real = run / name, Path.open

    def open_(self: Path, *args: Any, **kw: Any) -> Any:
        if self == target:
            raise PermissionError(13, "Permission denied", str(self))
        return real(self, *args, **kw)

    monkeypatch.setattr(Path, "open", open_)
    assert "cannot be read (Permission denied)" in assert_status_refused(status(capsys, results), target)


def test_fuzz_status_results_that_is_a_file(tmp_path: Path, capsys) -> None:
    results = write(tmp_path / "results", "a file\n")
    assert "a file; --results names the folder" in assert_one_line(status(capsys, results), "status", results)


# fingerprint: a reference beside this family's good one that is not one. Each mutates the good reference
# (or replaces its text) and names the key the refusal must give ("{run}": the first run's key).


def _ref_text(ref: dict[str, Any]) -> str:
    return json.dumps(ref)


def _run_edit(**fields: Any) -> Any:
    def edit(ref: dict[str, Any]) -> str:
        run = ref["runs"][sorted(ref["runs"])[0]]
        for name, value in fields.items():
            if value is KeyError:
                del run[name]
            elif callable(value):
                run[name] = value(run[name])
            else:
                run[name] = value
        return _ref_text(ref)

    return edit


def _head(**fields: Any) -> Any:
    def edit(ref: dict[str, Any]) -> str:
        for name, value in fields.items():
            if value is KeyError:
                del ref[name]
            else:
                ref[name] = value
        return _ref_text(ref)

    return edit


def _first(d: dict[str, Any], value: Any) -> dict[str, Any]:
    return {**d, sorted(d)[0]: value}


REFERENCE_CASES: dict[str, tuple[Any, str | None, str]] = {
    "list": (lambda ref: "[1, 2]", None, "a JSON list"),
    "string": (lambda ref: '"x"', None, "a JSON string"),
    "empty": (lambda ref: "", None, "not JSON"),
    "truncated": (lambda ref: _ref_text(ref)[:300], None, "not JSON"),
    "nested": (lambda ref: "[" * 100_000, None, "not JSON"),
    "utf16": (lambda ref: _ref_text(ref).encode("utf-16"), None, "not UTF-8"),
    "binary": (lambda ref: bytes(range(256)), None, "not UTF-8"),
    "format-1": (_head(format=1), "format", "format 1, this code reads 2"),
    "format-string": (_head(format="2"), "format", "format '2'"),
    "format-missing": (_head(format=KeyError), "format", "format None"),
    "cpu-number": (_head(cpu=5), "cpu", "the CPU family's name"),
    "cpu-empty": (_head(cpu=" "), "cpu", "the CPU family's name"),
    "steps-0": (_head(steps=0), "steps", "an integer >= 1"),
    "steps-negative": (_head(steps=-3), "steps", "an integer >= 1"),
    "steps-string": (_head(steps="10"), "steps", "an integer >= 1"),
    "steps-boolean": (_head(steps=True), "steps", "an integer >= 1"),
    "models-list": (_head(models=[]), "models", "an object keyed by model"),
    "model-sha-short": (_head(models={"toy-qwen2": "abc"}), "models.toy-qwen2", "a sha256"),
    "runs-list": (_head(runs=[]), "runs", "an object keyed by run"),
    "nothing": (_head(models={}, runs={}), None, "compares nothing"),
    "run-number": (lambda ref: _ref_text({**ref, "runs": _first(ref["runs"], 3)}), "runs.{run}", "a JSON number"),
    "run-steps-empty": (_run_edit(steps=[]), "runs.{run}.steps", "covers no step"),
    "run-steps-missing": (_run_edit(steps=KeyError), "runs.{run}.steps", "increasing steps"),
    "run-steps-strings": (_run_edit(steps=lambda s: [str(x) for x in s]), "runs.{run}.steps", "increasing steps"),
    "run-steps-negative": (_run_edit(steps=lambda s: [-1, *s[1:]]), "runs.{run}.steps", "increasing steps"),
    "run-steps-unsorted": (_run_edit(steps=lambda s: s[::-1]), "runs.{run}.steps", "increasing steps"),
    "run-steps-repeated": (_run_edit(steps=lambda s: [s[0], *s[:-1]]), "runs.{run}.steps", "increasing steps"),
    "run-steps-boolean": (_run_edit(steps=lambda s: [True] * len(s)), "runs.{run}.steps", "increasing steps"),
    "run-digest-missing": (_run_edit(digest=KeyError), "runs.{run}.digest", "a sha256"),
    "run-digest-number": (_run_edit(digest=7), "runs.{run}.digest", "a sha256"),
    "run-columns-empty": (_run_edit(columns={}), "runs.{run}.columns", "holds no column"),
    "run-columns-list": (_run_edit(columns=["reward"]), "runs.{run}.columns", "holds no column"),
    "run-column-short": (
        _run_edit(columns=lambda c: {**c, "reward": c["reward"][:-4]}),
        "runs.{run}.columns.reward",
        "52 hex digits",
    ),
    "run-column-number": (_run_edit(columns=lambda c: {**c, "reward": 5}), "runs.{run}.columns.reward", "hex"),
    "run-floats-list": (_run_edit(floats=[1.0]), "runs.{run}.floats", "{column: values}"),
    "run-floats-short": (_run_edit(floats=lambda f: {**f, "kl": f["kl"][:-1]}), "runs.{run}.floats.kl", "13 numbers"),
    "run-floats-strings": (
        _run_edit(floats=lambda f: {**f, "kl": ["x"] * len(f["kl"])}),
        "runs.{run}.floats.kl",
        "numbers or nulls",
    ),
    "run-floats-boolean": (
        _run_edit(floats=lambda f: {**f, "kl": [True] * len(f["kl"])}),
        "runs.{run}.floats.kl",
        "numbers or nulls",
    ),
}


def _bad_reference(built: dict[str, Any], case: str, path: Path) -> tuple[str | None, str]:
    """Write REFERENCE_CASES[case] at ``path``; the key the refusal names, and a word of its problem."""
    make, where, problem = REFERENCE_CASES[case]
    ref = json.loads(built["ref"].read_text())
    run = sorted(ref["runs"])[0]
    write(path, make(ref))
    return (None if where is None else where.format(run=run)), problem


@pytest.mark.parametrize("case", sorted(REFERENCE_CASES))
def test_fuzz_reference_beside_a_good_one(case: str, built: dict[str, Any], tmp_path: Path, capsys) -> None:
    """Another family's reference that is not one: named in one line, this family's still compared."""
    refs = tmp_path / "refs"
    shutil.copytree(built["ref"].parent, refs)
    bad = refs / "other-family.json"
    where, problem = _bad_reference(built, case, bad)
    r = fingerprint(capsys, built["study"], refs)
    line = assert_one_line(r, "fingerprint", bad if where is None else f"{bad}:{where}: ", quiet=False)
    assert problem in line, line
    matched(r.out, built["keys"])


@pytest.mark.parametrize("case", ["list", "steps-0", "run-steps-empty", "run-columns-empty", "nothing"])
def test_fuzz_this_familys_own_reference_is_bad(case: str, built: dict[str, Any], tmp_path: Path, capsys) -> None:
    """This family's reference is not one: named, exit 2, and no run "matches" it."""
    bad = tmp_path / "refs" / built["ref"].name
    where, problem = _bad_reference(built, case, bad)
    r = fingerprint(capsys, built["study"], tmp_path / "refs")
    line = assert_one_line(r, "fingerprint", bad if where is None else f"{bad}:{where}: ", quiet=False)
    assert problem in line and "matches" not in r.out and "no reference of this CPU family" not in r.out, r.out


def test_fuzz_reference_that_is_a_directory(built: dict[str, Any], tmp_path: Path, capsys) -> None:
    refs = tmp_path / "refs"
    shutil.copytree(built["ref"].parent, refs)
    (refs / "other-family.json").mkdir()
    r = fingerprint(capsys, built["study"], refs)
    assert "cannot be read (Is a directory)" in assert_one_line(
        r, "fingerprint", refs / "other-family.json", quiet=False
    )
    matched(r.out, built["keys"])


# fingerprint: one run's metrics table or run.yaml that cannot be read, beside a good run

RUN_CASES: dict[str, tuple[str, Any, str | None, str]] = {  # file, its content, the key named, a word
    "metrics-garbage": ("metrics.parquet", b"not a parquet table", None, "not a Parquet table"),
    "metrics-empty": ("metrics.parquet", b"", None, "not a Parquet table"),
    "metrics-csv-text": ("metrics.parquet", "step,reward\n0,1\n", None, "not a Parquet table"),
    "metrics-directory": ("metrics.parquet", "dir", None, ""),
    "metrics-step-strings": ("metrics.parquet", pd.DataFrame({"step": ["a", "b"]}), "row 1", "step: 'a'"),
    "metrics-no-step-column": ("metrics.parquet", pd.DataFrame({"reward": [0.5]}), None, "no step column"),
    "metrics-no-rows": ("metrics.parquet", pd.DataFrame({"step": pd.Series([], dtype="int64")}), None, "no step"),
    "metrics-reward-text": ("metrics.parquet", pd.DataFrame({"step": [0, 1], "reward": ["x", "y"]}), "row 1", "reward"),
    "run-yaml-list": ("run.yaml", "- a\n- list\n", "1", "mapping"),
    "run-yaml-not-yaml": ("run.yaml", "settings: [\n", None, "not valid YAML"),
    "run-yaml-training-key-string": ("run.yaml", "training_key: abc\n", "training_key", "a mapping"),
    "run-yaml-directory": ("run.yaml", "dir", None, "is a directory"),
    "run-yaml-utf16": ("run.yaml", "settings: {}\n".encode("utf-16"), None, "not UTF-8"),
}


def _bad_run(built: dict[str, Any], tmp_path: Path, case: str) -> tuple[Path, Path, Path, str | None, str]:
    """A copy of the built study with RUN_CASES[case] in its first run; (study, refs, bad file, key, word)."""
    study, res, refs = own_copy(built, tmp_path)
    name, content, where, problem = RUN_CASES[case]
    path = res / "runs" / built["keys"][0] / name
    path.unlink()
    if isinstance(content, pd.DataFrame):
        content.to_parquet(path)
    elif content == "dir":
        path.mkdir()
    else:
        write(path, content)
    return study, refs, path, where, problem


@pytest.mark.parametrize("case", sorted(RUN_CASES))
def test_fuzz_fingerprint_bad_run_beside_a_good_one(case: str, built: dict[str, Any], tmp_path: Path, capsys) -> None:
    study, refs, path, where, problem = _bad_run(built, tmp_path, case)
    r = fingerprint(capsys, study, refs)
    line = assert_one_line(r, "fingerprint", path if where is None else f"{path}:{where}: ", quiet=False)
    assert problem in line, line
    bad, good = built["keys"]
    assert f"  run {bad}: not compared ({path}" in r.out and "not trained here" not in r.out, r.out
    matched(r.out, [good])


@pytest.mark.parametrize("case", ["metrics-garbage", "metrics-no-rows", "run-yaml-list"])
def test_fuzz_fingerprint_write_with_a_bad_run_writes_nothing(
    case: str, built: dict[str, Any], tmp_path: Path, capsys
) -> None:
    study, refs, path, _, _ = _bad_run(built, tmp_path, case)
    before = {p.name: p.read_bytes() for p in refs.iterdir()}
    r = fingerprint(capsys, study, refs, "--write")
    assert_one_line(r, "fingerprint", path, quiet=False)
    assert "nothing written" in r.out and {p.name: p.read_bytes() for p in refs.iterdir()} == before, r.out


# fingerprint: a steps bound that is no bound

STEPS_CASES = ("0", "-3", "-1", "abc", "1.5", "", "1e3", "0x10")


@pytest.mark.parametrize("value", STEPS_CASES)
@pytest.mark.parametrize("mode", ["write", "compare"])
def test_fuzz_fingerprint_steps(mode: str, value: str, built: dict[str, Any], tmp_path: Path, capsys) -> None:
    extra = ["--write"] if mode == "write" else []
    r = fingerprint(capsys, built["study"], built["ref"].parent, *extra, f"--steps={value}")
    assert "give" in assert_flag_refused(r, "fingerprint", "--steps")


# fingerprint and status: folders that are missing, or files where folders belong


def test_fuzz_references_folder_missing(built: dict[str, Any], tmp_path: Path, capsys) -> None:
    r = fingerprint(capsys, built["study"], tmp_path / "no-such-dir")
    assert "no such folder of references" in assert_one_line(r, "fingerprint", tmp_path / "no-such-dir")


def test_fuzz_references_folder_below_a_file(built: dict[str, Any], tmp_path: Path, capsys) -> None:
    refs = write(tmp_path / "a-file", "x\n") / "refs"
    assert "no such folder of references" in assert_one_line(
        fingerprint(capsys, built["study"], refs), "fingerprint", refs
    )
    r = fingerprint(capsys, built["study"], refs, "--write")
    assert "cannot be written" in assert_one_line(r, "fingerprint", refs)


@pytest.mark.parametrize("mode", ["write", "compare"])
def test_fuzz_references_that_is_a_file(mode: str, built: dict[str, Any], tmp_path: Path, capsys) -> None:
    refs = write(tmp_path / "refs.json", "{}\n")
    r = fingerprint(capsys, built["study"], refs, *(["--write"] if mode == "write" else []))
    assert "not a folder" in assert_one_line(r, "fingerprint", refs)


def test_fuzz_fingerprint_of_a_study_with_nothing_built(tmp_path: Path, capsys) -> None:
    study = write(tmp_path / "mini.yaml", MINI.replace("name: mini\n", f"name: mini\nresults: {tmp_path / 'none'}\n"))
    refs = (tmp_path / "refs").mkdir() or tmp_path / "refs"
    r = fingerprint(capsys, study, refs)
    assert "nothing of study mini is built" in assert_one_line(r, "fingerprint", tmp_path / "none")
