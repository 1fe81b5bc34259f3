"""``coolsampler fingerprint`` on a study's results: write a family's reference, match it, find a change."""

from __future__ import annotations

import json

import pandas as pd
import yaml

from coolsampler.cli import main as cli_main
from coolsampler.spec import numerics
from coolsampler.spec.study import load_study
from coolsampler.testkit.synthetic import write_study_results
from coolsampler.train.paths import Layout
from coolsampler.train.version import REPO


def test_write_match_and_differ(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    raw = yaml.safe_load((REPO / "config/config.yaml").read_text())
    raw["results"] = str(tmp_path / "res")
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(raw))
    study = load_study(tmp_path / "study.yaml")
    keys = write_study_results(study)
    weights = tmp_path / Layout.from_config(study.raw, study.results).model_weights("toy-qwen2")
    weights.parent.mkdir(parents=True)
    weights.write_bytes(b"toy weights")
    refs = tmp_path / "refs"
    refs.mkdir()  # a --references folder that does not exist is an error, not "no reference"
    args = ["fingerprint", "--study", str(tmp_path / "study.yaml"), "--references", str(refs)]

    assert cli_main(args) == 0
    assert "no reference committed" in capsys.readouterr().out
    assert cli_main([*args, "--write"]) == 0
    written = json.loads(next(refs.glob("*.json")).read_text())
    assert written["cpu"] == numerics.cpu_family() and set(written["runs"]) == set(keys)

    assert cli_main(args) == 0
    out = capsys.readouterr().out
    assert out.count("matches the reference of") == len(keys) + 1 and "(this CPU family)" in out

    metrics = tmp_path / study.results / "runs" / keys[0] / "metrics.parquet"
    df = pd.read_parquet(metrics)
    df.loc[df["step"] == 7, "reward"] += 1e-9
    df.to_parquet(metrics)
    assert cli_main(args) == 1  # this family's reference differs
    assert f"run {keys[0]}: differs from step 7, in reward" in capsys.readouterr().out


def test_nothing_built_is_one_clear_error(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the shared models folder (results/models) is relative: none here
    raw = yaml.safe_load((REPO / "config/config.yaml").read_text())
    raw["results"] = str(tmp_path / "none")
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(raw))
    assert cli_main(["fingerprint", "--study", str(tmp_path / "study.yaml")]) == 2
    assert "nothing of study smoke is built" in capsys.readouterr().err
