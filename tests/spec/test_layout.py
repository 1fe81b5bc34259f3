"""The result-path scheme's one owner: a run's directory and the key read back from it agree, for every
run of the committed studies, wherever the results directory lives."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from coolsampler.spec.layout import RUN_GLOB, Layout, key_of, key_of_file
from coolsampler.spec.study import load_study, parse_key
from coolsampler.train import paths

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
