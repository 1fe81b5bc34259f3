"""verl's own config checks on every run we would launch (coolsampler.train.verl_config).

Every paper run's overrides (config/paper.yaml, gpu platform, exactly what ``coolsampler overrides``
prints) are composed into verl's real ``ppo_trainer`` Hydra config and put through what
``main_ppo``, the v1 trainer and ``engine_workers`` check before training: a run verl would reject
fails here, in CI, instead of after hours in a GPU queue. The smoke study's first run is checked on
the cpu platform. Negative cases show each kind of check bites: verl's ``validate_config``, its
dataclass conversions, Hydra's schema, the worker's world-size assertion, the policy-loss registry
and the micro-batch divisibility verl asserts at the first update.

Slow: no process is started, but the file costs ~70 s of CPU (one Hydra compose, ~0.45 s, and
verl's checks, ~0.2 s, per run, 67 tests, plus importing torch and verl), over the fast suite's
budget; it runs with the full suite (``pytest``), as CI does.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from hydra.core.global_hydra import GlobalHydra

from coolsampler.cli import main as cli_main
from coolsampler.spec.study import load_study
from coolsampler.train.overrides import overrides_for
from coolsampler.train.verl_config import VerlConfigError, check_run_config, compose_config

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
PAPER = ROOT / "config" / "paper.yaml"
SMOKE = ROOT / "config" / "config.yaml"
PAPER_KEYS = list(load_study(PAPER).by_key())
SMOKE_KEY = next(iter(load_study(SMOKE).by_key()))
# Paper, Section 2: "four GPUs per run" (checked against trainer.n_gpus_per_node * nnodes)
PAPER_GPUS = 4


def test_paper_has_53_runs():
    assert len(PAPER_KEYS) == 53


@pytest.mark.parametrize("key", PAPER_KEYS)
def test_paper_run_passes_verl_checks(key: str):
    check_run_config(overrides_for(key, PAPER, "gpu"), n_gpus=PAPER_GPUS, name=key)


def test_smoke_run_passes_verl_checks_on_cpu():
    check_run_config(overrides_for(SMOKE_KEY, SMOKE, "cpu"), n_gpus=1, name=SMOKE_KEY)


def test_compose_applies_the_overrides_and_clears_hydra():
    """The config checked is the one the run gets (not verl's defaults), Hydra state left clean."""
    key = next(k for k in PAPER_KEYS if "_mu_grpo_" in k)
    cfg = compose_config(overrides_for(key, PAPER, "gpu"))
    assert cfg.actor_rollout_ref.actor.policy_loss.loss_mode == "mu_grpo"
    assert cfg.algorithm.rollout_correction.bypass_mode is True
    assert cfg.trainer.refresh_interval == 192  # a "+" key of the patches
    assert not GlobalHydra.instance().is_initialized()


def _replace(overrides: list[str], key: str, value: str) -> list[str]:
    """``overrides`` with ``key``'s value changed (appended if absent)."""
    out = [o for o in overrides if o.split("=", 1)[0].lstrip("+") != key]
    assert len(out) >= len(overrides) - 1
    return [*out, f"{key}={value}"]


# (override, value, n_gpus, what verl says): one per kind of check
BROKEN = [
    # verl/utils/config.py validate_config: the step batch (16 prompts x 8) over 3 GPUs
    ("trainer.n_gpus_per_node", "3", 3, r"real_train_batch_size \(128\) must be divisible by minimal possible batch"),
    # ActorConfig.__post_init__ (omega_conf_to_dataclass of the actor)
    ("actor_rollout_ref.actor.loss_agg_mode", "mean", 4, r"Invalid loss_agg_mode: mean"),
    # ActorConfig.validate: mini-batch larger than the step batch
    ("actor_rollout_ref.actor.ppo_mini_batch_size", "32", 4, r"must be >= actor.ppo_mini_batch_size \(32\)"),
    # engine_workers.init_model: rollout tensor parallelism must divide the world size
    ("actor_rollout_ref.rollout.tensor_model_parallel_size", "3", 4, r"not divisible by infer_world_size: 3"),
    # ppo_loss -> get_policy_loss_fn: a loss nobody registered
    ("actor_rollout_ref.actor.policy_loss.loss_mode", "no_such_loss", 4, r"Unsupported loss mode: no_such_loss"),
    # engine/utils.py prepare_micro_batches: 16*8/4 = 32 samples per rank, micro batch 5
    ("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", "5", 4, r"actor update: .* not divisible by its micro"),
    # the same for the old-policy log-prob pass over the whole step batch (16 prompts x 8 / 4 ranks)
    ("actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu", "6", 4, r"old log-prob pass: .* = 16\*8/4"),
    # Hydra: a key verl's schema does not have (without "+")
    ("trainer.no_such_key", "1", 4, r"no_such_key"),
    # "+" adds a key Hydra's schema lacks; verl's dataclass (RolloutConfig) still rejects it
    ("+actor_rollout_ref.rollout.sleep_level", "1", 4, r"unexpected keyword argument 'sleep_level'"),
    # the job's GPUs disagree with what verl is told
    ("trainer.n_gpus_per_node", "8", 4, r"= 8, but the job gets 4 GPUs"),
]


@pytest.mark.parametrize(("override", "value", "n_gpus", "message"), BROKEN, ids=[b[0] + "=" + b[1] for b in BROKEN])
def test_broken_config_is_rejected(override: str, value: str, n_gpus: int, message: str):
    key = PAPER_KEYS[0]
    broken = _replace(overrides_for(key, PAPER, "gpu"), override, value)
    with pytest.raises(VerlConfigError, match=re.escape(key) + ".*" + message):
        check_run_config(broken, n_gpus=n_gpus, name=key)
    assert not GlobalHydra.instance().is_initialized()


@pytest.fixture
def two_run_study(tmp_path: Path) -> Path:
    """The smoke study cut to two runs (one setting, two seeds): the CLI's behaviour at CPU cost."""
    study = yaml.safe_load(SMOKE.read_text())
    study["runs"] = [{"source": "test", "N": 32, "correction": "tis", "Tb": 1.0, "seed": [1, 2]}]
    study.pop("figures", None)
    path = tmp_path / "two.yaml"
    path.write_text(yaml.safe_dump(study))
    assert len(load_study(path).runs) == 2
    return path


def test_cli_one_line_per_run(two_run_study: Path, capsys):
    assert cli_main(["verl-check", "--study", str(two_run_study)]) == 0
    lines = capsys.readouterr().out.splitlines()
    runs = list(load_study(two_run_study).by_key())
    assert lines == [f"ok    {k}" for k in runs] + [f"2/2 runs of {two_run_study} pass verl's config checks"]


def test_cli_fails_on_a_rejected_run(two_run_study: Path, capsys, monkeypatch):
    """A run verl rejects: its line says FAIL with verl's message, the others ok, exit status 1."""
    import coolsampler.train.overrides

    real = coolsampler.train.overrides.overrides_for
    good, bad = load_study(two_run_study).by_key()

    def overrides(key, study, platform=None):
        ov = real(key, study, platform)
        return _replace(ov, "actor_rollout_ref.actor.loss_agg_mode", "mean") if key == bad else ov

    monkeypatch.setattr(coolsampler.train.overrides, "overrides_for", overrides)
    assert cli_main(["verl-check", "--study", str(two_run_study)]) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"ok    {good}",
        f"FAIL  {bad}: verl rejects its config: ValueError: Invalid loss_agg_mode: mean (in actor_rollout_ref.actor)",
        f"1/2 runs of {two_run_study} pass verl's config checks",
    ]


