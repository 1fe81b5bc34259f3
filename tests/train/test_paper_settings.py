"""Section 2 of the paper, checked on what verl is actually told: ``coolsampler overrides KEY``.

Every paper run's overrides (config/paper.yaml, gpu profile) must carry the recipe of Section 2:
16 prompts x 8 samples; 512 prompt tokens and 512 (GSM8K) / 1024 (MATH) response tokens; the run's
learning rate (2e-6 unless stated); a low-variance KL penalty to the initial policy, coefficient
1e-3 (in the loss, not the reward); no entropy bonus; one PPO epoch on the full batch; token-level
truncated importance weights capped at 2 for TIS runs and none for "no IS"; the behaviour
log-probabilities of the tempered sampler (processed_logprobs); greedy validation every 10 (GSM8K)
/ 20 (MATH) steps on the whole validation split; 300 steps; learner at temperature 1 (or tied);
refresh interval N; four GPUs. Also the ``coolsampler`` CLI's parse and analyze subcommands.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from coolsampler.cli import main
from coolsampler.spec.metrics_schema import COLUMNS
from coolsampler.spec.study import Run, load_study
from coolsampler.testkit.synthetic import make_metrics
from coolsampler.train.overrides import overrides_for

ROOT = Path(__file__).resolve().parents[2]
PAPER = ROOT / "config" / "paper.yaml"
STUDY = load_study(PAPER)
KEYS = sorted(STUDY.by_key())


def as_dict(lines: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in lines:
        k, v = line.split("=", 1)
        assert k not in out, f"{k} given twice"
        out[k] = v
    return out


def num(v: str) -> float:
    return float(v)


@pytest.fixture(scope="module")
def overrides() -> dict[str, dict[str, str]]:
    return {k: as_dict(overrides_for(k, PAPER, "gpu")) for k in KEYS}


def test_every_paper_run_is_checked() -> None:
    assert len(KEYS) == 53


@pytest.mark.parametrize("key", KEYS)
def test_overrides_follow_section_2(key: str, overrides: dict[str, dict[str, str]]) -> None:
    run: Run = STUDY.by_key()[key]
    o = overrides[key]
    # batch: 16 prompts x 8 samples, one optimiser step on the full batch, one PPO epoch
    assert int(o["data.train_batch_size"]) == 16
    assert int(o["actor_rollout_ref.rollout.n"]) == 8
    assert int(o["actor_rollout_ref.actor.ppo_mini_batch_size"]) == 16
    assert int(o["actor_rollout_ref.actor.ppo_epochs"]) == 1
    # lengths
    assert int(o["data.max_prompt_length"]) == 512
    assert int(o["data.max_response_length"]) == {"gsm8k": 512, "math": 1024}[run.task]
    # optimiser and penalties
    assert math.isclose(num(o["actor_rollout_ref.actor.optim.lr"]), run.lr)
    assert o["actor_rollout_ref.actor.use_kl_loss"].lower() == "true"
    assert math.isclose(num(o["actor_rollout_ref.actor.kl_loss_coef"]), 1e-3)
    assert o["actor_rollout_ref.actor.kl_loss_type"] == "low_var_kl"
    assert o["algorithm.use_kl_in_reward"].lower() == "false"
    assert num(o["actor_rollout_ref.actor.entropy_coeff"]) == 0.0
    assert o["algorithm.adv_estimator"] == "grpo"
    # correction
    if run.correction == "tis":
        assert o["algorithm.rollout_correction.rollout_is"] == "token"
        assert num(o["algorithm.rollout_correction.rollout_is_threshold"]) == 2.0
    else:
        assert o["algorithm.rollout_correction.rollout_is"] == "null"
    # sampler: its temperature, and the probabilities of the tempered distribution it drew from
    assert math.isclose(num(o["actor_rollout_ref.rollout.temperature"]), run.Tb.initial)
    assert o["actor_rollout_ref.rollout.logprobs_mode"] == "processed_logprobs"
    # greedy validation every 10 (GSM8K) / 20 (MATH) steps, on the whole validation split
    assert o["actor_rollout_ref.rollout.val_kwargs.do_sample"].lower() == "false"
    assert num(o["actor_rollout_ref.rollout.val_kwargs.temperature"]) == 0
    assert int(o["trainer.test_freq"]) == {"gsm8k": 10, "math": 20}[run.task]
    assert int(o["data.val_max_samples"]) == -1
    assert int(o["trainer.total_training_steps"]) == run.steps
    assert run.steps == 300 or run.replicate == "cut"  # 300 updates; a cut run is logged as far as it got
    # the two knobs of the paper: learner temperature (1, or tied) and refresh interval N
    if run.Tl == "tied":
        assert o["trainer.learner_temperature"] == "null"
    else:
        assert num(o["trainer.learner_temperature"]) == 1.0
    assert int(o["trainer.refresh_interval"]) == run.N
    assert int(o["data.seed"]) == run.seed
    # four GPUs per run
    assert int(o["trainer.n_gpus_per_node"]) == 4
    assert int(o["trainer.nnodes"]) == 1


def test_lr_is_2e6_unless_the_run_states_another() -> None:
    stated = {k for k, r in STUDY.by_key().items() if not math.isclose(r.lr, 2e-6)}
    assert stated, "the paper states other learning rates (Fig 4, Fig 5b, Fig 7a)"
    assert all("_lr2e-6_" in k for k in set(KEYS) - stated)


def test_cli_overrides_prints_one_override_per_line(capsys: pytest.CaptureFixture[str]) -> None:
    key = "qwen2.5-math-1.5b/gsm8k/N192_lr2e-6_tis_Tb0.8_Tl1_s43"
    assert main(["overrides", key, "--study", str(PAPER)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == overrides_for(key, PAPER)
    o = as_dict(lines)
    assert o["data.train_files"].endswith("results/data/gsm8k/train.parquet")
    assert o["data.val_files"].endswith("results/data/gsm8k/test.parquet")
    # pinned in config/paper.yaml: the submitting host's prefetched copy, never the Hub from a compute node
    assert o["actor_rollout_ref.model.path"].endswith(
        "results/models/hub/Qwen/Qwen2.5-Math-1.5B/4a83ca6e4526a4f2da3aa259ec36c259f66b2ab2"
    )
    assert o["+ray_kwargs.ray_init.runtime_env.env_vars.HF_HUB_OFFLINE"] == "'1'"
    assert "results/runs/" + key in o["trainer.default_local_dir"]


def test_cli_overrides_rejects_a_key_not_in_the_study(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["overrides", "qwen2.5-math-1.5b/gsm8k/N193_lr2e-6_tis_Tb0.8_Tl1_s43", "--study", str(PAPER)]) == 2
    assert "not in study paper" in capsys.readouterr().err


def write_jsonl(path: Path, N: int = 96, steps: int = 120) -> None:
    """A verl-style JSONL log from a synthetic metrics table (one source name per column)."""
    df = make_metrics(N, steps=steps)
    names = {c: src[0].replace("*", "x") for c, (_t, _m, src) in COLUMNS.items() if c != "step" and src}
    with path.open("w") as f:
        for row in df.to_dict("records"):
            data = {names[c]: row[c] for c in names if c in row and row[c] == row[c]}
            data["training/global_step"] = int(row["step"])
            f.write(json.dumps({"step": int(row["step"]), "data": data}) + "\n")


def test_cli_parse_summarises_and_writes_parquet(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log, out = tmp_path / "train.jsonl", tmp_path / "metrics.parquet"
    write_jsonl(log)
    assert main(["parse", str(log), "--out", str(out), "--steps", "120"]) == 0
    text = capsys.readouterr().out
    assert "120 training steps" in text and out.exists()


def test_cli_analyze_prints_the_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "train.jsonl"
    write_jsonl(log)
    assert main(["analyze", str(log), "--N", "96"]) == 0
    assert "Summary" in capsys.readouterr().out


def test_the_process_group_waits_out_a_checkpoint_write_on_a_slow_filesystem():
    """A checkpoint's writes sit between barriers of the actor's process group (each rank: its FSDP shard
    and its share of the stale sampler, 14 bytes a parameter over the ranks). At 25 MB/s a 7B run's
    26.7 GB per rank take 18 minutes, past NCCL's default 10: the 7B runs get twice that, the 1.5B runs
    verl's own 600 s."""
    from coolsampler.spec.settings import CHECKPOINT_MIN_WRITE_BYTES_PER_S, MODELS, collective_timeout_s
    from coolsampler.spec.study import parse_key
    from coolsampler.train.overrides import RunPaths, verl_overrides

    seven = MODELS["qwen2.5-math-7b"]
    write_s = seven.params_b * 1e9 * 14 / seven.gpus_per_run / CHECKPOINT_MIN_WRITE_BYTES_PER_S
    assert write_s > 600 and collective_timeout_s(seven.params_b, seven.gpus_per_run) >= 2 * write_s
    for model, want in (("qwen2.5-math-1.5b", 600), ("qwen2.5-math-7b", 2160)):
        o = verl_overrides(parse_key(f"{model}/gsm8k/N192_lr2e-6_tis_Tb1_Tl1_s1"), RunPaths("m", "t", "v", "o"))
        assert f"actor_rollout_ref.nccl_timeout={want}" in o
