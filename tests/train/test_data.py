"""Offline tests of coolsampler.train.data and the data rules, on the fixtures in tests/fixtures/hf.

The fixtures are synthetic records in the HF schemas of openai/gsm8k (main), DigitalLearningGmbH/
MATH-lighteval (default) and HuggingFaceH4/MATH-500, so preparation runs end to end without the Hub.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from coolsampler.spec.settings import TASKS
from coolsampler.train import data

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parents[1] / "fixtures" / "hf"
VENV_BIN = Path(sys.executable).parent


@pytest.fixture
def loader() -> data.Loader:
    return data.jsonl_loader(FIXTURES)


def _prepare(tmp_path: Path, task: str, split: str, loader: data.Loader) -> tuple[dict, list[dict]]:
    manifest = data.prepare_split(task, split, tmp_path / "data", tmp_path / "cache", loader=loader, expected=None)
    parquet, _ = data.output_paths(tmp_path / "data", task, split)
    return manifest, pq.read_table(parquet).to_pylist()


def test_layout_matches_settings() -> None:
    """The file stems the study's tasks name are the ones this module writes."""
    for task, splits in data.TASK_SPLITS.items():
        assert (TASKS[task].train, TASKS[task].val) == splits
    parquet, manifest = data.output_paths("d", "math", "train_l3-5")
    assert parquet == Path("d/math/train_l3-5.parquet")
    assert manifest == Path("d/math/train_l3-5.manifest.json")
    with pytest.raises(data.DataError, match="unknown task/split"):
        data.output_paths("d", "math", "test")


def test_paper_counts() -> None:
    counts = {key: spec.expected for key, spec in data.SPLITS.items()}
    assert counts == {
        ("gsm8k", "train"): 7473,
        ("gsm8k", "test"): 1319,
        ("math", "train_l3-5"): 5586,
        ("math", "math500"): 500,
    }


def test_gsm8k_rows_follow_verl_conventions(tmp_path: Path, loader: data.Loader) -> None:
    manifest, rows = _prepare(tmp_path, "gsm8k", "train", loader)
    assert [r["reward_model"]["ground_truth"] for r in rows] == ["12", "1234", "-5", "5"]
    first = rows[0]
    assert set(first) == {"data_source", "prompt", "ability", "reward_model", "extra_info"}
    assert first["data_source"] == "openai/gsm8k"
    assert first["ability"] == "math"
    assert first["reward_model"]["style"] == "rule"
    assert first["prompt"] == [
        {
            "role": "user",
            "content": "Mia has 3 boxes with 4 pencils in each box. How many pencils does she have? "
            'Let\'s think step by step and output the final answer after "####".',
        }
    ]
    assert [r["extra_info"]["index"] for r in rows] == [0, 1, 2, 3]
    assert {r["extra_info"]["split"] for r in rows} == {"train"}
    assert first["extra_info"]["answer"].endswith("#### 12")
    assert manifest["count"] == 4 and manifest["expected_count"] is None


def test_math_train_filters_levels_3_to_5(tmp_path: Path, loader: data.Loader) -> None:
    manifest, rows = _prepare(tmp_path, "math", "train_l3-5", loader)
    assert [r["extra_info"]["level"] for r in rows] == ["Level 3", "Level 4", "Level 5", "Level 5"]
    # the last boxed expression is the answer, also when a solution boxes several
    assert [r["reward_model"]["ground_truth"] for r in rows] == ["-3", "4", "(1,2)", "3"]
    assert {r["data_source"] for r in rows} == {"DigitalLearningGmbH/MATH-lighteval"}
    assert rows[0]["prompt"][0]["content"].endswith(
        " Let's think step by step and output the final answer within \\boxed{}."
    )
    assert manifest["filter"] == "level in ['Level 3', 'Level 4', 'Level 5']"
    assert manifest["source"]["hf_split"] == "train"


def test_math500_uses_answer_field(tmp_path: Path, loader: data.Loader) -> None:
    _, rows = _prepare(tmp_path, "math", "math500", loader)
    assert [r["reward_model"]["ground_truth"] for r in rows] == ["\\frac{3}{4}", "-3"]
    assert rows[0]["data_source"] == "HuggingFaceH4/MATH-500"
    assert rows[0]["extra_info"]["unique_id"] == "test/prealgebra/0001.json"
    assert rows[1]["extra_info"]["level"] == "3"


def test_parquet_reads_like_verl_reads_it(tmp_path: Path, loader: data.Loader) -> None:
    """verl's RLHFDataset loads the file with datasets' parquet builder and pops the chat prompt."""
    datasets = pytest.importorskip("datasets")
    _prepare(tmp_path, "gsm8k", "test", loader)
    parquet, _ = data.output_paths(tmp_path / "data", "gsm8k", "test")
    ds = datasets.load_dataset("parquet", data_files=str(parquet), cache_dir=str(tmp_path / "c"))["train"]
    row = ds[0]
    assert isinstance(row["prompt"], list) and row["prompt"][0]["role"] == "user"
    assert row["reward_model"]["ground_truth"] == "42"
    assert row["extra_info"]["split"] == "test" and row["extra_info"]["index"] == 0


