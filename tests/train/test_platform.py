"""The one platform definition: the CPU platform is the GPU platform with a named set of substitutions;
every loss a run names is registered on every platform; every paper run checkpoints; a re-run draws
its own samples; `coolsampler overrides --env` prints the job's environment."""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import pytest

from coolsampler.cli import main as cli_main
from coolsampler.spec.settings import CHECKPOINT_EVERY_S, step_seconds
from coolsampler.spec.study import load_study
from coolsampler.train.container import ContainerSpec, training_prefix
from coolsampler.train.overrides import RunPaths, verl_overrides
from coolsampler.train.platform import (
    CPU_SUBSTITUTIONS,
    CPU_TWO_RANK,
    MICRO_BATCH_KEYS,
    PLATFORMS,
    get_platform,
)

REPO = Path(__file__).resolve().parents[2]
PAPER = load_study(REPO / "config/paper.yaml")
PATHS = RunPaths(model="m", train="t.parquet", val="v.parquet", out_dir="/runs/x")


def as_dict(overrides: list[str]) -> dict[str, str]:
    return dict(o.split("=", 1) for o in overrides)


@pytest.mark.parametrize("run", PAPER.runs, ids=lambda r: r.key)
def test_cpu_differs_from_gpu_only_by_the_named_substitutions(run):
    gpu = as_dict(verl_overrides(run, PATHS, platform="gpu"))
    cpu = as_dict(verl_overrides(run, PATHS, platform="cpu"))
    named = {k for group in CPU_SUBSTITUTIONS.values() for k in group} | set(MICRO_BATCH_KEYS)
    differ = {k for k in gpu.keys() | cpu.keys() if gpu.get(k) != cpu.get(k)}
    assert differ <= named, sorted(differ - named)
    assert set(CPU_SUBSTITUTIONS) == {"device", "precision", "engine", "process counts"}


def test_the_two_rank_shape_differs_from_cpu_only_by_its_named_entries_each_back_towards_gpu():
    """cpu-2rank = cpu with CPU_TWO_RANK's entries (and a per-rank micro batch): every one of them is
    the gpu platform's value or between cpu's and gpu's (2 ranks, 2 replicas, 2 workers, sleep on)."""
    run = next(r for r in PAPER.runs if r.model == "qwen2.5-math-1.5b")
    gpu = as_dict(verl_overrides(run, PATHS, platform="gpu"))
    cpu = as_dict(verl_overrides(run, PATHS, platform="cpu"))
    two = as_dict(verl_overrides(run, PATHS, platform="cpu-2rank"))
    named = {k for group in CPU_TWO_RANK.values() for k in group} | set(MICRO_BATCH_KEYS)
    differ = {k for k in cpu.keys() | two.keys() if cpu.get(k) != two.get(k)}
    assert differ == named
    assert two["trainer.n_gpus_per_node"] == "2" and two["actor_rollout_ref.rollout.tensor_model_parallel_size"] == "1"
    # the gpu platform keeps verl's default (free_cache_engine: true); cpu turns it off, the shape on again
    assert "actor_rollout_ref.rollout.free_cache_engine" not in gpu
    assert two["actor_rollout_ref.rollout.free_cache_engine"].lower() == "true"
    for k in ("actor_rollout_ref.rollout.agent.num_workers", "reward.num_workers"):
        assert 1 < int(two[k]) <= int(gpu.get(k, 8))  # verl's default 8 where the gpu platform keeps it
    prompts, samples = 4, 4
    assert get_platform("cpu-2rank").micro_batch(prompts, samples) * 2 == get_platform("cpu").micro_batch(
        prompts, samples
    )
    env = get_platform("cpu-2rank").env()
    assert env["VERL_USE_EXTERNAL_MODULES"].endswith(",coolsampler.worker.cpu_sleep")
    assert {k: v for k, v in env.items() if k != "VERL_USE_EXTERNAL_MODULES"} == {
        k: v for k, v in get_platform("cpu").env().items() if k != "VERL_USE_EXTERNAL_MODULES"
    }


