"""The CLI's edges: ``analyze`` and ``parse`` on logs outside their run directory,
truncated, without validation, missing or empty; ``parse --out`` by suffix."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from coolsampler.cli import SUBCOMMANDS, main
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
    assert (
        "N=1, Tb=1.0 (assumed: plain verl (no staleness/* or sampler/* in its log) refreshes its sampler every"
        " step, samples at verl's default actor_rollout_ref.rollout.temperature (--Tb if it set another))"
    ) in out
    assert out.count("N=1") == 1  # said once
    # N=1 assumed: Table 1 counts a refresh a step over the 120 logged steps, not none
    assert "| 1.0 | 1 | 120 |" in out
    assert main(["analyze", str(log), "--Tb", "0.7"]) == 0
    out = capsys.readouterr().out
    assert "samples at verl's default" not in out and "| 0.7 |" in out
    log_t = bare_log(tmp_path / "cooled.jsonl", 120, temperature=True)
    assert main(["analyze", str(log_t)]) == 1
    cap = capsys.readouterr()
    assert "missing settings: N: refresh interval (--N)" in cap.out and "Tb" not in cap.out.split("missing")[1]
    assert "missing settings" in cap.err and "Summary" not in cap.out
    # N given, Tb logged by the run itself: analysed, and the text says where each came from
    assert main(["analyze", str(log_t), "--N", "96"]) == 0
    out = capsys.readouterr().out
    assert "N=96, Tb=0.8 (given; Tb inferred from the log)" in out and "| 0.8 |" in out


def test_analyze_does_not_call_a_log_of_unknown_length_complete(tmp_path: Path, capsys) -> None:
    log = bare_log(tmp_path / "cut.jsonl", 60)
    assert main(["analyze", str(log), "--N", "96", "--Tb", "1.0"]) == 0
    out = capsys.readouterr().out
    assert "the run's length is unknown: not called complete" in out and "(complete)" not in out
    # and it is never called incomplete either: its last step is all that is known of its length
    assert "incomplete" not in out and "NOT complete" not in out and "60 of 60" not in out
    assert main(["analyze", str(log), "--N", "96", "--Tb", "1.0", "--steps", "120"]) == 0
    out = capsys.readouterr().out
    assert "incomplete: the log stops at step 60 of the run's 120" in out
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
    assert "N=32, Tb=0.8 (run.yaml)" in out and "incomplete: the log stops at step 60 of the run's 64" in out
    # a run directory named by its key (as results/<study>/runs/ holds them), without run.yaml
    keyed = bare_log(tmp_path / "toy-qwen2" / "arith" / "N32_lr1e-4_tis_Tb0.8_Tl1_s1" / "train.jsonl", 64, val_every=8)
    assert main(["analyze", str(keyed)]) == 0
    out = capsys.readouterr().out
    assert "N=32, Tb=0.8 (the run key of its directory)" in out and "(complete)" in out and "| 0.8 |" in out


def test_analyze_without_validation_points_is_not_stable(tmp_path: Path, capsys) -> None:
    log = bare_log(tmp_path / "noval.jsonl", 40, val_every=None)
    assert main(["analyze", str(log), "--N", "8", "--Tb", "1.0", "--steps", "40"]) == 0
    out = capsys.readouterr().out
    assert "no validation points: degradation cannot be judged" in out and "no onset" not in out


def test_val_every_names_the_validations_a_log_lost(tmp_path: Path, capsys) -> None:
    """--val-every tells analyze and parse which validations a run was to log, so a log that lost one is
    not called complete; without it (and no run.yaml) the same log is judged by its steps alone."""
    log = bare_log(tmp_path / "mine.jsonl", 40, val_every=10)
    lines = log.read_text().splitlines()
    rec20 = json.loads(lines[20])
    rec20["data"] = {k: v for k, v in rec20["data"].items() if not k.startswith("val-")}
    log.write_text("\n".join([ln for ln in lines if json.loads(ln)["step"] != 20] + [json.dumps(rec20)]) + "\n")
    missing = "1 validation point(s) missing (first: step 20)"
    assert main(["parse", str(log), "--steps", "40"]) == 0
    assert missing not in capsys.readouterr().out
    assert main(["parse", str(log), "--steps", "40", "--val-every", "10"]) == 0
    out = capsys.readouterr().out
    assert f"NOT complete: {missing}" in out
    assert main(["analyze", str(log), "--steps", "40", "--val-every", "10"]) == 0
    assert f"log: {missing}" in capsys.readouterr().out
    assert main(["analyze", str(log), "--steps", "40"]) == 0
    assert missing not in capsys.readouterr().out


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


def test_every_option_of_every_subcommand_has_help() -> None:
    from coolsampler.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    bare = [
        f"{name} {a.option_strings or a.dest}"
        for name, p in sub.choices.items()
        for a in p._actions
        if not isinstance(a, argparse._HelpAction) and not a.help
    ]
    assert not bare, bare
    assert len(sub.choices) == len(SUBCOMMANDS)


def test_the_top_level_help_lists_each_subcommand_once(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for entry in SUBCOMMANDS:
        assert len(re.findall(rf"^ {{4}}{re.escape(entry.name)}(\s|$)", out, flags=re.M)) == 1, entry.name
    assert "{" not in out  # no brace list of the choices beside the list


def test_only_the_command_that_runs_is_imported(monkeypatch, capsys) -> None:
    """A subcommand module that cannot be imported breaks that command alone: --help, --version and the
    other commands still work (each module is imported when its command runs)."""
    import importlib

    real = importlib.import_module

    def broken(name: str, *args, **kwargs):
        if name == "coolsampler.cli.figures":
            raise ModuleNotFoundError("No module named 'snakemake'", name="snakemake")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(importlib, "import_module", broken)
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and "coolsampler " in capsys.readouterr().out
    assert main(["runs"]) == 0 and "toy-qwen2/arith/" in capsys.readouterr().out
    with pytest.raises(ModuleNotFoundError):
        main(["figures", "results/smoke"])


def test_a_study_is_found_by_name_or_its_path_from_any_directory(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["runs", "--study", "paper"]) == 0
    by_name = capsys.readouterr().out
    assert main(["runs", "--study", "config/paper.yaml"]) == 0
    assert capsys.readouterr().out == by_name and len(by_name.splitlines()) > 50
    with pytest.raises(SystemExit) as e:
        main(["runs", "--study", "papr"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "no such file: papr" in err and "shipped studies: " in err and "paper" in err


@pytest.mark.parametrize("command", ["plan", "memory"])
def test_an_overlay_is_found_by_name_and_a_wrong_one_lists_the_overlays(
    command: str, tmp_path: Path, monkeypatch, capsys
) -> None:
    """`--overlay one-gpu` names the shipped config/hardware/one-gpu.yaml from any directory, as its path
    does; a name that is no overlay is refused in one line naming the shipped overlays, not the studies."""
    from coolsampler.spec.shipped import shipped_overlays, shipped_studies

    monkeypatch.chdir(tmp_path)
    extra = ["--run", "qwen2.5-math-1.5b/gsm8k/N192_lr2e-6_tis_Tb0.8_Tl1_s1"] if command == "plan" else []
    outs = []
    for overlay in ("one-gpu", "config/hardware/one-gpu.yaml"):
        assert main([command, "--study", "paper", "--overlay", overlay, *extra]) == 0
        outs.append(capsys.readouterr().out)
    assert outs[0] == outs[1] and "on 1 x 79.6 GiB GPUs" in outs[0]
    with pytest.raises(SystemExit) as e:
        main([command, "--study", "paper", "--overlay", "one-gp", *extra])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert e.value.code == 2 and "no such overlay: one-gp" in err, err
    overlays = shipped_overlays()
    assert {"one-gpu", "80gb"} <= set(overlays) and all(name in err for name in overlays), err
    assert not any(f" {name}," in err or err.endswith(f" {name})") for name in shipped_studies()), err


def test_a_subcommand_is_one_registry_line(monkeypatch, capsys) -> None:
    """A module with register(sub) plus one SUBCOMMANDS line is a command: listed with the line's help,
    parsed with the options register adds, run by the func it sets."""
    import types

    import coolsampler.cli as cli

    def register(sub) -> None:
        p = sub.add_parser("example")
        p.add_argument("--n", type=int, help="how many")
        p.set_defaults(func=lambda args: print(f"ran {args.n}") or 0)

    mod = types.ModuleType("coolsampler.cli.example_cmd")
    mod.register = register
    monkeypatch.setitem(sys.modules, "coolsampler.cli.example_cmd", mod)
    line = cli.Subcommand("example", "example_cmd", "prints ran N")
    monkeypatch.setattr(cli, "SUBCOMMANDS", (*cli.SUBCOMMANDS, line))
    assert main(["example", "--n", "3"]) == 0 and capsys.readouterr().out == "ran 3\n"
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "prints ran N" in capsys.readouterr().out


def test_every_study_option_defaults_by_the_one_rule() -> None:
    """A command about what the GPU machines run reads the paper's study; every other one reads the smoke
    study, as `snakemake` does with no --configfile; each help line says which."""
    from coolsampler.cli import GPU_COMMANDS, PAPER_STUDY, SMOKE_STUDY, build_parser, default_study

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    studies = {
        name: next(a for a in p._actions if a.dest == "study")
        for name, p in sub.choices.items()
        if any(a.dest == "study" for a in p._actions)
    }
    assert GPU_COMMANDS <= set(studies) and {"runs", "plan", "status", "fingerprint"} <= set(studies)
    for name, action in studies.items():
        if action.default is None:  # figures, claims: the study the runs' run.yaml names
            continue
        assert action.default == default_study(name) == (PAPER_STUDY if name in GPU_COMMANDS else SMOKE_STUDY)
        assert f"(default: {action.default})" in action.help, name
