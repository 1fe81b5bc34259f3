"""Extension points of a study: models by hub id + revision or path, tasks as data with a named
reward, extra verl overrides, trackers, and the rules that prefetch models and hub tasks.

The fixture ``tests/fixtures/extend/study.yaml`` adds a second toy model (the smoke model by its local
path) and a second toy task (parquet + ``sums_reward.py:score``) by configuration alone.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import yaml

from coolsampler.spec.settings import MODELS, derived_gpus_per_run, derived_tensor_parallel
from coolsampler.spec.study import KEY_WILDCARD_RE, StudyError, load_study, parse_key, study_from_dict
from coolsampler.train.data import DataError, prepare_hub_split
from coolsampler.train.overrides import (
    RunPaths,
    check_extra_overrides,
    key_held_overrides,
    overrides_for,
    verl_overrides,
)
from coolsampler.train.paths import Layout, run_paths
from coolsampler.train.prefetch import prefetch_model
from coolsampler.worker.rewards import compute_score
from tests.dry_run import results_config, temp_results

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "extend"
STUDY = FIXTURE / "study.yaml"
RAW = yaml.safe_load(STUDY.read_text())
REV = "0123456789abcdef0123456789abcdef01234567"


def as_dict(lines: list[str]) -> dict[str, str]:
    return dict(line.split("=", 1) for line in lines)


def gpu_study(**models: dict[str, Any]) -> dict[str, Any]:
    """A gpu study of one GSM8K run per model."""
    return {
        "name": "hubmodels",
        "profile": "gpu",
        "container": {"engine": "none"},
        "models": models,
        "runs": [
            {"model": list(models), "task": "gsm8k", "N": 4, "lr": 2.0e-6, "correction": "tis", "Tb": 1.0, "seed": 1}
        ],
    }


def gpu_overrides(study: dict[str, Any], model: str) -> dict[str, str]:
    s = study_from_dict(study)
    run = next(r for r in s.runs if r.model == model)
    return as_dict(verl_overrides(run, run_paths(Layout.from_config(study, s.results), run), platform="gpu"))


# ---- the fixture: a second toy model and task, by configuration alone ----------------------------


def test_fixture_defines_a_model_and_a_task_and_keys_its_runs() -> None:
    study = load_study(STUDY)
    assert set(study.models) - set(MODELS) == {"toy-local"}
    assert "sums" in study.tasks and study.tasks["sums"].reward.endswith("sums_reward.py:score")
    keys = list(study.by_key())
    assert all(re.fullmatch(KEY_WILDCARD_RE, k) for k in keys)
    # the two runs differ only in one extra override: two keys, two directories
    assert len(keys) == 2 and len({study.run_dir(r) for r in study.runs}) == 2
    assert {k.rsplit("_", 1)[0] for k in keys} == {"toy-local/sums/N2_lr1e-4_tis_Tb1_Tl1_s1"}
    # the study-wide override is in both, the run's own only in the second
    assert [r.verl_extra for r in study.runs] == [
        ("actor_rollout_ref.actor.grad_clip=0.5",),
        ("actor_rollout_ref.actor.clip_ratio=0.1", "actor_rollout_ref.actor.grad_clip=0.5"),
    ]
    # a key with extra overrides comes back only through its study
    for k in keys:
        assert parse_key(k, study) == study.by_key()[k]
        with pytest.raises(ValueError, match="model: 'toy-local' is not valid; allowed: .*models: block"):
            parse_key(k)  # its model is the study's
    with pytest.raises(ValueError, match="known only to the study"):
        parse_key("toy-qwen2/arith/N2_lr1e-4_tis_Tb1_Tl1_s1_x3e259678")
    # without extras, a key of the study's own model and task parses with the study
    assert parse_key("toy-local/sums/N4_lr1e-4_tis_Tb1_Tl1_s1", study).task_info.reward.endswith(":score")
    assert study.runs[1].settings()["verl_overrides"] == list(study.runs[1].verl_extra)


def test_fixture_overrides_name_its_model_reward_tracker_and_extras() -> None:
    study = load_study(STUDY)
    key = study.runs[1].key
    lines = overrides_for(key, STUDY)
    o = as_dict(lines)
    assert o["actor_rollout_ref.model.path"] == str((REPO / "results/models/toy-qwen2").resolve())
    assert o["data.train_files"] == str((FIXTURE / "sums/train.parquet").resolve())
    assert o["data.val_files"] == str((FIXTURE / "sums/test.parquet").resolve())
    # the task's own reward reaches verl through its custom_reward_function
    assert o["reward.custom_reward_function.path"] == str((FIXTURE / "sums_reward.py").resolve())
    assert o["reward.custom_reward_function.name"] == "score"
    # trackers: console and file always, TensorBoard into the run directory
    assert o["trainer.logger"] == "[console,file,tensorboard]"
    tb = o["+ray_kwargs.ray_init.runtime_env.env_vars.TENSORBOARD_DIR"]
    assert tb == "'" + str((REPO / "results/extend/runs" / key / "tensorboard").resolve()) + "'"
    # the task's lengths and steps, the extras last and each once
    assert (o["data.max_prompt_length"], o["data.max_response_length"]) == ("16", "8")
    assert (o["trainer.total_training_steps"], o["trainer.test_freq"]) == ("4", "2")
    assert lines[-2:] == ["actor_rollout_ref.actor.clip_ratio=0.1", "actor_rollout_ref.actor.grad_clip=0.5"]
    assert len({line.split("=", 1)[0].lstrip("+") for line in lines}) == len(lines)


def test_the_fixture_reward_scores_through_compute_score_when_named() -> None:
    reward = f"{FIXTURE / 'sums_reward.py'}:score"
    assert compute_score("sums", "12+30=42", "42", reward=reward) == 1.0
    assert compute_score("sums", "12+30=32", "42", reward=reward) == 0.5
    assert compute_score("sums", "12+30=7", "42", reward=reward) == 0.0
    with pytest.raises(NotImplementedError, match="no reward for data_source='sums'"):
        compute_score("sums", "42", "42")
    # a source it knows keeps its own route
    assert compute_score("arith", "42", "42", reward=reward) == 1.0


def test_snakemake_dry_runs_the_fixture_study(tmp_path: Path) -> None:
    R = temp_results(tmp_path, "results/extend")
    res = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", f"--configfile={STUDY}", "--quiet", "rules", *results_config(R)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert res.returncode == 0, res.stderr
    keys = list(load_study(STUDY).by_key())
    targets = [f"{R}/runs/{k}/metrics.parquet" for k in keys]
    res = subprocess.run(
        [sys.executable, "-m", "snakemake", "-n", f"--configfile={STUDY}", *targets, *results_config(R)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert all(f"results/extend/runs/{k}/train.jsonl" in out for k in keys)
    # the local model made by the toy rule is an input of both runs; the fixture's parquet too
    assert re.search(r"train\s+2\b", out) and "results/models/toy-qwen2/model.safetensors" in out
    assert "tests/fixtures/extend/sums/train.parquet" in out


# ---- models: by hub id and revision, parallelism from size ---------------------------------------


def test_the_size_rule_gives_the_papers_settings_and_scales() -> None:
    # the paper's two models: TP 1 and 2, four GPUs (Section 2), now derived from their size
    assert [(MODELS[m].tensor_parallel, MODELS[m].gpus_per_run) for m in ("qwen2.5-math-1.5b", "qwen2.5-math-7b")] == [
        (1, 4),
        (2, 4),
    ]
    assert (derived_tensor_parallel(0.49), derived_gpus_per_run(0.49)) == (1, 4)
    assert derived_tensor_parallel(14.8) == 4 and derived_gpus_per_run(14.8, 4) == 8


def test_a_hub_model_by_id_gets_derived_or_stated_parallelism_and_loads_offline() -> None:
    study = gpu_study(
        **{
            "qwen2.5-0.5b": {"hf_id": "Qwen/Qwen2.5-0.5B", "revision": REV, "params_b": 0.49},
            "qwen2.5-14b": {"hf_id": "Qwen/Qwen2.5-14B", "revision": REV, "params_b": 14.8},
            "qwen2.5-3b": {
                "hf_id": "Qwen/Qwen2.5-3B",
                "revision": REV,
                "params_b": 3.1,
                "tensor_parallel": 1,
                "gpus_per_run": 2,
            },
        }
    )
    small, big, stated = (gpu_overrides(study, m) for m in ("qwen2.5-0.5b", "qwen2.5-14b", "qwen2.5-3b"))
    tp, gpus = "actor_rollout_ref.rollout.tensor_model_parallel_size", "trainer.n_gpus_per_node"
    assert (small[tp], small[gpus]) == ("1", "4")
    assert (big[tp], big[gpus]) == ("4", "8")
    assert (stated[tp], stated[gpus]) == ("1", "2")
    # prefetched at its revision into the models dir, loaded from there with the hub off
    want = (REPO / "results/models/hub/Qwen/Qwen2.5-0.5B" / REV).resolve()
    assert small["actor_rollout_ref.model.path"] == str(want)
    assert small["+ray_kwargs.ray_init.runtime_env.env_vars.HF_HUB_OFFLINE"] == "'1'"
    # a study may move the models dir (large weights on scratch)
    moved = gpu_overrides({**study, "models_dir": "/scratch/m"}, "qwen2.5-0.5b")
    assert moved["actor_rollout_ref.model.path"] == f"/scratch/m/hub/Qwen/Qwen2.5-0.5B/{REV}"


def test_a_pinned_builtin_model_keeps_its_overrides_but_its_path() -> None:
    pinned = gpu_study(**{"qwen2.5-math-7b": {"revision": REV}})
    plain = gpu_study(**{"qwen2.5-math-7b": {}})
    plain.pop("models")
    a, b = gpu_overrides(pinned, "qwen2.5-math-7b"), gpu_overrides(plain, "qwen2.5-math-7b")
    assert b["actor_rollout_ref.model.path"] == "Qwen/Qwen2.5-Math-7B"  # unpinned: fetched by the job, as before
    assert a["actor_rollout_ref.model.path"].endswith(f"results/models/hub/Qwen/Qwen2.5-Math-7B/{REV}")
    differ = {k for k in a.keys() | b.keys() if a.get(k) != b.get(k)}
    assert differ == {
        "actor_rollout_ref.model.path",
        "+ray_kwargs.ray_init.runtime_env.env_vars.HF_HUB_OFFLINE",
        "+ray_kwargs.ray_init.runtime_env.env_vars.TRANSFORMERS_OFFLINE",
    }


def test_prefetch_rule_downloads_each_pinned_model_once_for_the_train_jobs(tmp_path: Path) -> None:
    study = gpu_study(
        **{
            "qwen2.5-0.5b": {"hf_id": "Qwen/Qwen2.5-0.5B", "revision": REV, "params_b": 0.49},
            "qwen2.5-14b": {"hf_id": "Qwen/Qwen2.5-14B", "revision": REV, "params_b": 14.8},
        }
    )
    study["tasks"] = {
        "hubsums": {
            "hub": {"dataset": "someone/sums-verl", "revision": REV, "train": "train", "val": "test"},
            "reward": "verl",
            "max_prompt_length": 64,
            "max_response_length": 64,
            "steps": 10,
            "val_every": 5,
        }
    }
    study["runs"].append({**study["runs"][0], "model": "qwen2.5-0.5b", "task": "hubsums"})
    cfg = tmp_path / "hub.yaml"
    cfg.write_text(yaml.safe_dump(study, sort_keys=False))
    R = temp_results(tmp_path, "results/hubmodels")
    run = lambda *a: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "snakemake", "-n", f"--configfile={cfg}", *a, *results_config(R)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=180,
    )
    res = run("prefetch")
    assert res.returncode == 0, res.stderr
    fetched = re.findall(r"output: (results/models/hub/\S+/prefetch\.json)", res.stdout)
    assert sorted(fetched) == [f"results/models/hub/Qwen/Qwen2.5-{s}/{REV}/prefetch.json" for s in ("0.5B", "14B")]
    assert sorted(re.findall(r"output: (results/data/hubsums/\S+\.parquet)", res.stdout)) == [
        "results/data/hubsums/train.parquet",
        "results/data/hubsums/val.parquet",
    ]
    # a train job waits for its model's prefetch and holds the model's GPUs
    s = study_from_dict(study)
    big = next(r for r in s.runs if r.model == "qwen2.5-14b")
    res = run(f"{R}/runs/{big.key}/train.jsonl")
    assert res.returncode == 0, res.stderr
    assert f"results/models/hub/Qwen/Qwen2.5-14B/{REV}/prefetch.json" in res.stdout
    assert re.search(r"resources: .*\bgpu=8\b", res.stdout)


def test_prefetch_writes_a_manifest_and_refuses_a_snapshot_without_weights(tmp_path: Path) -> None:
    calls = []

    def fake(**kw: Any) -> str:
        calls.append(kw)
        d = Path(kw["local_dir"])
        (d / "config.json").write_text('{"model_type": "qwen2"}')
        (d / "model.safetensors").write_bytes(b"\0" * 16)
        (d / "tokenizer.json").write_text("{}")
        return str(d)

    dest = tmp_path / "m"
    manifest = prefetch_model("Qwen/Qwen2.5-0.5B", REV, dest, download=fake)
    assert calls[0]["repo_id"] == "Qwen/Qwen2.5-0.5B" and calls[0]["revision"] == REV
    assert "*.safetensors" in calls[0]["allow_patterns"] and "*.bin" not in calls[0]["allow_patterns"]
    assert json.loads((dest / "prefetch.json").read_text()) == manifest
    assert manifest["files"] == {"config.json": 23, "model.safetensors": 16, "tokenizer.json": 2}

    def no_weights(**kw: Any) -> str:
        (Path(kw["local_dir"]) / "config.json").write_text("{}")
        return kw["local_dir"]

    with pytest.raises(FileNotFoundError, match="no .safetensors"):
        prefetch_model("a/b", REV, tmp_path / "n", download=no_weights)
    assert not (tmp_path / "n" / "prefetch.json").exists()


def test_a_hub_task_is_prepared_as_verl_parquet_with_a_manifest(tmp_path: Path) -> None:
    rows = [
        {"prompt": [{"role": "user", "content": "1+1="}], "data_source": "sums", "reward_model": {"ground_truth": "2"}}
    ]
    seen = []

    def loader(dataset: str, config: str | None, split: str, cache: Path) -> list[dict[str, Any]]:
        seen.append((dataset, config, split))
        return rows

    hub = {"dataset": "someone/sums-verl", "revision": REV, "train": "train", "val": "test"}
    out = tmp_path / "hubsums" / "val.parquet"
    manifest = prepare_hub_split(hub, "val", out, tmp_path / "cache", loader)
    assert seen == [("someone/sums-verl", None, "test")]
    assert pq.read_table(out).to_pylist()[0]["data_source"] == "sums"
    assert manifest["count"] == 1 and manifest["source"]["revision"] == REV
    assert json.loads(out.with_suffix(".manifest.json").read_text()) == manifest
    with pytest.raises(DataError, match="no column reward_model"):
        prepare_hub_split(hub, "train", out, tmp_path / "cache", lambda *a: [{"prompt": "x", "data_source": "s"}])


# ---- extra verl overrides --------------------------------------------------------------------------

REFUSED = [
    ("actor_rollout_ref.actor.optim.lr=1e-5", "actor_rollout_ref.actor.optim.lr"),  # the key's lr
    ("+trainer.refresh_interval=8", "trainer.refresh_interval"),  # the key's N
    ("algorithm.rollout_correction={rollout_is:null}", "algorithm.rollout_correction"),  # a parent of the correction
    ("actor_rollout_ref.actor.policy_loss.loss_mode=vanilla", "policy_loss.loss_mode"),
    ("actor_rollout_ref.rollout.temperature=0.7", "rollout.temperature"),  # the key's Tb
    ("~data.seed", "data.seed"),
    ("trainer.logger=[console]", "trainer.logger"),  # the study's logger:
    ("data.train_files=/x.parquet", "data.train_files"),  # the task
    ("actor_rollout_ref.rollout.tensor_model_parallel_size=4", "tensor_model_parallel_size"),  # the model's
    ("trainer.default_local_dir=/tmp/x", "default_local_dir"),  # the run directory
]


@pytest.mark.parametrize(("extra", "field"), REFUSED, ids=[e for e, _ in REFUSED])
def test_an_extra_override_of_what_the_key_holds_is_refused(extra: str, field: str) -> None:
    raw = copy.deepcopy(RAW)
    raw["runs"][0]["verl_overrides"] = [extra]
    with pytest.raises(StudyError) as err:
        study_from_dict(raw, origin="s", check_overrides=check_extra_overrides)
    msg = str(err.value)
    assert msg.startswith("s: runs[0].verl_overrides: ") and field in msg and "\n" not in msg


@pytest.mark.parametrize(
    ("extras", "word"),
    [(["lr 1e-5"], "verl_overrides[0]"), (["a.b"], "not a Hydra override"), (["a.b=1", "+a.b=2"], "given twice")],
)
def test_malformed_extra_overrides_are_refused(extras: list[str], word: str) -> None:
    raw = copy.deepcopy(RAW)
    raw["runs"][0]["verl_overrides"] = extras
    with pytest.raises(StudyError, match=re.escape(word)):
        study_from_dict(raw, origin="s")


def test_the_held_keys_are_derived_from_the_builder() -> None:
    held = key_held_overrides()
    # every setting the key names, and nothing of the recipe or the platform
    assert {
        "actor_rollout_ref.actor.optim.lr",
        "trainer.refresh_interval",
        "data.seed",
        "trainer.total_training_steps",
        "trainer.test_freq",
        "actor_rollout_ref.rollout.seed",
        "trainer.learner_temperature",
    } <= held
    assert not held & {
        "actor_rollout_ref.rollout.gpu_memory_utilization",
        "actor_rollout_ref.actor.grad_clip",
        "data.train_batch_size",
        "actor_rollout_ref.actor.kl_loss_coef",
    }
    run = load_study(STUDY).runs[1]
    check_extra_overrides(run)  # the fixture's own pass


def test_an_extra_override_replaces_the_pipelines_value_in_place() -> None:
    raw = copy.deepcopy(RAW)
    raw["verl_overrides"] = ["actor_rollout_ref.rollout.gpu_memory_utilization=0.3", "~trainer.val_before_train"]
    run = study_from_dict(raw).runs[0]
    lines = verl_overrides(run, RunPaths("m", "t", "v", "/o"), platform="gpu")
    assert "actor_rollout_ref.rollout.gpu_memory_utilization=0.3" in lines
    assert not any(line.startswith("trainer.val_before_train") for line in lines)
    assert sum("gpu_memory_utilization" in line for line in lines) == 1


# ---- trackers, tasks and models that a study may not define ----------------------------------------


@pytest.mark.parametrize(
    ("edit", "word"),
    [
        (lambda r: r.update(logger=["neptune"]), "logger[0]"),
        (lambda r: r["tasks"]["sums"].update(reward="tests/fixtures/extend/nope.py:score"), "does not exist"),
        (lambda r: r["tasks"]["sums"].update(reward="tests/fixtures/extend/sums_reward.py:nope"), "no function nope"),
        (lambda r: r["tasks"]["sums"].update(reward="sums"), "tasks.sums.reward"),
        (
            lambda r: r["tasks"]["sums"].update(hub={"dataset": "a/b", "revision": "r", "train": "t", "val": "v"}),
            "one of them",
        ),
        (lambda r: r["tasks"]["sums"].pop("val"), "val: missing"),
        (lambda r: r["tasks"].update(gsm8k=r["tasks"]["sums"]), "a built-in task"),
        (lambda r: r["models"].update(big={"hf_id": "a/b", "revision": "r"}), "params_b: missing"),
        (lambda r: r["models"].update(huge={"hf_id": "a/b", "revision": "r", "params_b": 70}), "more than one node"),
        (lambda r: r["models"].update(tp3={"hf_id": "a/b", "params_b": 1, "tensor_parallel": 3}), "does not divide"),
        (lambda r: r["models"].update(loc={"path": "x", "params_b": 1, "revision": "r"}), "has no hub revision"),
        (lambda r: r["models"].update({"toy-qwen2": {"revision": "r"}}), "made by a rule here"),
        (lambda r: r["defaults"].update(model="toy-remote"), "defaults.model: 'toy-remote' is not valid"),
    ],
)
def test_bad_extension_points_are_one_line_errors(edit, word: str) -> None:
    raw = copy.deepcopy(RAW)
    edit(raw)
    with pytest.raises(StudyError) as err:
        study_from_dict(raw, origin="s")
    assert word in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_the_default_logger_is_console_and_file() -> None:
    raw = copy.deepcopy(RAW)
    raw.pop("logger")
    run = study_from_dict(raw).runs[0]
    o = as_dict(verl_overrides(run, RunPaths("m", "t", "v", "/o"), platform="cpu"))
    assert o["trainer.logger"] == "[console,file]"
    assert not any("TENSORBOARD_DIR" in k for k in o)