def test_verl_rlhf_dataset_loads_the_parquet(tmp_path: Path, loader: data.Loader) -> None:
    """verl's own RLHFDataset reads the file (tiny offline word-level tokenizer, no hub access)."""
    rl_dataset = pytest.importorskip("verl.utils.dataset.rl_dataset")
    tokenizers = pytest.importorskip("tokenizers")
    transformers = pytest.importorskip("transformers")
    omegaconf = pytest.importorskip("omegaconf")
    _prepare(tmp_path, "math", "train_l3-5", loader)
    parquet, _ = data.output_paths(tmp_path / "data", "math", "train_l3-5")

    word_level = tokenizers.Tokenizer(tokenizers.models.WordLevel({"[UNK]": 0, "[PAD]": 1}, unk_token="[UNK]"))
    word_level.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_object=word_level, unk_token="[UNK]", pad_token="[PAD]")
    tokenizer.chat_template = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    config = omegaconf.OmegaConf.create(
        {"max_prompt_length": 512, "cache_dir": str(tmp_path / "verl"), "filter_overlong_prompts_workers": 1}
    )
    dataset = rl_dataset.RLHFDataset(data_files=str(parquet), tokenizer=tokenizer, config=config)
    assert len(dataset) == 4
    item = dataset[1]
    assert item["raw_prompt"][0]["role"] == "user"
    assert item["data_source"] == "DigitalLearningGmbH/MATH-lighteval"
    assert item["reward_model"]["ground_truth"] == "4"
    assert item["index"] == 1


@pytest.mark.parametrize("key", sorted(data.SPLITS))
def test_every_prepared_source_has_a_reward(key: tuple[str, str]) -> None:
    """The reward router knows every data_source this module writes, and scores a right answer 1."""
    rewards = pytest.importorskip("coolsampler.worker.rewards")
    pytest.importorskip("verl.utils.reward_score.gsm8k")
    spec = data.SPLITS[key]
    answer = "#### 1234" if spec.task == "gsm8k" else "\\boxed{\\frac{1}{2}}"
    truth = "1234" if spec.task == "gsm8k" else "\\frac{1}{2}"
    assert rewards.compute_score(spec.dataset_id, answer, truth) == 1.0


def test_manifest_fields_and_hash(tmp_path: Path, loader: data.Loader) -> None:
    manifest, _ = _prepare(tmp_path, "gsm8k", "test", loader)
    parquet, manifest_path = data.output_paths(tmp_path / "data", "gsm8k", "test")
    on_disk = json.loads(manifest_path.read_text())
    assert on_disk == manifest
    assert manifest["source"] == {
        "dataset_id": "openai/gsm8k",
        "config": "main",
        "hf_split": "test",
        "revision": None,  # a JSON-lines loader has no Hub revision
        "fingerprint": None,
    }
    assert manifest["task"] == "gsm8k" and manifest["split"] == "test"
    assert manifest["count"] == 3
    assert manifest["prompt_template"] == data.PROMPT_TEMPLATE_GSM8K
    assert manifest["sha256"] == data.sha256_file(parquet)
    assert manifest["columns"] == ["data_source", "prompt", "ability", "reward_model", "extra_info"]
    assert data.verify_manifest(manifest_path) == manifest

    # preparation is deterministic: same rows, same bytes
    again = data.prepare_split("gsm8k", "test", tmp_path / "data2", tmp_path / "cache", loader=loader, expected=3)
    assert again["sha256"] == manifest["sha256"]

    parquet.write_bytes(parquet.read_bytes() + b"x")
    with pytest.raises(data.DataError, match="changed since it was prepared"):
        data.verify_manifest(manifest_path)


def test_manifest_records_hf_revision_and_fingerprint(tmp_path: Path) -> None:
    """A loaded HF dataset's fingerprint and the commit in its cache path land in the manifest."""

    class FakeHFDataset(list):
        _fingerprint = "abc123fingerprint"
        cache_files = [{"filename": "/c/openai___gsm8k/main/0.0.0/" + "e" * 40 + "/gsm8k-test.arrow"}]

    rows = FakeHFDataset([{"question": "q?", "answer": "#### 7"}])
    manifest = data.prepare_split("gsm8k", "test", tmp_path, tmp_path / "cache", loader=lambda *a: rows, expected=None)
    assert manifest["source"]["fingerprint"] == "abc123fingerprint"
    assert manifest["source"]["revision"] == "e" * 40


def test_count_mismatch_is_an_error_and_writes_nothing(tmp_path: Path, loader: data.Loader) -> None:
    with pytest.raises(data.CountMismatchError, match=r"gsm8k/test: 3 problems .* expected 1319"):
        data.prepare_split("gsm8k", "test", tmp_path / "data", tmp_path / "cache", loader=loader)
    with pytest.raises(data.CountMismatchError, match="expected 5586"):
        data.prepare_task("math", tmp_path / "data", tmp_path / "cache", loader=loader)
    with pytest.raises(data.CountMismatchError, match="expected 4"):
        data.prepare_split("gsm8k", "test", tmp_path / "data", tmp_path / "cache", loader=loader, expected=4)
    assert not (tmp_path / "data").exists()
    manifest = data.prepare_split("gsm8k", "test", tmp_path / "data", tmp_path / "c", loader=loader, expected=3)
    assert manifest["expected_count"] == 3


