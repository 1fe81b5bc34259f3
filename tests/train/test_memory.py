"""The paper runs' memory budget (coolsampler.train.memory) fits the SLURM profile and an 80 GB GPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from coolsampler.train import memory

PROFILE = Path(__file__).resolve().parents[2] / "profiles" / "slurm" / "config.v8+.yaml"
PAPER_MODELS = ("qwen2.5-math-1.5b", "qwen2.5-math-7b")


def test_parameter_counts_match_the_published_models():
    """The architecture arithmetic reproduces the checkpoints' parameter counts (HF model cards)."""
    assert memory.ARCH["qwen2.5-math-1.5b"].params == 1_543_714_304
    assert memory.ARCH["qwen2.5-math-7b"].params == 7_615_616_512


def test_settings_come_from_the_gpu_overrides():
    assert [memory.setting(m).tp for m in PAPER_MODELS] == [1, 2]
    assert {memory.setting(m).gpus for m in PAPER_MODELS} == {4}
    assert {memory.setting(m).gpu_memory_utilization for m in PAPER_MODELS} == {0.5}


@pytest.mark.parametrize("model", PAPER_MODELS)
def test_host_budget_fits_the_slurm_mem_limit(model):
    limit = memory.slurm_train_mem_bytes(PROFILE)
    need = memory.total(memory.host_budget(model))
    assert need <= limit, f"{model}: {need / memory.GIB:.1f} GiB > {limit / memory.GIB:.1f} GiB"


@pytest.mark.parametrize("model", PAPER_MODELS)
def test_gpu_budget_fits_an_80gb_gpu(model):
    phase, need = memory.gpu_peak(model)
    assert need <= 80 * 1024**3, f"{model}: {phase} needs {need / memory.GIB:.1f} GiB"


def test_the_snapshot_is_one_bf16_model_per_rank():
    """The gate's host cost: 2 bytes per parameter on each rank (it was 4, twice during a refresh)."""
    for model in PAPER_MODELS:
        item = memory.host_budget(model)[0]
        assert "snapshot" in item.what
        assert item.bytes == memory.setting(model).gpus * memory.ARCH[model].params * 2


def test_markdown_table_lists_every_item_and_the_limit():
    table = memory.markdown_table(PROFILE)
    for model in PAPER_MODELS:
        for item in memory.host_budget(model):
            assert f"| {item.what} |" in table
    limit = f"{memory.slurm_train_mem_bytes(PROFILE) / memory.GIB:.1f}"
    assert f"| SLURM mem_mb limit (slurm profile) | {limit} | {limit} |" in table


def test_host_budget_has_a_row_per_process_kind():
    """Every kind a gpu run starts is a host row of count x measured PSS, so are Ray's daemons the
    measured run had, and the CUDA contexts' host side is a named assumption of its own."""
    from coolsampler.train import processes

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


def test_a_checkpoint_keeps_one_snapshot():
    """fp32 params + Adam m, v (12 bytes a parameter) and one bf16 snapshot, not one per rank."""
    for model in PAPER_MODELS:
        assert memory.checkpoint_disk_bytes(model) == memory.ARCH[model].params * (12 + 2)


def test_a_validation_push_costs_a_refresh_push():
    for model in PAPER_MODELS:
        phases = memory.gpu_budget(model)
        assert memory.total(phases["validation push"]) == memory.total(phases["refresh"])


def test_the_process_table_lists_every_kind():
    text = memory.process_table()
    for kind in memory.process_counts("qwen2.5-math-7b"):
        assert f"| {kind} |" in text
