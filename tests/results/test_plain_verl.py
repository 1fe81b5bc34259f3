"""A log of unpatched verl 0.9.1 with its default loggers (``coolsampler.testkit.plain_verl``): ``analyze``
computes what its columns allow and names the rest with the verl setting that logs it, ``claims`` measures
the claims its columns allow, and both work from any directory."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from coolsampler.cli import main
from coolsampler.results.metrics import MetricsError, parse_jsonl
from coolsampler.spec.metrics_schema import COLUMNS, PROVIDED_BY, REQUIRED, absent_columns
from coolsampler.testkit.plain_verl import STEP_KEYS, VAL_KEYS, write_log

WORKFLOW = Path(__file__).resolve().parents[2] / "workflow"
KEY = "qwen2.5-math-1.5b/gsm8k/N96_lr2e-6_tis_Tb1_Tl1_s1"


def test_every_column_names_what_logs_it() -> None:
    assert set(PROVIDED_BY) == set(COLUMNS)


def test_the_fixture_keys_are_the_installed_verls() -> None:
    """Every key of the fixture is in verl's source, whole or as the f-string prefix verl composes it from."""
    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("verl is not installed (bash workflow/tools/setup_env.sh)")
    root = Path(next(iter(spec.submodule_search_locations)))
    source = "\n".join(p.read_text(errors="replace") for p in root.rglob("*.py"))
    composed = {"actor/": '"actor/"', "perf/mfu/": '"perf/mfu/actor"'}
    for key in (*STEP_KEYS, *VAL_KEYS):
        if f'"{key}"' in source:
            continue
        head, _, tail = key.rpartition("/")
        if head.startswith("val-"):  # f"{metric_sec}/{data_source}/{var_name}/{metric_name}"
            assert '"val-core"' in source and '"val-aux"' in source and '"mean' in source, key
            continue
        prefix = composed.get(head + "/", f'f"{head}/{{')
        assert prefix in source and re.search(rf'"{re.escape(tail)}"', source), f"{key}: not in {root}"


def test_the_pipelines_parse_still_requires_its_metrics(tmp_path: Path) -> None:
    log = write_log(tmp_path / "train.jsonl")
    with pytest.raises(MetricsError, match=r"'kl'.*rollout_correction\.rollout_is=token"):
        parse_jsonl(log)
    df, _ = parse_jsonl(log, required=("step",))
    assert {"kl", "kl_to_init", "staleness", "temperature"} <= set(absent_columns(df))
    assert not {"val_acc", "entropy", "reward", "grad_norm", "probs_diff_mean"} & set(absent_columns(df))
    assert set(REQUIRED) - {"step"} - set(absent_columns(df)) == {"entropy", "reward", "grad_norm"}


def test_analyze_a_plain_verl_log_computes_what_it_can_and_names_the_rest(tmp_path: Path, capsys) -> None:
    log = write_log(tmp_path / "mine" / "train.jsonl", steps=60, collapse_at=40)
    assert main(["analyze", str(log), "--steps", "60"]) == 0
    out = capsys.readouterr().out
    assert "onset 40" in out and "Summary (Table 1 style" in out
    assert "not computed: KL crossings" in out and "(needs kl)" in out
    # what is missing in one line, and each verl setting that would log it once, in one more
    (settings,) = [ln for ln in out.splitlines() if ln.startswith("   to log them, train with: ")]
    assert settings.count("actor_rollout_ref.actor.use_kl_loss=True") == 1
    assert settings.count("algorithm.rollout_correction.rollout_is=token") == 1
    assert "needs val_acc" not in out  # the accuracy is there: the events are computed
    assert "KL > 1 at" not in out  # no KL logged: no line of dashes for it
    # the lead table: the diagnostics no run logged are one line, not a row of "not logged" each
    assert "Not logged in any of these runs, so left out below: forward KL k1 (the paper's)" in out
    assert "| forward KL k1 (the paper's) |" not in out and "not logged |" not in out


def test_claims_on_a_plain_verl_log_from_another_directory(tmp_path: Path) -> None:
    """Run as a user would, outside the checkout: the default claims file is the checkout's."""
    log = write_log(tmp_path / "train.jsonl", steps=300, test_freq=10, collapse_at=200)
    env = {**os.environ, "PYTHONPATH": str(WORKFLOW)}
    run = [sys.executable, "-m", "coolsampler.cli", "claims", str(log)]
    r = subprocess.run([*run, "--key", KEY], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert re.search(r"(reproduced|differs) +s31-n96-tb1-final", r.stdout)
    assert re.search(
        r"not judged, columns not in these logs \(s32-klinit-15b-uncooled\); to log them: .*use_kl_loss", r.stdout
    )
    assert r.stdout.index("s31-n96-tb1-final") < r.stdout.index("not judged")  # what was judged first
    # no run key anywhere: one line saying how to name it
    r = subprocess.run(run, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 1 and "--key" in r.stderr and "Traceback" not in r.stderr
    assert r.stderr.count("\n") == 1 and r.stdout == ""  # said once, and no verdicts of nothing


def test_figures_from_run_directories_of_plain_verl_logs(tmp_path: Path) -> None:
    """Plain verl logs placed as a study's runs (run.yaml naming the study): every figure and table the
    columns allow is drawn, and the command first says what each lacks and which verl setting logs it."""
    import yaml

    from coolsampler.spec.study import load_study

    repo = WORKFLOW.parent
    smoke = load_study(repo / "config" / "config.yaml")
    results = tmp_path / "results"
    for run in smoke.runs[:3]:
        d = results / "runs" / run.key
        write_log(d / "train.jsonl", steps=run.steps, test_freq=run.val_every)
        (d / "run.yaml").write_text(yaml.safe_dump({"study": smoke.name, "settings": run.settings()}))
    env = {**os.environ, "PYTHONPATH": str(WORKFLOW)}
    argv = [sys.executable, "-m", "coolsampler.cli", "figures", str(results), "--cores", "2", "--no-report"]
    r = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert re.search(r"coolsampler figures: fig1: drawn without kl .*rollout_is=token", r.stdout)
    assert re.search(r"coolsampler figures: table2: drawn without kl, kl_to_init .*use_kl_loss=True", r.stdout)
    assert "table1:" not in r.stdout  # its accuracy is in the logs
    for out in ("fig1.png", "table1.md", "table2.md", "claims.md"):
        assert (results / out).is_file(), out
