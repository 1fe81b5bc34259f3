"""Study settings that load but cannot do what they say, run through the commands in-process.

Every case is a study a researcher could write: a results path with ``~`` or ``$VAR`` (expanded as the
shell would, one folder for every command), one that is empty, inside the package, inside the shared
data, models or build folder, or with a name longer than a file name; a study, model, task or world
name too long for a folder; a data seed past 32 bits (verl and numpy take no larger one); a guard
whose window cannot fill within N, whose min leaves it no step before N, or whose threshold lies
outside its signal's values (so it fires always or never: an arm silently becomes another arm); and
a run shorter than its validation interval with ``val_every`` left out. Each is refused at study load,
by every command (``runs`` and ``plan`` here), in one line ``coolsampler <cmd>: <study file>: <key>: ...``,
exit 2, no traceback; and ``figures`` without the workflow install says in one line what it needs.

The ``test_regression_*`` tests each pin one problem that the code before these checks got wrong.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from coolsampler.spec.layout import PACKAGE
from coolsampler.spec.study import load_study
from coolsampler.spec.yaml_file import load_yaml
from tests.cli.test_fuzz_files import Result, assert_one_line, cli, write
from tests.cli.test_status_plan import write_log

REPO = Path(__file__).resolve().parents[2]
BASE: dict[str, Any] = {
    "name": "mini",
    "profile": "cpu",
    "defaults": {"model": "toy-qwen2", "task": "arith", "lr": 1.0e-4, "Tl": 1.0, "correction": "tis", "Tb": 1.0},
    "runs": [{"N": 32, "seed": 1}],
}
KEY = "toy-qwen2/arith/N32_lr1e-4_tis_Tb1_Tl1_s1"
UNSET = "COOLSAMPLER_FUZZ_UNSET"  # a variable no test sets (the fixture below removes it)


@pytest.fixture(autouse=True)
def _here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each case in its own folder, with its own home, so a literal ``~`` folder or a relative results
    path lands in tmp_path and never in the checkout."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv(UNSET, raising=False)
    return tmp_path


def study(tmp_path: Path, file: str = "study.yaml", **changes: Any) -> Path:
    """``BASE`` with ``changes`` (top-level keys; ``runs`` replaces the run list) written to ``file``."""
    doc = {**BASE, **changes}
    return write(tmp_path / file, yaml.safe_dump(doc, sort_keys=False))


def run(**settings: Any) -> list[dict[str, Any]]:
    return [{"N": 32, "seed": 1, **settings}]


def refused(r: Result, command: str, file: Path, key: str) -> str:
    """One line naming the study file and ``key`` (a dotted path into the study), exit 2, no traceback."""
    line = assert_one_line(r, command, file.name)
    assert f": {key}" in line, line
    assert "None" not in line.split(f": {key}", 1)[1], line
    return line


# ------------------------------------------------------------------------------------- regressions


def test_regression_results_tilde_is_the_home_folder_for_every_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``results: ~/coolsampler-results`` is the home folder's: status finds the run done there (it once
    looked in a literal ``./~/coolsampler-results`` and showed it "not started")."""
    path = study(tmp_path, results="~/coolsampler-results")
    home_results = tmp_path / "home" / "coolsampler-results"
    assert load_study(path).results == home_results
    d = home_results / "runs" / KEY
    write_log(d / "train.jsonl", range(1, 65))
    (d / "run.yaml").write_text(yaml.safe_dump({"settings": {"N": 32}, "platform": "cpu"}))
    (d / "status.json").write_text(json.dumps(dict(complete=True, last_step=64, expected_steps=64, problems=[])))
    r = cli(capsys, "status", "--study", str(path))
    assert r.rc == 0 and "1 runs: 1 done" in r.out, r.out + r.err
    assert not (tmp_path / "~").exists()


