"""Every process a verl run starts: counted from the run's overrides with verl's defaults (pinned to the
installed verl's yaml), sorted into kinds by command line, and each kind's PSS measured on the CPU stack."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest
import yaml

from coolsampler.spec.study import load_study
from coolsampler.train import processes as P
from coolsampler.train.overrides import RunPaths, verl_overrides

REPO = Path(__file__).resolve().parents[2]
PAPER = load_study(REPO / "config/paper.yaml")
PATHS = RunPaths(model="m", train="t.parquet", val="v.parquet", out_dir="/runs/x")


def _run(model: str):
    return next(r for r in PAPER.runs if r.model == model)


def _get(cfg: dict, dotted: str):
    for part in dotted.split("."):
        cfg = cfg[part]
    return cfg


def test_verl_defaults_are_the_installed_verls():
    """The counts verl uses when the overrides say nothing are verl's own generated config's."""
    spec = importlib.util.find_spec("verl")  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("verl is not installed")
    path = Path(spec.submodule_search_locations[0]) / "trainer" / "config" / "_generated_ppo_trainer.yaml"
    cfg = yaml.safe_load(path.read_text())
    for key, value in P.VERL_DEFAULTS.items():
        assert _get(cfg, key) == value, key


def test_a_7b_gpu_run_starts_verls_default_worker_pools():
    """4 GPUs, TP 2: 2 vLLM replicas (server, engine core, 2 TP workers each), 4 actor workers, and
    verl's 8 agent-loop, 8 reward, 8 storage workers and 8 DataLoader workers per loader."""
    counts = P.process_counts(verl_overrides(_run("qwen2.5-math-7b"), PATHS, platform="gpu"))
    assert counts[P.AGENT] == 8
    assert counts[P.REWARD] == 8
    assert counts[P.STORAGE] == 8 and counts[P.CONTROLLER] == 1
    assert counts[P.ACTOR] == 4
    assert counts[P.SERVER] == 2 and counts[P.ENGINE_CORE] == 2 and counts[P.TP_WORKER] == 4
    assert counts[P.DATALOADER] == 16
    assert counts[P.DRIVER] == counts[P.TASK_RUNNER] == counts[P.BALANCER] == 1
    assert P.cuda_processes(counts) == 8


def test_the_cpu_platforms_counts_come_from_its_substitutions():
    """One of each pool, no DataLoader workers, and no TP workers (the "uni" executor runs the model
    in the engine core)."""
    counts = P.process_counts(verl_overrides(_run("qwen2.5-math-7b"), PATHS, platform="cpu"))
    assert counts[P.AGENT] == counts[P.REWARD] == counts[P.STORAGE] == 1
    assert counts[P.ACTOR] == counts[P.SERVER] == counts[P.ENGINE_CORE] == 1
    assert counts[P.TP_WORKER] == counts[P.DATALOADER] == 0


def test_an_override_that_says_nothing_gets_verls_default():
    counts = P.process_counts(["trainer.n_gpus_per_node=4", "+actor_rollout_ref.rollout.tensor_model_parallel_size=1"])
    assert counts[P.AGENT] == counts[P.REWARD] == counts[P.STORAGE] == 8
    assert counts[P.SERVER] == 4 and counts[P.TP_WORKER] == 4


