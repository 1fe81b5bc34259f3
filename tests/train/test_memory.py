"""The memory budget of a gpu run (coolsampler.train.memory): host memory as torch really pins it, the
stale sampler's snapshot counted as often as it exists, what a sleeping vLLM keeps on the GPU, and every
paper run checked against the paper's own machines, with the setting that makes a run fit where it does not."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from coolsampler.spec.study import load_study
from coolsampler.train import memory, processes

REPO = Path(__file__).resolve().parents[2]
PROFILE = REPO / "profiles" / "slurm" / "config.v8+.yaml"
PAPER_MODELS = ("qwen2.5-math-1.5b", "qwen2.5-math-7b")
GIB = memory.GIB
MIB = memory.MIB


def test_parameter_counts_match_the_published_models():
    """The architecture arithmetic reproduces the checkpoints' parameter counts (HF model cards)."""
    assert memory.ARCH["qwen2.5-math-1.5b"].params == 1_543_714_304
    assert memory.ARCH["qwen2.5-math-7b"].params == 7_615_616_512


@pytest.mark.parametrize("model", PAPER_MODELS)
def test_a_vllm_worker_holds_its_tensor_parallel_share_of_every_weight(model):
    a = memory.ARCH[model]
    assert sum(a.vllm_tensors(1)) == a.params * 2
    norms = (2 * a.layers + 1) * a.hidden * 2  # replicated on every TP rank
    assert sum(a.vllm_tensors(2)) == (a.params * 2 - norms) // 2 + norms


def test_segments_follow_torchs_caching_allocator():
    """At most 1 MiB: shared 2 MiB segments; under 10 MiB: shared 20 MiB segments; larger: one segment,
    rounded up to 2 MiB."""
    assert memory.weight_segments([4096] * 3) == [2 * MIB]
    assert memory.weight_segments([6 * MIB, 6 * MIB, 6 * MIB, 6 * MIB]) == [20 * MIB, 20 * MIB]
    assert memory.weight_segments([int(129.5 * MIB)]) == [130 * MIB]


def test_the_7b_sleep_backup_is_pinned_in_power_of_two_blocks():
    """A 7B TP=2 worker's shards sit just above powers of two (gate_up 129.5 MiB, down 64.75, the
    vocabulary's 519.75): 13.4 GiB pinned for 7.1 GiB of weights. The budget before this counted the
    bf16 bytes (28.4 GiB for the node)."""
    a = memory.ARCH["qwen2.5-math-7b"]
    assert sum(a.vllm_tensors(2)) / GIB == pytest.approx(7.09, abs=0.01)
    assert memory.sleep_backup_bytes(a, 2) / GIB == pytest.approx(13.38, abs=0.01)
    row = {i.what: i for i in memory.host_budget("qwen2.5-math-7b")}[memory.BACKUP_ROW]
    assert row.bytes == 4 * memory.sleep_backup_bytes(a, 2)
    assert row.bytes / GIB == pytest.approx(53.5, abs=0.1)


def test_the_snapshot_is_counted_once_split_between_the_ranks():
    """The stale sampler exists once on the node (each rank keeps its share, patch 0001): 2 bytes a
    parameter as FSDP yields them, not 2 per rank (four identical 7B copies were 57 GiB)."""
    for model in PAPER_MODELS:
        rows = {i.what: i for i in memory.host_budget(model)}
        assert rows[memory.SNAPSHOT_ROW].bytes == memory.ARCH[model].state_dict_params * 2
    a = memory.ARCH["qwen2.5-math-7b"]
    held = memory.held_per_process(memory.setting("qwen2.5-math-7b"))[processes.ACTOR]
    assert held.bytes == a.state_dict_params * 2 // 4 + a.largest_tensor * 4 // 4


def test_a_tied_embedding_is_counted_twice_where_fsdp_yields_it_twice():
    """Qwen2.5-Math-1.5B ties its embedding and lm_head: vLLM holds it once, but FSDP's state dict (the
    snapshot's source and the checkpoint's content) names both: 0.43 GiB more in bf16."""
    tied, untied = memory.ARCH["qwen2.5-math-1.5b"], memory.ARCH["qwen2.5-math-7b"]
    assert (tied.state_dict_params - tied.params) * 2 / GIB == pytest.approx(0.43, abs=0.01)
    assert untied.state_dict_params == untied.params