def test_regression_results_variables_expand_and_an_unset_one_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COOLSAMPLER_FUZZ_SCRATCH", str(tmp_path / "scratch"))
    for value in ("$COOLSAMPLER_FUZZ_SCRATCH/r", "${COOLSAMPLER_FUZZ_SCRATCH}/r"):
        assert load_study(study(tmp_path, results=value)).results == tmp_path / "scratch" / "r"
    path = study(tmp_path, results=f"${UNSET}/r")
    line = refused(cli(capsys, "runs", "--study", str(path)), "runs", path, "results")
    assert UNSET in line and "not set" in line


@pytest.mark.parametrize(
    ("value", "word"),
    [
        ("", "empty"),
        (str(PACKAGE / "results"), "inside the installed package"),
        ("results/data", "inside the shared data folder"),
        ("results/data/mine", "inside the shared data folder"),
        ("results/" + "r" * 300, "300 bytes"),
    ],
    ids=["empty", "in-package", "data-itself", "in-data", "long-name"],
)
def test_regression_results_folders_no_study_may_have_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str, word: str
) -> None:
    path = study(tmp_path, results=value)
    for command in ("runs", "plan"):
        assert word in refused(cli(capsys, command, "--study", str(path)), command, path, "results")


def test_regression_a_guard_window_that_cannot_fill_within_N_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """window 1000 needs 501 readings since the last refresh; N 32 refreshes first, every time: the run
    trained as fixed N=32 under a guard's key and cost."""
    path = study(tmp_path, runs=run(guard={"signal": "probs_diff", "threshold": 0.1, "window": 1000}))
    for command in ("runs", "plan"):
        line = refused(cli(capsys, command, "--study", str(path)), command, path, "runs[0].guard.window")
        assert "501 readings" in line and "N 32" in line


def test_regression_a_guard_threshold_outside_its_signals_values_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """ESS is at most 1: ``ess < 5`` fires at every reading, and the guard run is fixed ``min``."""
    path = study(tmp_path, runs=run(guard={"signal": "ess", "threshold": 5.0}))
    for command in ("runs", "plan"):
        line = refused(cli(capsys, command, "--study", str(path)), command, path, "runs[0].guard.threshold")
        assert "every reading" in line


def test_regression_a_guard_min_that_leaves_no_step_before_N_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = study(tmp_path, runs=run(guard={"signal": "probs_diff", "threshold": 0.1, "min": 32}))
    assert "1..31" in refused(cli(capsys, "runs", "--study", str(path)), "runs", path, "runs[0].guard.min")


def test_regression_val_every_left_out_names_the_tasks_default_not_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = study(tmp_path, runs=run(steps=5))
    line = refused(cli(capsys, "runs", "--study", str(path)), "runs", path, "runs[0].val_every")
    assert "not set" in line and "default 8" in line and "steps 5" in line


def test_regression_a_data_seed_past_32_bits_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = study(tmp_path, runs=[{"N": 32, "seed": 10**23}])
    assert "4294967295" in refused(cli(capsys, "runs", "--study", str(path)), "runs", path, "runs[0].seed")


@pytest.mark.parametrize("field", ["name", "models"])
def test_regression_a_name_of_300_characters_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str
) -> None:
    if field == "name":
        path = study(tmp_path, name="s" * 300)
    else:
        path = study(tmp_path, models={"m" * 300: {"hf_id": "org/M", "revision": "abc", "params_b": 1.0}})
    assert "300 bytes" in refused(cli(capsys, "runs", "--study", str(path)), "runs", path, field)


