"""The CLI's edges: ``analyze`` and ``parse`` on logs outside their run directory,
truncated, without validation, missing or empty; ``parse --out`` by suffix."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from coolsampler.cli import main
from coolsampler.spec.metrics_schema import COLUMNS


def bare_log(path: Path, steps: int, *, val_every: int | None = 10, temperature: bool = False) -> Path:
    """A verl JSONL with the required metrics only: no staleness (so no N) and, unless asked, no sampler
    temperature (so no Tb): what a user's own verl run logs."""
    path.parent.mkdir(parents=True, exist_ok=True)
    val_key = COLUMNS["val_acc"][2][0].replace("*", "gsm8k")
    recs = [{"step": 0, "data": {val_key: 0.5}}] if val_every else []
    for t in range(1, steps + 1):
        data = {
            "training/global_step": t,
            "rollout_corr/kl": 0.01,
            "actor/entropy": 0.5,
            "critic/score/mean": 0.5,
            "actor/grad_norm": 1.0,
            "actor/kl_loss": 0.001,
        }
        if temperature:
            data["sampler/temperature"] = 0.8
        if val_every and t % val_every == 0:
            data[val_key] = 0.5 + t / 1000
        recs.append({"step": t, "data": data})
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


def test_analyze_takes_plain_verl_settings_only_from_a_plain_verl_log(tmp_path: Path, capsys) -> None:
    """A log without any of the patched verl's keys is plain verl: its sampler is refreshed every step
    (N=1) at verl's default temperature unless --Tb says otherwise, and the text says it assumed that.
    A log of the patched verl (it logs sampler/temperature) that lacks the refresh steps is refused."""
    log = bare_log(tmp_path / "mine.jsonl", 120)
    assert main(["analyze", str(log)]) == 0
    out = capsys.readouterr().out
    assert "plain verl (no staleness/* or sampler/* in its log): N=1, it refreshes its sampler every step" in out
    assert "Tb=1.0, verl's default actor_rollout_ref.rollout.temperature (--Tb if it set another)" in out
    assert "Summary" in out
    assert main(["analyze", str(log), "--Tb", "0.7"]) == 0
    out = capsys.readouterr().out
    assert "Tb=1.0, verl's default" not in out and "| 0.7 |" in out
    log_t = bare_log(tmp_path / "cooled.jsonl", 120, temperature=True)
    assert main(["analyze", str(log_t)]) == 1
    cap = capsys.readouterr()
    assert "missing settings: N: refresh interval (--N)" in cap.out and "Tb" not in cap.out.split("missing")[1]
    assert "missing settings" in cap.err and "Summary" not in cap.out
    # N given, Tb logged by the run itself: analysed, and the text says where each came from
    assert main(["analyze", str(log_t), "--N", "96"]) == 0
    out = capsys.readouterr().out
    assert "N=96 (given; Tb inferred from the log)" in out and "| 0.8 |" in out


def test_analyze_does_not_call_a_log_of_unknown_length_complete(tmp_path: Path, capsys) -> None:
    log = bare_log(tmp_path / "cut.jsonl", 60)
    assert main(["analyze", str(log), "--N", "96", "--Tb", "1.0"]) == 0
    out = capsys.readouterr().out
    assert "completeness unknown" in out and "(complete)" not in out
    assert main(["analyze", str(log), "--N", "96", "--Tb", "1.0", "--steps", "120"]) == 0
    out = capsys.readouterr().out
    assert "NOT complete" in out and "stopped at step 60 of 120" in out
    whole = bare_log(tmp_path / "whole.jsonl", 120)
    assert main(["analyze", str(whole), "--N", "96", "--Tb", "1.0", "--steps", "120"]) == 0
    assert "(complete)" in capsys.readouterr().out


def test_analyze_reads_run_yaml_or_the_run_key_beside_the_log(tmp_path: Path, capsys) -> None:
    d = tmp_path / "copied"
    log = bare_log(d / "train.jsonl", 60)
    settings = {"N": 32, "Tb": 0.8, "steps": 64, "val_every": 10, "correction": "tis", "seed": 1, "key": "k"}
    (d / "run.yaml").write_text(yaml.safe_dump({"settings": settings}))
    assert main(["analyze", str(log)]) == 0
    out = capsys.readouterr().out
    assert "N=32 (run.yaml)" in out and "NOT complete" in out and "stopped at step 60 of 64" in out
    # a run directory named by its key (as results/<study>/runs/ holds them), without run.yaml
    keyed = bare_log(tmp_path / "toy-qwen2" / "arith" / "N32_lr1e-4_tis_Tb0.8_Tl1_s1" / "train.jsonl", 64, val_every=8)
    assert main(["analyze", str(keyed)]) == 0
    out = capsys.readouterr().out
    assert "N=32 (the run key of its directory)" in out and "(complete)" in out and "| 0.8 |" in out