def test_unreachable_source_names_dataset_and_cache(tmp_path: Path) -> None:
    def offline(dataset_id: str, config: str | None, split: str, cache_dir: Path) -> list:
        raise ConnectionError(f"Couldn't reach '{dataset_id}' on the Hub (LocalEntryNotFoundError)")

    cache = tmp_path / "hf-cache"
    with pytest.raises(data.DataUnavailableError) as info:
        data.prepare_split("math", "math500", tmp_path / "data", cache, loader=offline)
    message = str(info.value)
    assert "'HuggingFaceH4/MATH-500'" in message
    assert str(cache.resolve()) in message
    assert isinstance(info.value.__cause__, ConnectionError)

    # a missing JSON-lines file reads the same way
    with pytest.raises(data.DataUnavailableError, match="openai/gsm8k"):
        data.prepare_split("gsm8k", "test", tmp_path / "data", cache, loader=data.jsonl_loader(tmp_path / "none"))


def test_real_hf_loader_offline_without_cache(tmp_path: Path) -> None:
    """The default loader (HF datasets) in offline mode with an empty cache gives the clear error."""
    pytest.importorskip("datasets")
    code = textwrap.dedent(
        f"""
        from coolsampler.train import data
        try:
            data.prepare_split("gsm8k", "test", {str(tmp_path / "data")!r}, {str(tmp_path / "cache")!r})
        except data.DataUnavailableError as exc:
            print("UNAVAILABLE", exc)
        """
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert "UNAVAILABLE" in out.stdout, out.stderr
    assert "'openai/gsm8k'" in out.stdout and str((tmp_path / "cache").resolve()) in out.stdout


# a selection of strings on which the own boxed extraction must agree with verl's
BOXED_CASES = [
    "so $\\boxed{5}$.",
    "$\\boxed{\\frac{1}{2}}$",
    "first \\boxed{1} then \\boxed{-3}",
    "\\boxed{(1,2)} and more text",
    "no box here",
    "\\fbox{7}",
    "\\boxed{\\text{(A)}}",
    "unbalanced \\boxed{3",
]


@pytest.mark.parametrize("text", BOXED_CASES)
def test_last_boxed_agrees_with_verl(text: str) -> None:
    math_reward = pytest.importorskip("verl.utils.reward_score.math_reward")
    boxed = math_reward.last_boxed_only_string(text)
    expected = None
    if boxed is not None and boxed.startswith("\\boxed"):
        expected = math_reward.remove_boxed(boxed)
    elif boxed is not None:  # \fbox{...}: verl cannot unbox it; ours returns the content
        expected = boxed[len("\\fbox{") : -1]
    assert data.last_boxed(text) == expected


def test_answer_extraction_errors() -> None:
    with pytest.raises(data.DataError, match="####"):
        data.gsm8k_ground_truth("no final line")
    with pytest.raises(data.DataError, match="boxed"):
        data.math_ground_truth("no box")


SNAKEFILE = """\
configfile: {config!r}


include: {rules!r}
"""


def _snakemake(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    snakemake = shutil.which("snakemake", path=str(VENV_BIN)) or shutil.which("snakemake")
    if snakemake is None:
        pytest.skip("snakemake not installed")
    config = tmp_path / "config.yaml"
    config.write_text(f"data_dir: {tmp_path / 'data'}\ndata_cache: {tmp_path / 'cache'}\n")
    snakefile = tmp_path / "Snakefile"
    snakefile.write_text(SNAKEFILE.format(config=str(config), rules=str(ROOT / "workflow/rules/data.smk")))
    cmd = [snakemake, "-s", str(snakefile), "-d", str(tmp_path), "--cores", "1", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)


def test_rules_resolve_every_split(tmp_path: Path) -> None:
    out = _snakemake(tmp_path, "--dry-run", "prepare_data")
    assert out.returncode == 0, out.stdout + out.stderr
    for name in ("prepare_gsm8k", "prepare_math"):
        assert name in out.stdout
    for split in ("gsm8k/train", "gsm8k/test", "math/train_l3-5", "math/math500"):
        assert f"{split}.parquet" in out.stdout


def test_rule_offline_failure_is_logged(tmp_path: Path) -> None:
    """The script runs under Snakemake; offline with no cache it fails and the log says why."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    out = _snakemake(tmp_path, str(tmp_path / "data/math/math500.parquet"), env=env)
    assert out.returncode != 0
    log = (tmp_path / "data/logs/prepare_math/math500.log").read_text()
    assert "DataUnavailableError" in log and "'HuggingFaceH4/MATH-500'" in log