def test_the_checkpoint_staging_follows_fsdp2():
    """Under FSDP2 the shards stay on the GPU and torch.save copies one storage at a time: the host stages
    the largest fp32 tensor's shard per rank, not the whole fp32 state (93 GiB for the 7B)."""
    for model in PAPER_MODELS:
        rows = {i.what: i for i in memory.host_budget(model)}
        a = memory.ARCH[model]
        assert rows[memory.STAGING_ROW].bytes == a.largest_tensor * 4
        assert rows[memory.STAGING_ROW].bytes < a.params * 12 / 15


def test_the_7b_fits_the_slurm_profile_with_a_margin():
    s = memory.setting("qwen2.5-math-7b")
    f = memory.fit(s, PROFILE)
    limit = memory.slurm_train_mem_bytes(PROFILE)
    assert f.host <= limit * (1 - memory.HOST_MARGIN), f"{f.host / GIB:.1f} GiB"
    assert f.host / GIB == pytest.approx(111.2, abs=0.2)


def test_a_sleeping_vllm_keeps_its_cuda_graphs_beside_the_learner():
    phases = memory.gpu_budget("qwen2.5-math-7b")
    for phase in ("train", "refresh", "validation push"):
        assert memory.CUDA_GRAPH_BYTES in [i.bytes for i in phases[phase] if "CUDA graphs" in i.what], phase
    assert not [i for i in phases["generate"] if "CUDA graphs" in i.what]  # inside gpu_memory_utilization


def test_the_paper_study_declares_the_papers_machines_and_every_run_fits_them():
    """Appendix D: 1.5B on four 32 GB GPUs, 7B on four 96 GB GPUs."""
    settings = memory.paper_settings()
    assert {(s.model, s.task) for s in settings} == {
        ("qwen2.5-math-1.5b", "gsm8k"),
        ("qwen2.5-math-1.5b", "math"),
        ("qwen2.5-math-7b", "gsm8k"),
    }
    gib = {s.model: round(s.gpu_bytes / GIB, 1) for s in settings}
    assert gib == {"qwen2.5-math-1.5b": 31.7, "qwen2.5-math-7b": 95.6}  # as the cards report them
    for s in settings:
        f = memory.fit(s, PROFILE)
        assert f.fits, memory.fit_lines([s], PROFILE)


def test_the_15b_math_run_does_not_fit_32_gb_at_the_recipes_micro_batch_and_the_fix_is_named():
    """At 8 sequences per GPU the learner's step holds 20.9 GiB of fp32 logits: 33.2 GiB in all, above a
    32 GB GPU. Halving the micro-batch is the cheapest fix; it is what config/paper.yaml sets."""
    s = next(s for s in memory.paper_settings() if s.task == "math")
    assert s.micro_batch == 4
    recipe = replace(s, micro_batch=8)
    f = memory.fit(recipe, PROFILE)
    assert not f.gpu_fits and f.gpu["train"] / GIB == pytest.approx(33.2, abs=0.1)
    (fix,) = memory.fixes(recipe, PROFILE)
    assert fix.change == "models: {qwen2.5-math-1.5b: {micro_batch: 4}}" and fix.fit.fits
    assert fix.fit.gpu["train"] / GIB == pytest.approx(22.3, abs=0.1)


def test_where_no_single_setting_fits_the_settings_are_combined_and_the_last_says_so():
    s = replace(memory.setting("qwen2.5-math-7b"), gpu_bytes=40 * GIB)
    steps = memory.fixes(s, PROFILE)
    assert len(steps) > 1
    assert [f.change.split(":")[0] for f in steps][:2] == ["models", "verl_overrides"]
    assert max(steps[-1].fit.gpu.values()) < max(memory.fit(s, PROFILE).gpu.values())