def test_analyze_without_validation_points_is_not_stable(tmp_path: Path, capsys) -> None:
    log = bare_log(tmp_path / "noval.jsonl", 40, val_every=None)
    assert main(["analyze", str(log), "--N", "8", "--Tb", "1.0", "--steps", "40"]) == 0
    out = capsys.readouterr().out
    assert "no validation points: degradation cannot be judged" in out and "no onset" not in out


@pytest.mark.parametrize("command", ["analyze", "parse"])
def test_a_missing_or_empty_file_fails(tmp_path: Path, capsys, command: str) -> None:
    code = 1 if command == "analyze" else 2
    assert main([command, str(tmp_path / "absent.jsonl")]) == code
    assert "no such file" in capsys.readouterr().err
    (tmp_path / "empty.jsonl").write_text("")
    assert main([command, str(tmp_path / "empty.jsonl")]) == code
    assert "empty file" in capsys.readouterr().err


def test_parse_writes_the_format_its_suffix_names(tmp_path: Path, capsys) -> None:
    log = bare_log(tmp_path / "r.jsonl", 30)
    assert main(["parse", str(log), "--out", str(tmp_path / "m.csv"), "--steps", "30"]) == 0
    assert "wrote" in capsys.readouterr().out
    csv = (tmp_path / "m.csv").read_text()
    assert csv.startswith("step,") and list(pd.read_csv(tmp_path / "m.csv").columns) == list(COLUMNS)
    assert main(["parse", str(log), "--out", str(tmp_path / "m.parquet")]) == 0
    assert len(pd.read_parquet(tmp_path / "m.parquet")) == 31
    assert main(["parse", str(log), "--out", str(tmp_path / "m.json")]) == 2
    assert "unknown format" in capsys.readouterr().err and not (tmp_path / "m.json").exists()


def test_parse_says_when_completeness_is_unknown(tmp_path: Path, capsys) -> None:
    log = bare_log(tmp_path / "cut.jsonl", 30)
    assert main(["parse", str(log)]) == 0
    out = capsys.readouterr().out
    assert "completeness unknown" in out and "\ncomplete\n" not in out
    (tmp_path / "run.yaml").write_text(yaml.safe_dump({"settings": {"steps": 60, "val_every": 10}}))
    assert main(["parse", str(log)]) == 0
    assert "NOT complete: stopped at step 30 of 60" in capsys.readouterr().out


def test_claims_fails_on_a_missing_or_empty_path(tmp_path: Path, capsys) -> None:
    assert main(["claims", str(tmp_path / "absent")]) == 1
    assert "no such file or directory" in capsys.readouterr().err
    (tmp_path / "empty.jsonl").write_text("")
    assert main(["claims", str(tmp_path / "empty.jsonl")]) == 1
    assert "empty file" in capsys.readouterr().err


@pytest.mark.parametrize(
    "command", ["overrides", "parse", "analyze", "claims", "runs", "status", "plan", "figures", "verl-check", "memory"]
)
def test_each_subcommands_help_says_what_it_prints(command: str, capsys) -> None:
    with pytest.raises(SystemExit) as e:
        main([command, "--help"])
    assert e.value.code == 0
    head = capsys.readouterr().out.split("\n\n")[1]  # the description, after the usage
    assert "print" in head, head


def test_a_missing_training_stack_is_one_line_naming_the_install(monkeypatch, capsys) -> None:
    """verl-check in a light install (`pip install -e .`): no traceback, the set-up command."""
    import builtins

    real = builtins.__import__

    def no_verl(name, *args, **kwargs):
        if name.split(".")[0] == "verl":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_verl)
    monkeypatch.delitem(sys.modules, "coolsampler.train.verl_config", raising=False)
    assert main(["verl-check", "--study", "config/config.yaml"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "coolsampler verl-check: needs the training stack (no module 'verl" in err
    assert "bash workflow/tools/setup_env.sh" in err
