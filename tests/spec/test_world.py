"""A study's generated world (``worlds:``): its knobs key its model, task and runs; bad knobs stop with one line."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from coolsampler.spec.study import KEY_WILDCARD_RE, StudyError, parse_key, study_from_dict
from coolsampler.spec.world import World, world_from_dict
from coolsampler.train.overrides import reward_overrides
from coolsampler.train.paths import Layout

STUDY: dict[str, Any] = {
    "name": "w",
    "results": "results/w",
    "profile": "cpu",
    "worlds": {"chain": {"chain_length": 3, "vocab_words": 8}},
    "defaults": {
        "model": "chain",
        "task": "chain",
        "lr": 1e-4,
        "Tb": 1.0,
        "correction": "tis",
        "steps": 16,
        "val_every": 4,
    },
    "runs": [{"N": [4, 16], "seed": 1}],
}


def study(**world: Any):
    raw = copy.deepcopy(STUDY)
    raw["worlds"]["chain"].update(world)
    return study_from_dict(raw, origin="w")


def test_runs_carry_the_world_and_its_key_in_their_path() -> None:
    s = study()
    ident = s.runs[0].model
    assert re.fullmatch(r"chain-[0-9a-f]{8}", ident)
    assert [r.key for r in s.runs] == [
        f"{ident}/{ident}/N4_lr1e-4_tis_Tb1_Tl1_s1_st16_v4",
        f"{ident}/{ident}/N16_lr1e-4_tis_Tb1_Tl1_s1_st16_v4",
    ]
    assert {(r.steps, r.val_every) for r in s.runs} == {(16, 4)}
    # a key reads back into the same run, and the rules' key wildcard takes it
    assert parse_key(s.runs[1].key, study=s) == s.runs[1]
    assert all(re.fullmatch(KEY_WILDCARD_RE, r.key) for r in s.runs)


def test_every_knob_changes_the_key_and_the_name_does_not_hide_it() -> None:
    base = study().runs[0].model
    for knob, value in [
        ("chain_length", 4),
        ("vocab_words", 9),
        ("zipf", 1.3),
        ("error", {"slope": 0.3}),
        ("model", {"layers": 2}),
        ("warm_start", {"greedy_acc": 0.4}),
        ("seed", 2),
        ("sampled_val", 8),
        ("tail_zipf", 1.0),
    ]:
        assert study(**{knob: value}).runs[0].model != base, knob
    assert study().runs[0].model == base  # and nothing else does
    assert study(tail_zipf=None).runs[0].model == base  # the knob's "off" value is its absence


def test_a_module_the_generator_imports_may_move_without_rebuilding_a_world(tmp_path, monkeypatch) -> None:
    """The key reads a moved module under its old name, so the worlds (and runs) keyed before the move
    stay; any other change of the generator's code is still a new world."""
    from coolsampler.spec import world as world_spec

    assert world_spec.GENERATOR.is_file()
    keys = {}
    for name, source in [
        ("moved", "def f():\n    from coolsampler.world.toy import build_tokenizer\n"),
        ("before", "def f():\n    from coolsampler.testkit.toy import build_tokenizer\n"),
        ("changed", "def f():\n    from coolsampler.world.toy import numerics_record\n"),
    ]:
        (tmp_path / f"{name}.py").write_text(source)
        monkeypatch.setattr(world_spec, "GENERATOR", tmp_path / f"{name}.py")
        keys[name] = study().runs[0].model
    assert keys["moved"] == keys["before"] != keys["changed"]


def test_a_runs_length_is_a_run_setting_and_never_rebuilds_its_world() -> None:
    raw = copy.deepcopy(STUDY)
    raw["defaults"]["steps"] = 64
    longer = study_from_dict(raw, origin="w")
    assert longer.runs[0].model == study().runs[0].model
    assert longer.runs[0].key != study().runs[0].key and longer.runs[0].steps == 64
    # the old place of the settings stops with one line that says where they went
    for moved in ("steps", "val_every"):
        with pytest.raises(
            StudyError, match=rf"worlds.chain.{moved}: a run setting, not a world knob.*defaults"
        ) as err:
            world_from_dict("chain", {moved: 8}, "w: worlds.chain")
        assert "\n" not in str(err.value)


def test_the_world_model_and_data_live_where_rules_world_model_and_world_data_write_them() -> None:
    s = study()
    run = s.runs[0]
    layout = Layout.from_config(s.raw, s.results)
    assert layout.model_weights(run.model_info) == f"{layout.model_dir(run.model)}/model.safetensors"
    assert layout.data_files(run.task_info) == {
        "train": f"{layout.data}/{run.task}/train.parquet",
        "val": f"{layout.data}/{run.task}/val.parquet",
    }
    # verl scores the world's answers with the generator's own reward, by path
    over = reward_overrides(run)
    assert over["reward.custom_reward_function.path"].endswith("coolsampler/world/chain.py")
    assert over["reward.custom_reward_function.name"] == "compute_score"


def test_response_length_fits_a_whole_answer() -> None:
    w = World("chain", chain_length=5, words_per_block=3)
    assert w.response_tokens == 5 * (1 + 1 + 3 + 1) + 1  # label, operand, words, sum; EOS
    assert w.as_task().max_response_length > w.response_tokens
    assert w.as_task().max_prompt_length >= w.prompt_tokens


@pytest.mark.parametrize(
    ("world", "message"),
    [
        ({"vocab_words": 60}, r"vocab_words: 60"),
        ({"model": {"hidden_size": 100, "heads": 3}}, r"hidden_size 100 is not heads x 32"),
        ({"zipf": -1}, r"zipf"),
        ({"colour": "red"}, r"colour"),
        ({"val_prompts": 16, "sampled_val": 17}, r"sampled_val: 17 exceeds val_prompts 16"),
    ],
)
def test_bad_knobs_stop_with_one_line(world: dict[str, Any], message: str) -> None:
    with pytest.raises(StudyError, match=message) as err:
        study(**world)
    assert "\n" not in str(err.value)


def test_a_world_may_not_take_a_models_name() -> None:
    raw = copy.deepcopy(STUDY)
    raw["worlds"] = {"arith": {}}
    with pytest.raises(StudyError, match=r"worlds\.arith: the name of a"):
        study_from_dict(raw, origin="w")


def test_knobs_round_trip_through_the_rules_params() -> None:
    w = study().runs[0]
    world = world_from_dict("chain", study().raw["worlds"]["chain"], "w")
    assert world.ident == w.model
    assert world_from_dict("chain", world.knobs(), "w") == world


def test_a_recipe_that_would_cut_the_validation_set_stops_with_one_line() -> None:
    """verl's val_max_samples keeps a subset of the rows: the sampled copy could be dropped, or the greedy
    and sampled scores read on different prompts."""
    raw = copy.deepcopy(STUDY)
    raw["worlds"]["chain"].update(val_prompts=16, sampled_val=8)
    raw["recipe"] = {"val_samples": 16}
    with pytest.raises(StudyError, match=r"val_samples: 16 cuts world chain's validation set of 24 rows") as err:
        study_from_dict(raw, origin="w")
    assert "\n" not in str(err.value)
    for fits in (24, 100):
        raw["recipe"] = {"val_samples": fits}
        assert study_from_dict(raw, origin="w").runs