def test_settings_come_from_the_gpu_overrides_and_the_models_machines():
    s = {m: memory.setting(m) for m in PAPER_MODELS}
    assert [s[m].tp for m in PAPER_MODELS] == [1, 2]
    assert {s[m].gpus for m in PAPER_MODELS} == {4}
    assert {s[m].gpu_memory_utilization for m in PAPER_MODELS} == {0.5}
    assert {s[m].gpu_bytes for m in PAPER_MODELS} == {80 * GIB}  # no study: the platform's default
    study = load_study(REPO / "config" / "paper.yaml")
    run = next(r for r in study.runs if r.model == "qwen2.5-math-1.5b")
    from coolsampler.train.overrides import RunPaths, verl_overrides

    o = verl_overrides(run, RunPaths("m", "t", "v", "o"), platform="gpu")
    assert "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4" in o
    cpu = verl_overrides(run, RunPaths("m", "t", "v", "o"), platform="cpu")
    assert "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=128" in cpu  # the cpu platform's own


def test_markdown_table_lists_every_item_and_the_limits():
    settings = memory.paper_settings()
    table = memory.markdown_table(settings, PROFILE)
    for s in settings:
        for item in memory.host_budget(s):
            assert f"| {item.what} |" in table
    limit = f"{memory.slurm_train_mem_bytes(PROFILE) / GIB:.1f}"
    assert f"| SLURM mem_mb (slurm profile) | {limit} | {limit} | {limit} |" in table
    assert "| GPU memory (declared) | 31.7 | 31.7 | 95.6 |" in table


def test_host_budget_has_a_row_per_process_kind():
    table = processes.measured_pss()["kinds"]
    for model in PAPER_MODELS:
        rows = {i.what: i for i in memory.host_budget(model)}
        counts = memory.process_counts(model)
        for kind, n in counts.items():
            mib = table[memory.STAND_INS.get(kind, kind) if kind not in table else kind]["pss_mib"]
            assert rows[kind].bytes == int(n * mib * processes.MIB), kind
        for kind in table:
            assert kind in rows, kind
        cuda = rows["CUDA host overhead (assumed)"]
        assert cuda.bytes == processes.cuda_processes(counts) * memory.CUDA_HOST_OVERHEAD
    assert memory.process_counts("qwen2.5-math-7b")[processes.AGENT] == 8
    assert memory.process_counts("qwen2.5-math-7b")[processes.SERVER] == 2


def test_a_checkpoint_keeps_one_snapshot_and_a_save_holds_two_checkpoints():
    for model in PAPER_MODELS:
        assert memory.checkpoint_bytes(model) == memory.ARCH[model].state_dict_params * (12 + 2)
        assert memory.checkpoint_disk_bytes(model) == 2 * memory.checkpoint_bytes(model)


def test_a_validation_push_costs_a_refresh_push():
    for model in PAPER_MODELS:
        phases = memory.gpu_budget(model)
        assert memory.total(phases["validation push"]) == memory.total(phases["refresh"])


def test_the_process_table_says_what_each_process_also_holds():
    text = memory.process_table(memory.paper_settings())
    for kind in memory.process_counts("qwen2.5-math-7b"):
        assert f"| {kind} |" in text
    assert "13.4 GiB (pinned sleep backup)" in text


def test_the_memory_command_checks_a_studys_machines_and_fails_where_a_run_does_not_fit(tmp_path):
    paper = yaml.safe_load((REPO / "config" / "paper.yaml").read_text())
    ok = subprocess.run(
        [sys.executable, "-m", "coolsampler.cli", "memory"], capture_output=True, text=True, cwd=REPO, check=False
    )
    assert ok.returncode == 0, ok.stderr
    assert "qwen2.5-math-7b gsm8k on 4 x 95.6 GiB GPUs: fits" in ok.stdout
    small = {**paper, "models": {"qwen2.5-math-1.5b": {"gpu_memory_gib": 24}}, "hardware": {"host_memory_gib": 100}}
    (tmp_path / "small.yaml").write_text(yaml.safe_dump(small))
    bad = subprocess.run(
        [sys.executable, "-m", "coolsampler.cli", "memory", "--study", str(tmp_path / "small.yaml")],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert bad.returncode == 1, bad.stderr
    assert "qwen2.5-math-7b gsm8k on 4 x 80 GiB GPUs: DOES NOT FIT" in bad.stdout  # host: 100 GiB nodes
    assert "qwen2.5-math-1.5b math on 4 x 24 GiB GPUs: DOES NOT FIT" in bad.stdout
    assert "  set models: {qwen2.5-math-1.5b: {micro_batch: 4}}" in bad.stdout
    assert "node memory (hardware.host_memory_gib)" in bad.stdout