# ---- a study's own model, task, tracker and extra overrides --------------------------------

EXTEND = ROOT / "tests" / "fixtures" / "extend" / "study.yaml"


@pytest.mark.parametrize("key", list(load_study(EXTEND).by_key()))
def test_study_defined_model_task_tracker_and_extras_pass_verl_checks(key: str):
    """The fixture's runs (a local model, a task whose reward is a function by path, TensorBoard, extra
    overrides) compose into verl's config and pass its checks, the reward function found by name."""
    overrides = overrides_for(key, EXTEND, "cpu")
    cfg = compose_config(overrides)
    assert cfg.reward.custom_reward_function.name == "score"
    assert list(cfg.trainer.logger) == ["console", "file", "tensorboard"]
    assert cfg.ray_kwargs.ray_init.runtime_env.env_vars.TENSORBOARD_DIR.endswith(f"{key}/tensorboard")
    assert cfg.actor_rollout_ref.actor.grad_clip == 0.5
    check_run_config(overrides, n_gpus=1, name=key)


def test_an_extra_override_verl_does_not_know_is_rejected_by_its_composition(tmp_path: Path):
    raw = yaml.safe_load(EXTEND.read_text())
    raw["verl_overrides"] = ["actor_rollout_ref.actor.no_such_knob=1"]
    study = tmp_path / "extend.yaml"
    study.write_text(yaml.safe_dump(raw))
    key = next(iter(load_study(study).by_key()))
    with pytest.raises(VerlConfigError, match="no_such_knob"):
        check_run_config(overrides_for(key, study, "cpu"), n_gpus=1, name=key)


def test_a_hub_model_by_size_passes_verl_checks_on_its_gpus(tmp_path: Path):
    """A 14B model the study adds by id: TP 4 and 8 GPUs by the size rule, which verl accepts."""
    rev = "0" * 40
    study = tmp_path / "hub.yaml"
    study.write_text(
        yaml.safe_dump(
            {
                "name": "hub",
                "profile": "gpu",
                "models": {"qwen2.5-14b": {"hf_id": "Qwen/Qwen2.5-14B", "revision": rev, "params_b": 14.8}},
                "runs": [
                    {
                        "model": "qwen2.5-14b",
                        "task": "gsm8k",
                        "N": 4,
                        "lr": 2.0e-6,
                        "correction": "tis",
                        "Tb": 1.0,
                        "seed": 1,
                    }
                ],
            }
        )
    )
    key = next(iter(load_study(study).by_key()))
    check_run_config(overrides_for(key, study, "gpu"), n_gpus=8, name=key)