def test_regression_figures_without_the_workflow_install_says_what_it_needs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The light install: no Snakemake importable and no checkout beside the package (REPO points at an
    empty folder), run from outside the checkout. Once "No module named snakemake", then "Snakefile ...
    not found"."""
    import coolsampler.cli.figures as figures

    monkeypatch.setitem(sys.modules, "snakemake", None)  # what an absent package looks like to imports
    monkeypatch.setattr(figures, "REPO", tmp_path / "site-packages")
    (tmp_path / "res" / "runs").mkdir(parents=True)
    line = assert_one_line(cli(capsys, "figures", str(tmp_path / "res")), "figures")
    assert "a checkout of the repository" in line and "Snakemake" in line
    assert "bash workflow/tools/setup_env.sh" in line and "[workflow]" in line
    monkeypatch.setattr(figures, "REPO", REPO)  # a checkout, Snakemake still missing
    line = assert_one_line(cli(capsys, "figures", str(tmp_path / "res")), "figures")
    assert "Snakemake (not installed here)" in line and "checkout" not in line.split(":", 2)[1]


def test_the_shipped_studies_still_load() -> None:
    for path in sorted((REPO / "config").glob("*.yaml")):
        if "claims" not in path.name:
            assert load_study(path).runs, path


# ------------------------------------------------------------------------------------------ fuzzing


def _results_cases() -> list[tuple[str, dict[str, Any], str]]:
    cases: list[tuple[str, dict[str, Any], str]] = [
        ("empty", {"results": ""}, "empty"),
        ("blank", {"results": "   "}, "empty"),
        ("unset-bare", {"results": f"${UNSET}"}, "not set"),
        ("unset-braced", {"results": f"${{{UNSET}}}/r"}, "not set"),
        ("unset-inside", {"results": f"results/${UNSET}/x"}, "not set"),
        ("unset-after-home", {"results": f"~/${UNSET}"}, "not set"),
        ("empty-braces", {"results": "results/${}"}, "not a variable"),
        ("bad-braces", {"results": "results/${A-B}"}, "not a variable"),
        ("no-such-user", {"results": "~coolsampler-no-such-user/r"}, "no user's home"),
        ("package", {"results": str(PACKAGE)}, "installed package"),
        ("in-package", {"results": str(PACKAGE / "spec" / "mine")}, "installed package"),
        ("data", {"results": "results/data"}, "shared data folder"),
        ("in-data", {"results": "results/data/arith"}, "shared data folder"),
        ("in-data-dotted", {"results": "results/./data/x/../y"}, "shared data folder"),
        ("in-models", {"results": "results/models/x"}, "shared models folder"),
        ("in-build", {"results": "results/build/x"}, "shared build folder"),
        ("in-own-data-dir", {"results": "store/d/r", "data_dir": "store/d"}, "shared data folder"),
        ("in-own-models-dir", {"results": "store/m", "models_dir": "store/m"}, "shared models folder"),
        ("long-256", {"results": "results/" + "x" * 256}, "256 bytes"),
        ("long-300-middle", {"results": "a/" + "y" * 300 + "/b"}, "300 bytes"),
        ("long-utf8", {"results": "results/" + "é" * 128}, "256 bytes"),
        ("long-after-home", {"results": "~/" + "z" * 400}, "400 bytes"),
    ]
    return cases


RESULTS_CASES = _results_cases()


@pytest.mark.parametrize(("changes", "word"), [c[1:] for c in RESULTS_CASES], ids=[c[0] for c in RESULTS_CASES])
def test_fuzz_results_path(tmp_path: Path, capsys: pytest.CaptureFixture[str], changes: dict, word: str) -> None:
    path = study(tmp_path, **changes)
    assert word in refused(cli(capsys, "runs", "--study", str(path)), "runs", path, "results")
    assert not (tmp_path / "~").exists() and not any(tmp_path.glob("$*"))


@pytest.mark.parametrize(
    "value", ["~/r", "$HOME/r", "${HOME}/r", "~/./r", "~/r/"], ids=["tilde", "var", "braced", "dot", "slash"]
)
def test_fuzz_results_spellings_of_one_folder_are_one_folder(tmp_path: Path, value: str) -> None:
    """Good inputs: every spelling of the home folder's r is that folder (status, plan, claims and the
    rules all read ``Study.results``)."""
    assert load_study(study(tmp_path, results=value)).results == tmp_path / "home" / "r"