def test_unknown_platform_is_refused():
    with pytest.raises(ValueError, match="platform 'tpu': allowed gpu, cpu, cpu-2rank"):
        get_platform("tpu")


@pytest.mark.parametrize("platform", list(PLATFORMS))
def test_every_loss_a_paper_run_names_is_registered_by_the_platform_env(platform, monkeypatch):
    """verl imports VERL_USE_EXTERNAL_MODULES in its driver and every worker; after importing exactly
    those modules, verl's own registry must resolve every loss mode a paper run's overrides name."""
    core_algos = pytest.importorskip("verl.trainer.ppo.core_algos")
    env = get_platform(platform).env()
    modes = {
        as_dict(verl_overrides(r, PATHS, platform=platform)).get(
            "actor_rollout_ref.actor.policy_loss.loss_mode", "vanilla"
        )
        for r in PAPER.runs
    }
    assert "mu_grpo" in modes
    for mod in env["VERL_USE_EXTERNAL_MODULES"].split(","):
        if platform == "gpu" or mod != "coolsampler.worker.cpu_platform":
            importlib.import_module(mod)
    for mode in modes:
        assert callable(core_algos.get_policy_loss_fn(mode)), mode


def test_container_prefix_forwards_the_platform_env():
    env = get_platform("gpu").env()
    prefix = training_prefix(
        ContainerSpec("docker", "coolsampler:paper"), "sha256:" + "0" * 64, workdir=REPO, extra_env=env
    )
    for name in env:
        i = prefix.index(name)
        assert prefix[i - 1] == "-e", name  # by name: docker copies the value run_verl sets


@pytest.mark.parametrize("run", PAPER.runs, ids=lambda r: r.key)
def test_every_paper_run_checkpoints_within_half_an_hour(run):
    o = as_dict(verl_overrides(run, PATHS, platform="gpu"))
    every = int(o["trainer.save_freq"])
    assert every > 0
    assert every * step_seconds(run.model, run.task) <= CHECKPOINT_EVERY_S
    assert o["trainer.max_actor_ckpt_to_keep"] == "1"
    assert o["trainer.resume_mode"] == "auto"


def test_rerun_replicate_differs_from_its_twin_in_the_sampling_seed():
    reruns = [r for r in PAPER.runs if r.replicate == "rerun"]
    assert reruns
    same = {"key": 0, "sampling_seed": 0, "replicate": 0}
    for rerun in reruns:
        twin = next(r for r in PAPER.runs if r.replicate is None and r.settings() | same == rerun.settings() | same)
        a = as_dict(verl_overrides(rerun, PATHS, platform="gpu"))
        b = as_dict(verl_overrides(twin, PATHS, platform="gpu"))
        differ = {k for k in a if a[k] != b.get(k)}
        assert differ == {"actor_rollout_ref.rollout.seed", "trainer.experiment_name"}, differ
        assert rerun.settings()["sampling_seed"] != twin.settings()["sampling_seed"]


def test_cli_env_prints_the_job_environment(capsys):
    key = next(r.key for r in PAPER.runs if r.correction == "mu_grpo")
    assert cli_main(["overrides", key, "--study", str(REPO / "config/paper.yaml"), "--platform", "gpu", "--env"]) == 0
    lines = capsys.readouterr().out.splitlines()
    env = dict(line.split("=", 1) for line in lines)
    assert "coolsampler.worker.losses" in env["VERL_USE_EXTERNAL_MODULES"].split(",")
    assert "VERL_PLATFORM" not in env  # the cpu platform's plugin only on cpu
    assert cli_main(["overrides", key, "--study", str(REPO / "config/paper.yaml"), "--platform", "cpu", "--env"]) == 0
    cpu = dict(line.split("=", 1) for line in capsys.readouterr().out.splitlines())
    assert cpu["VERL_PLATFORM"] == "cpu"
    assert cpu["VERL_USE_EXTERNAL_MODULES"].split(",")[1:] == env["VERL_USE_EXTERNAL_MODULES"].split(",")