def test_processes_are_sorted_into_kinds_by_command_line():
    procs = [
        P.Proc(10, 1, "python -m verl.trainer.main_ppo data.train_files=x"),
        P.Proc(11, 10, "/venv/lib/python3.11/site-packages/ray/core/src/ray/gcs/gcs_server --log_dir=/tmp"),
        P.Proc(12, 10, "/venv/lib/python3.11/site-packages/ray/core/src/ray/raylet/raylet --raylet_socket_name=x"),
        P.Proc(13, 12, "ray::TaskRunner.run"),
        P.Proc(14, 13, "ray::TaskRunner.run"),  # a DataLoader worker: forked, same title
        P.Proc(15, 12, "ray::AgentLoopWorker.generate_sequences"),
        P.Proc(16, 12, "ray::vLLMHttpServer"),
        P.Proc(17, 16, "VLLM::EngineCore"),
        P.Proc(18, 17, "VLLM::Worker_TP0"),
        P.Proc(19, 12, "ray::WorkerDict.actor_rollout_update_actor"),
        P.Proc(20, 12, "ray::SomethingNew.method"),
        P.Proc(21, 10, "/usr/bin/some-helper --flag"),
    ]
    by_pid = {p.pid: p for p in procs}
    kinds = [P.classify(p, by_pid) for p in procs]
    assert kinds == [
        P.DRIVER,
        P.RAY_PREFIX + "gcs_server",
        P.RAY_PREFIX + "raylet",
        P.TASK_RUNNER,
        P.DATALOADER,
        P.AGENT,
        P.SERVER,
        P.ENGINE_CORE,
        P.TP_WORKER,
        P.ACTOR,
        "ray::SomethingNew",  # unknown kinds are listed, not dropped
        "other: /usr/bin/some-helper --flag",
    ]


def test_a_sample_reads_the_pss_of_live_processes():
    sample = P.sample_session([os.getpid()])
    [(kind, values)] = sample.items()
    assert kind.startswith("other: ") and values[0] > 1  # MiB: this interpreter holds more than one


def test_measure_keeps_each_kinds_largest_process_and_count():
    sizes = iter([[os.getpid()], [os.getpid()], []])
    table = P.measure(lambda: next(sizes), interval_s=0, until=lambda: False)
    [(kind, row)] = table.items()
    assert row["count_seen"] == 1 and row["pss_mib"] > 1


def test_the_measured_table_covers_every_kind_a_gpu_run_starts():
    """Each kind a gpu run counts was measured on the CPU stack, or names the measured kind standing in
    for it (on CPU the model runs in vLLM's engine core: no TP workers)."""
    from coolsampler.train.memory import STAND_INS

    doc = P.measured_pss()
    assert doc["how"] and doc["when"] and doc["machine"]
    counts = P.process_counts(verl_overrides(_run("qwen2.5-math-7b"), PATHS, platform="gpu"))
    for kind in counts:
        assert kind in doc["kinds"] or STAND_INS.get(kind) in doc["kinds"], kind
    for kind in STAND_INS:
        assert kind not in doc["kinds"]  # a measured kind needs no stand-in
    assert any(k.startswith(P.RAY_PREFIX) for k in doc["kinds"])
    assert all(row["pss_mib"] > 0 and row["count_seen"] >= 1 for row in doc["kinds"].values())


def test_a_named_actors_title_is_classified_by_its_class():
    """Ray titles a named actor ``ray::<name>:<Class>.<method>``; verl names its servers and pools."""
    assert P.classify(P.Proc(1, 0, "ray::vllm_server_0_0:vLLMHttpServer.wake_up"), {}) == P.SERVER
    assert P.classify(P.Proc(1, 0, "ray::agent_loop_worker_0_296a:AgentLoopWorkerTQ"), {}) == P.AGENT
    assert P.classify(P.Proc(1, 0, "ray::TaskRunnerV1.run"), {}) == P.TASK_RUNNER


def test_vllms_engine_core_is_one_kind_before_and_after_it_names_itself():
    server = P.Proc(10, 1, "ray::vllm_server_0_0:vLLMHttpServer.launch_server")
    spawned = P.Proc(11, 10, "/venv/bin/python -B -c from multiprocessing.spawn import spawn_main; spawn_main()")
    by_pid = {10: server, 11: spawned}
    assert P.classify(spawned, by_pid) == P.ENGINE_CORE == P.classify(P.Proc(11, 10, "VLLM::EngineCore_DP0"), by_pid)
    assert not any(k.startswith("other:") for k in P.measured_pss()["kinds"])  # no machine's path in the table