def _world() -> dict[str, Any]:
    return dict(load_yaml(REPO / "config" / "cliff.yaml")["worlds"]["r3a"])


NAME_CASES: list[tuple[str, dict[str, Any], str]] = [
    ("study-256", {"name": "s" * 256}, "name"),
    ("study-300", {"name": "s" * 300}, "name"),
    ("study-1000", {"name": "a" + "-" * 999}, "name"),
    ("model-256", {"models": {"m" * 256: {"hf_id": "org/M", "revision": "abc", "params_b": 1.0}}}, "models"),
    ("model-300-dotted", {"models": {"m." * 150: {"hf_id": "org/M", "revision": "abc", "params_b": 1.0}}}, "models"),
    (
        "task-300",
        {
            "tasks": {
                "t" * 300: {
                    "train": "t.parquet",
                    "val": "v.parquet",
                    "reward": "r.py:score",
                    "max_prompt_length": 16,
                    "max_response_length": 16,
                    "steps": 8,
                    "val_every": 4,
                }
            }
        },
        "tasks",
    ),
    ("world-250", {"worlds": {"w" * 250: "WORLD"}}, "worlds"),
    ("world-300", {"worlds": {"w" * 300: "WORLD"}}, "worlds"),
]


@pytest.mark.parametrize(("changes", "field"), [c[1:] for c in NAME_CASES], ids=[c[0] for c in NAME_CASES])
def test_fuzz_names_too_long_for_a_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], changes: dict, field: str
) -> None:
    if "worlds" in changes:
        changes = {"worlds": {k: _world() for k in changes["worlds"]}}
    path = study(tmp_path, **changes)
    assert "bytes" in refused(cli(capsys, "runs", "--study", str(path)), "runs", path, field)


SEED_CASES: list[tuple[str, dict[str, Any], str]] = [
    ("2**32", {"runs": [{"N": 32, "seed": 2**32}]}, "runs[0].seed"),
    ("10**23", {"runs": [{"N": 32, "seed": 10**23}]}, "runs[0].seed"),
    ("2**64", {"runs": [{"N": 32, "seed": 2**64}]}, "runs[0].seed"),
    ("grid", {"runs": [{"N": 32, "seed": [1, 2**40]}]}, "runs[0].seed[1]"),
    ("second-run", {"runs": [{"N": 32, "seed": 1}, {"N": 4, "seed": 2**33}]}, "runs[1].seed"),
    ("defaults", {"defaults": {**BASE["defaults"], "seed": 2**35}, "runs": [{"N": 32}]}, "defaults.seed"),
    ("world", {"worlds": {"w": "WORLD"}}, "worlds.w.seed"),
]


@pytest.mark.parametrize(("changes", "key"), [c[1:] for c in SEED_CASES], ids=[c[0] for c in SEED_CASES])
def test_fuzz_seed_past_32_bits(tmp_path: Path, capsys: pytest.CaptureFixture[str], changes: dict, key: str) -> None:
    if "worlds" in changes:
        changes = {"worlds": {"w": {**_world(), "seed": 10**23}}}
    path = study(tmp_path, **changes)
    assert "4294967295" in refused(cli(capsys, "runs", "--study", str(path)), "runs", path, key)


def test_fuzz_the_largest_32_bit_seed_is_a_seed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    r = cli(capsys, "runs", "--study", str(study(tmp_path, runs=[{"N": 32, "seed": 2**32 - 1}])))
    assert r.rc == 0 and r.out.strip().endswith(f"_s{2**32 - 1}"), r.out + r.err


def g(signal: str = "probs_diff", threshold: float = 0.1, **kw: int) -> dict[str, Any]:
    return {"signal": signal, "threshold": threshold, **kw}


