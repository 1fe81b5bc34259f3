"""The result-path scheme's one owner: a run's directory and the key read back from it agree, for every
run of the committed studies, wherever the results directory lives."""

from __future__ import annotations

import re
import string
from pathlib import Path

import pytest
import yaml

from coolsampler.spec.layout import RUN_FILES, RUN_GLOB, RUNS, Layout, key_of, key_of_file, run_pattern
from coolsampler.spec.study import KEY_WILDCARD_RE, load_study, parse_key
from coolsampler.train import paths
from coolsampler.train.rehearsal import TWO_RANK_DIR
from coolsampler.train.rerun import key_markers

REPO = Path(__file__).resolve().parents[2]
STUDIES = sorted(p for p in (REPO / "config").glob("*.yaml") if "runs" in (yaml.safe_load(p.read_text()) or {}))


@pytest.mark.parametrize("study_file", STUDIES, ids=lambda p: p.stem)
def test_key_of_inverts_run_dir(study_file: Path, tmp_path: Path) -> None:
    study = load_study(study_file)
    layout = Layout(str(tmp_path / "somewhere" / "else"))
    for run in study.runs:
        d = layout.run_dir(run.key)
        assert key_of(d) == run.key
        assert key_of(Path(d).resolve()) == run.key
        assert key_of_file(layout.run_file(run.key, "metrics.parquet")) == run.key
        assert study.run_dir(run) == Path(Layout(str(study.results)).run_dir(run.key))


def test_run_glob_finds_exactly_the_run_directories(tmp_path: Path) -> None:
    study = load_study(REPO / "config" / "config.yaml")
    layout = Layout(str(tmp_path))
    for run in study.runs:
        Path(layout.run_file(run.key, "metrics.parquet")).parent.mkdir(parents=True)
    (tmp_path / "figures").mkdir()  # a sibling of runs/ is no run
    found = sorted(key_of(p) for p in tmp_path.glob(RUN_GLOB))
    assert found == sorted(r.key for r in study.runs)
    assert [parse_key(k).key for k in found] == found  # a path read back is a key parse_key accepts
    Path(layout.run_file(found[0], "metrics.parquet")).write_bytes(b"")
    assert [key_of_file(p) for p in tmp_path.glob(f"{RUN_GLOB}/metrics.parquet")] == [found[0]]
    assert Path(layout.run_glob()).relative_to(tmp_path).as_posix() == RUN_GLOB


def test_train_paths_reexports_the_one_layout() -> None:
    assert paths.Layout is Layout
    assert paths.key_of is key_of
    assert paths.run_pattern is run_pattern


def _pattern_regex(pattern: str, constraints: dict[str, str]) -> re.Pattern[str]:
    """A wildcard pattern as Snakemake reads it: each {name} a group held to its constraint."""
    out = re.escape(pattern)
    for name, rx in constraints.items():
        out = out.replace(re.escape(f"{{{name}}}"), f"(?P<{name}>{rx})", 1)
    return re.compile(out + "$")


@pytest.mark.parametrize("study_file", STUDIES, ids=lambda p: p.stem)
def test_run_pattern_is_the_layouts_run_path_with_the_wildcards(study_file: Path) -> None:
    """The rules' patterns and the scripts' concrete paths are one scheme: filling the pattern's wildcards
    gives Layout's path, and matching Layout's path (as Snakemake does, with the Snakefile's constraints)
    gives back the root and the key, for the study and for its rehearsal's roots alike."""
    study = load_study(study_file)
    base = Layout(str(study.results))
    roots = [base, base.rehearsal_layout(), base.rehearsal_layout(TWO_RANK_DIR)]
    constraints = {"root": "|".join(re.escape(x.results) for x in roots), "key": KEY_WILDCARD_RE}
    for name in ("train.jsonl", "metrics.parquet", "curves.png"):
        rx = _pattern_regex(run_pattern(name), constraints)
        for layout in roots:
            for run in study.runs:
                path = layout.run_file(run.key, name)
                assert run_pattern(name).format(root=layout.results, key=run.key) == path
                m = rx.match(path)
                assert m and (m["root"], m["key"]) == (layout.results, run.key), path
    run = study.runs[0]
    assert run_pattern().format(root=base.results, key=run.key) == base.run_dir(run.key)
    assert base.run_dir(run.key) == f"{base.runs}/{run.key}"
    assert base.run_glob().startswith(f"{base.runs}/")


def test_run_pattern_keeps_the_wildcards_of_the_file_name() -> None:
    """A file name with a wildcard of its own (rule supersede's marker) keeps it beside {root} and {key}."""
    pattern = key_markers(run_pattern(), "{tkey}")["set_aside"]
    assert {f for _, f, _, _ in string.Formatter().parse(pattern) if f} == {"root", "key", "tkey"}
    layout = Layout("results/smoke")
    key = "toy-qwen2/arith/N4_lr1e-4_tis_Tb1_Tl1_s1"
    marker = pattern.format(root=layout.results, key=key, tkey="0123456789ab")
    assert marker == key_markers(layout.run_dir(key), "0123456789ab")["set_aside"]
    assert key_of_file(marker) == key


def _snakefile_header() -> str:
    """The Snakefile's docstring: where the result-path scheme is documented for people."""
    return (REPO / "Snakefile").read_text().split('"""')[1]


def test_the_snakefile_header_documents_the_layouts_run_paths() -> None:
    """Every run path the header spells is the one Layout builds (R standing for the study's results),
    and every file a run directory holds (RUN_FILES) is listed in it."""
    header = _snakefile_header()
    r = Layout("R")
    spelled = {w.rstrip(",") for w in header.split() if f"/{RUNS}/" in w}
    assert spelled == {
        r.run_dir("<model>/<task>/<settings>") + "/",
        r.run_file("<key>", "curves.png"),
        r.run_file("<key>", "diagnostics.png"),
        r.rehearsal_layout(TWO_RANK_DIR).run_dir("<key>") + "/",
    }
    assert f"{r.rehearsal_layout().results}/..." in header.split()
    block = header.split(r.run_dir("<model>/<task>/<settings>") + "/", 1)[1].split("\n    R/", 1)[0]
    missing = [name for name in RUN_FILES if not re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w.-])", block)]
    assert not missing, f"the Snakefile header's run directory lists no {missing}"