def test_data_dir_reaches_the_training_inputs_and_the_cli(tmp_path, capsys):
    import yaml

    study = yaml.safe_load((REPO / "config/paper.yaml").read_text())
    study["data_dir"] = str(tmp_path / "elsewhere")
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(study))
    key = PAPER.runs[0].key
    assert cli_main(["overrides", key, "--study", str(tmp_path / "s.yaml"), "--platform", "gpu"]) == 0
    o = as_dict(capsys.readouterr().out.splitlines())
    assert o["data.train_files"] == str(tmp_path / "elsewhere/gsm8k/train.parquet")


def test_each_run_has_its_own_weight_push_socket(monkeypatch):
    """verl names the weight-push socket by the Ray job id, the same (01000000) in every fresh Ray
    cluster: two runs on one host would swap weights. On every platform both ends move it into a
    directory named by the attempt's token, which run_verl draws afresh for each attempt (the details:
    tests/worker/test_weight_socket.py)."""
    import shutil

    from coolsampler.worker.env import RUN_TOKEN_ENV
    from coolsampler.worker.weight_socket import run_socket, socket_dir

    for platform in PLATFORMS:
        assert "coolsampler.worker.weight_socket" in get_platform(platform).env()["VERL_USE_EXTERNAL_MODULES"]
    verl = "ipc:///tmp/rl-colocate-zmq-01000000-replica-0-rank-0.sock"
    monkeypatch.delenv(RUN_TOKEN_ENV, raising=False)
    assert run_socket(verl) == verl
    tokens = [f"test{os.getpid()}a", f"test{os.getpid()}b"]
    try:
        handles = []
        for token in tokens:
            monkeypatch.setenv(RUN_TOKEN_ENV, token)
            handles.append(run_socket(verl))
            assert handles[-1] == f"ipc://{socket_dir(token)}/01000000-replica-0-rank-0.sock"
            assert run_socket(handles[-1]) == handles[-1]  # applied once, whichever end asks first
        assert handles[0] != handles[1]
    finally:
        for token in tokens:
            shutil.rmtree(socket_dir(token), ignore_errors=True)


def test_a_lower_time_limit_keeps_the_watchdog_below_it():
    """A cluster whose GPU partition allows 12 h: the job asks for 720 min and the watchdog stops the run
    an hour before SLURM would, as at the default 16 h (15 h); on CPU (no margin) it follows the limit."""
    gpu = get_platform("gpu")
    assert (gpu.runtime_min, gpu.timeout_min) == (960, 900)
    assert gpu.with_runtime(None) is gpu and gpu.with_runtime(960) is gpu
    twelve = gpu.with_runtime(720)
    assert (twelve.runtime_min, twelve.timeout_min) == (720, 660)
    assert gpu.with_runtime(90).timeout_min == 45  # never a watchdog of zero minutes
    assert get_platform("cpu").with_runtime(60).timeout_min == 60
    with pytest.raises(ValueError, match="minutes"):
        gpu.with_runtime(0)


def test_a_study_that_probes_a_mid_run_checkpoint_keeps_it():
    """Round 4 of the cliff study reads each run's step-32 checkpoint after the run (its drift probe): its
    recipe keeps two, so the step-64 save does not retire it; every other study keeps one."""
    from coolsampler.spec.study import load_study

    cliff = load_study(REPO / "config" / "cliff.yaml")
    o = as_dict(verl_overrides(cliff.runs[0], PATHS, platform="cpu", study_recipe=cliff.recipe))
    assert (o["trainer.save_freq"], o["trainer.max_actor_ckpt_to_keep"]) == ("32", "2")
    smoke = load_study(REPO / "config" / "config.yaml")
    smoke_o = as_dict(verl_overrides(smoke.runs[0], PATHS, platform="cpu", study_recipe=smoke.recipe))
    assert smoke_o["trainer.max_actor_ckpt_to_keep"] == "1"