GUARD_CASES: list[tuple[str, dict[str, Any], str, str]] = [
    ("window-1000", {"N": 32, "guard": g(window=1000)}, "window", "501 readings"),
    ("window-64", {"N": 32, "guard": g(window=64)}, "window", "33 readings"),
    ("window-62-equal", {"N": 32, "guard": g(window=62)}, "window", "32 readings"),
    ("window-default-N2", {"N": 2, "guard": g()}, "window", "3 readings"),
    ("N1", {"N": 1, "guard": g(window=1, signal="kl", threshold=1.0)}, "window", "N >= 2"),
    ("min-equals-N", {"N": 32, "guard": g(min=32)}, "min", "1..31"),
    ("min-above-N", {"N": 8, "guard": g(min=9)}, "min", "exceeds N 8"),
    ("ess-5", {"N": 32, "guard": g("ess", 5.0)}, "threshold", "every reading"),
    ("ess-1.01", {"N": 32, "guard": g("ess", 1.01)}, "threshold", "every reading"),
    ("probs-diff-1", {"N": 32, "guard": g("probs_diff", 1.0)}, "threshold", "no reading"),
    ("probs-diff-3", {"N": 32, "guard": g("probs_diff", 3.0)}, "threshold", "no reading"),
    ("is-high-1", {"N": 32, "guard": g("is_high", 1.0)}, "threshold", "no reading"),
    ("is-low-2", {"N": 32, "guard": g("is_low", 2.0)}, "threshold", "no reading"),
    ("grid-second-N", {"N": [64, 2], "guard": g()}, "window", "3 readings"),
]


@pytest.mark.parametrize("command", ["runs", "plan"])
@pytest.mark.parametrize(("settings", "key", "word"), [c[1:] for c in GUARD_CASES], ids=[c[0] for c in GUARD_CASES])
def test_fuzz_guard_that_cannot_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, settings: dict, key: str, word: str
) -> None:
    path = study(tmp_path, runs=[{"seed": 1, **settings}])
    line = refused(cli(capsys, command, "--study", str(path)), command, path, f"runs[0].guard.{key}")
    assert word in line, line


@pytest.mark.parametrize(
    "guard",
    [g(window=61), g(min=31), g("ess", 1.0), g("ess", 0.5, window=3, min=2), g("rkl_seq", 40.0), g("kl", 9.0)],
    ids=["window-61", "min-31", "ess-1", "ess-small", "rkl-unbounded", "kl-unbounded"],
)
def test_fuzz_guards_that_can_fire_before_N_still_load(tmp_path: Path, guard: dict) -> None:
    assert load_study(study(tmp_path, runs=run(guard=guard))).runs[0].guard is not None


VAL_CASES: list[tuple[str, dict[str, Any], str, str]] = [
    ("steps-5", {"runs": run(steps=5)}, "runs[0].val_every", "default 8"),
    ("steps-1", {"runs": run(steps=1)}, "runs[0].val_every", "default 8"),
    ("steps-7", {"runs": run(steps=7)}, "runs[0].val_every", "steps 7"),
    ("grid", {"runs": run(steps=[64, 3])}, "runs[0].val_every", "steps 3"),
    ("defaults", {"defaults": {**BASE["defaults"], "steps": 4}}, "runs[0].val_every", "default 8"),
    ("set-above", {"runs": run(steps=5, val_every=6)}, "runs[0].val_every", "6 exceeds steps 5"),
]


@pytest.mark.parametrize(("changes", "key", "word"), [c[1:] for c in VAL_CASES], ids=[c[0] for c in VAL_CASES])
def test_fuzz_val_every_past_steps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], changes: dict, key: str, word: str
) -> None:
    path = study(tmp_path, **changes)
    line = refused(cli(capsys, "runs", "--study", str(path)), "runs", path, key)
    assert word in line and "None" not in line, line
    if "val_every" not in str(changes):
        assert "not set" in line


def test_fuzz_case_count() -> None:
    count = len(RESULTS_CASES) + len(NAME_CASES) + len(SEED_CASES) + 2 * len(GUARD_CASES) + len(VAL_CASES)
    assert count >= 50, count
    assert os.environ.get(UNSET) is None
