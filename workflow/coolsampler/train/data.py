"""Preparation of the paper's training and validation data as verl-format parquet files.

The paper (Section 2) trains on GSM8K (train split, validated on the 1319-problem test split) and on
MATH levels 3-5 (5586 training problems, validated on MATH-500). This module turns the public Hugging
Face datasets into the parquet files verl's ``RLHFDataset`` reads, following the conventions of
verl's own ``examples/data_preprocess/{gsm8k,math_dataset}.py``:

* ``data_source``: the HF dataset id; ``coolsampler.worker.rewards.compute_score`` (and verl's
  ``default_compute_score``) route the reward on it.
* ``prompt``: a chat list ``[{"role": "user", "content": question + instruction}]``.
* ``ability``: ``"math"``.
* ``reward_model``: ``{"style": "rule", "ground_truth": <final answer string>}``.
* ``extra_info``: ``{"split", "index", ...}`` plus the raw question/answer for inspection.

Layout (fixed; the study's run keys and the Snakemake rules name these files)::

    <data_dir>/gsm8k/train.parquet       <data_dir>/gsm8k/test.parquet
    <data_dir>/math/train_l3-5.parquet   <data_dir>/math/math500.parquet

each with a ``<split>.manifest.json`` beside it recording where the rows came from (dataset id,
revision, fingerprint), the filter, the count, the prompt template and the parquet's sha256, so a run
can state exactly which data it trained on.

Counts are checked at preparation time against the paper's numbers: a silently different dataset
revision or filter would change what "GSM8K" or "MATH l3-5" means for every run downstream.

MATH source. ``DigitalLearningGmbH/MATH-lighteval`` (config ``default``, split ``train``, 7500
problems) is the training source: it is the drop-in replacement for the withdrawn ``lighteval/MATH``
that verl's ``math_dataset.py`` uses, it carries the ``level`` and ``type`` fields, and verl's
``default_compute_score`` already routes its ``data_source`` to the MATH scorer. Keeping
``level in {"Level 3", "Level 4", "Level 5"}`` gives, by the published level distribution of the
MATH training split (Level 1: 566, Level 2: 1348, Level 3: 1592, Level 4: 1690, Level 5: 2304;
7500 in all), 1592 + 1690 + 2304 = 5586 problems: the paper's number. ``EleutherAI/hendrycks_math``
(seven per-subject configs) holds the same 7500 problems and would give the same count, at the cost
of seven downloads. The count is re-checked on the real data every time it is prepared.

Nothing here imports verl, vLLM or torch; the HF ``datasets`` package is imported only by the
default loader, so tests and the light install can prepare data from fixtures.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pyarrow as pa
import pyarrow.parquet as pq

from coolsampler.spec.settings import TASKS
from coolsampler.worker.rewards import last_boxed

log = logging.getLogger(__name__)

MANIFEST_VERSION: Final = 1

GSM8K_INSTRUCTION: Final = 'Let\'s think step by step and output the final answer after "####".'
MATH_INSTRUCTION: Final = "Let's think step by step and output the final answer within \\boxed{}."
PROMPT_TEMPLATE_GSM8K: Final = "{question} " + GSM8K_INSTRUCTION
PROMPT_TEMPLATE_MATH: Final = "{question} " + MATH_INSTRUCTION

MATH_LEVELS: Final = ("Level 3", "Level 4", "Level 5")

# Loader(dataset_id, config, hf_split, cache_dir) -> the source rows, each a mapping in the HF schema.
Loader = Callable[[str, "str | None", str, Path], Iterable[Mapping[str, Any]]]


class DataError(RuntimeError):
    """Base class: the data could not be prepared as the paper describes."""


class DataUnavailableError(DataError):
    """The source dataset is neither reachable on the Hub nor in the local cache."""


class CountMismatchError(DataError):
    """The prepared split does not have the paper's number of problems."""


class _UseSpecCount:
    """Sentinel type: check the count against the split's paper number (the default)."""

    def __repr__(self) -> str:
        return "PAPER_COUNT"


PAPER_COUNT: Final = _UseSpecCount()


# --------------------------------------------------------------------------- answer extraction

_GSM8K_ANSWER = re.compile(r"#### (\-?[0-9\.\,]+)")


def gsm8k_ground_truth(answer: str) -> str:
    """The final number of a GSM8K reference answer, commas removed (verl's gsm8k preprocessing).

    verl's scorer compares the model's "#### <number>" (commas stripped) to this string exactly, so
    the two must be normalised the same way.
    """
    match = _GSM8K_ANSWER.search(answer)
    if match is None:
        raise DataError(f"GSM8K answer without a '#### <number>' line: {answer[-120:]!r}")
    return match.group(1).replace(",", "")


def math_ground_truth(solution: str) -> str:
    """The final answer of a MATH reference solution: its last boxed expression."""
    answer = last_boxed(solution)
    if answer is None:
        raise DataError(f"MATH solution without a \\boxed{{}} answer: {solution[-120:]!r}")
    return answer


# --------------------------------------------------------------------------- split specifications


@dataclass(frozen=True)
class SplitSpec:
    """Everything that defines one prepared split: where it comes from and how rows are built."""

    task: str
    split: str  # our file stem under <data_dir>/<task>/
    dataset_id: str  # HF hub id; also the verl data_source
    config: str | None
    hf_split: str
    expected: int  # the paper's count
    filter: str  # human-readable, recorded in the manifest
    prompt_template: str
    question_field: str
    keep: Callable[[Mapping[str, Any]], bool]
    ground_truth: Callable[[Mapping[str, Any]], str]
    extra_fields: tuple[str, ...]  # source fields copied into extra_info (besides split/index)


def _keep_all(_row: Mapping[str, Any]) -> bool:
    return True


def _keep_math_levels(row: Mapping[str, Any]) -> bool:
    return row.get("level") in MATH_LEVELS


def _gsm8k(split: str, expected: int) -> SplitSpec:
    """A GSM8K split (``main`` config): our file stem is the HF split's name."""
    return SplitSpec(
        task="gsm8k",
        split=split,
        dataset_id="openai/gsm8k",
        config="main",
        hf_split=split,
        expected=expected,
        filter="none",
        prompt_template=PROMPT_TEMPLATE_GSM8K,
        question_field="question",
        keep=_keep_all,
        ground_truth=lambda r: gsm8k_ground_truth(r["answer"]),
        extra_fields=("question", "answer"),
    )


SPLITS: Final[dict[tuple[str, str], SplitSpec]] = {
    ("gsm8k", "train"): _gsm8k("train", 7473),
    ("gsm8k", "test"): _gsm8k("test", 1319),
    ("math", "train_l3-5"): SplitSpec(
        task="math",
        split="train_l3-5",
        dataset_id="DigitalLearningGmbH/MATH-lighteval",
        config="default",
        hf_split="train",
        expected=5586,
        filter="level in ['Level 3', 'Level 4', 'Level 5']",
        prompt_template=PROMPT_TEMPLATE_MATH,
        question_field="problem",
        keep=_keep_math_levels,
        ground_truth=lambda r: math_ground_truth(r["solution"]),
        extra_fields=("problem", "level", "type"),
    ),
    ("math", "math500"): SplitSpec(
        task="math",
        split="math500",
        dataset_id="HuggingFaceH4/MATH-500",
        config=None,
        hf_split="test",
        expected=500,
        filter="none",
        prompt_template=PROMPT_TEMPLATE_MATH,
        question_field="problem",
        keep=_keep_all,
        ground_truth=lambda r: str(r["answer"]),
        extra_fields=("problem", "level", "subject", "unique_id"),
    ),
}

# The prepared tasks' splits, in the order (train, val) that coolsampler.spec.settings.TASKS names them
TASK_SPLITS: Final[dict[str, tuple[str, ...]]] = {
    task: (TASKS[task].train, TASKS[task].val) for task in dict.fromkeys(task for task, _ in SPLITS)
}


def get_spec(task: str, split: str) -> SplitSpec:
    """The spec of ``task``/``split``; a clear error names the valid pairs."""
    try:
        return SPLITS[(task, split)]
    except KeyError:
        valid = ", ".join(f"{t}/{s}" for t, s in SPLITS)
        raise DataError(f"unknown task/split {task}/{split}; known: {valid}") from None


def output_paths(data_dir: str | os.PathLike[str], task: str, split: str) -> tuple[Path, Path]:
    """(parquet, manifest) paths of a prepared split in the fixed layout."""
    get_spec(task, split)
    base = Path(data_dir) / task
    return base / f"{split}.parquet", base / f"{split}.manifest.json"


# --------------------------------------------------------------------------- loaders


def _unavailable_errors() -> tuple[type[BaseException], ...]:
    """Exception types that mean "could not reach the Hub / nothing cached".

    ``datasets`` reports both a dead network and an empty cache in offline mode as
    ``ConnectionError``; missing datasets as ``DatasetNotFoundError`` (a ``FileNotFoundError``);
    ``huggingface_hub`` HTTP failures as ``HfHubHTTPError``: all ``OSError`` subclasses. httpx
    transport errors are not, so they are added when httpx is importable.
    """
    errors: list[type[BaseException]] = [OSError]
    try:
        import httpx

        errors.append(httpx.HTTPError)
    except ImportError:  # pragma: no cover - httpx comes with huggingface_hub
        pass
    return tuple(errors)


def hf_loader(revision: str | None = None) -> Loader:
    """The default loader: ``datasets.load_dataset`` with the cache in ``cache_dir``.

    A connected machine downloads into ``cache_dir``; a machine without network reads the same
    ``cache_dir`` (set ``HF_HUB_OFFLINE=1`` to skip the network retries). ``revision`` pins a Hub
    commit for bit-for-bit reproducibility.
    """

    def load(dataset_id: str, config: str | None, hf_split: str, cache_dir: Path) -> Any:
        import datasets

        return datasets.load_dataset(dataset_id, config, split=hf_split, cache_dir=str(cache_dir), revision=revision)

    return load


def jsonl_loader(root: str | os.PathLike[str]) -> Loader:
    """A loader reading ``<root>/<owner>__<name>/<config or 'default'>/<hf_split>.jsonl``.

    For tests and for air-gapped machines that received the rows as JSON lines; a missing file is
    reported like an unreachable Hub (``FileNotFoundError``).
    """
    root_path = Path(root)

    def load(dataset_id: str, config: str | None, hf_split: str, cache_dir: Path) -> list[dict[str, Any]]:
        path = root_path / dataset_id.replace("/", "__") / (config or "default") / f"{hf_split}.jsonl"
        with path.open(encoding="utf-8") as fh:
            return [json.loads(line) for line in fh if line.strip()]

    return load


def _source_identity(rows: Any, revision: str | None) -> dict[str, str | None]:
    """Revision and fingerprint of a loaded HF dataset, where it exposes them.

    The cache path of a Hub dataset ends in ``.../<version>/<commit sha>/<file>.arrow``; the commit
    sha is the revision actually read, which is what a reader of the manifest needs.
    """
    fingerprint = getattr(rows, "_fingerprint", None)
    found = revision
    if found is None:
        for entry in getattr(rows, "cache_files", None) or []:
            parent = Path(str(entry.get("filename", ""))).parent.name
            if re.fullmatch(r"[0-9a-f]{7,64}", parent):
                found = parent
                break
    return {"revision": found, "fingerprint": str(fingerprint) if fingerprint is not None else None}


# --------------------------------------------------------------------------- row building

_PROMPT_TYPE = pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))
_REWARD_TYPE = pa.struct([("style", pa.string()), ("ground_truth", pa.string())])


def render_prompt(template: str, question: str) -> str:
    """Fill ``{question}`` in a prompt template.

    Plain replacement, not ``str.format``: the MATH instruction contains a literal ``\\boxed{}``.
    """
    return template.replace("{question}", question)


def build_rows(spec: SplitSpec, source_rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """verl rows for ``spec`` from the source rows: filter, prompt, ground truth, extra_info.

    ``extra_info.index`` counts the kept rows (0..n-1), as verl's preprocess scripts do.
    """
    out: list[dict[str, Any]] = []
    for row in source_rows:
        if not spec.keep(row):
            continue
        question = str(row[spec.question_field])
        extra: dict[str, Any] = {"split": spec.split, "index": len(out)}
        for field in spec.extra_fields:
            value = row.get(field)
            extra[field] = None if value is None else str(value)
        out.append(
            {
                "data_source": spec.dataset_id,
                "prompt": [{"role": "user", "content": render_prompt(spec.prompt_template, question)}],
                "ability": "math",
                "reward_model": {"style": "rule", "ground_truth": spec.ground_truth(row)},
                "extra_info": extra,
            }
        )
    return out


def _schema(spec: SplitSpec) -> pa.Schema:
    extra = pa.struct([("split", pa.string()), ("index", pa.int64())] + [(f, pa.string()) for f in spec.extra_fields])
    return pa.schema(
        [
            ("data_source", pa.string()),
            ("prompt", _PROMPT_TYPE),
            ("ability", pa.string()),
            ("reward_model", _REWARD_TYPE),
            ("extra_info", extra),
        ]
    )


def sha256_file(path: str | os.PathLike[str]) -> str:
    """Hex sha256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    """Write via a temporary file in the same directory, so a crash never leaves a half file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _write_manifest(path: Path, manifest: Mapping[str, Any]) -> None:
    text = json.dumps(manifest, indent=2, sort_keys=True) + "\n"
    _atomic_write(path, lambda p: p.write_text(text, encoding="utf-8"))


# --------------------------------------------------------------------------- preparation


def load_source(
    dataset_id: str, config: str | None, hf_split: str, cache_dir: str | os.PathLike[str], loader: Loader
) -> Iterable[Mapping[str, Any]]:
    """The source rows of a dataset's split; an unreachable, uncached one raises ``DataUnavailableError``."""
    cache = Path(cache_dir)
    try:
        return loader(dataset_id, config, hf_split, cache)
    except _unavailable_errors() as exc:
        raise DataUnavailableError(
            f"cannot load dataset {dataset_id!r} (config {config!r}, split {hf_split!r}): "
            f"the Hugging Face Hub is not reachable and no cached copy was found in cache dir "
            f"{str(cache.resolve())!r} ({type(exc).__name__}: {exc}). Prepare the data on a machine with "
            f"network access using the same cache dir (snakemake prepare_data), then copy that cache dir "
            f"(or the prepared parquet files) here; set HF_HUB_OFFLINE=1 to read the cache without retries."
        ) from exc


def prepare_split(
    task: str,
    split: str,
    data_dir: str | os.PathLike[str],
    cache_dir: str | os.PathLike[str],
    *,
    loader: Loader | None = None,
    expected: int | None | _UseSpecCount = PAPER_COUNT,
    revision: str | None = None,
) -> dict[str, Any]:
    """Prepare ``<data_dir>/<task>/<split>.parquet`` and its manifest; return the manifest.

    ``loader`` defaults to ``hf_loader(revision)``; tests inject ``jsonl_loader``. ``expected``
    defaults to the paper's count; ``None`` disables the check (fixtures), an int replaces it. The
    count is checked before anything is written, so a wrong dataset never leaves an output behind.
    """
    spec = get_spec(task, split)
    parquet_path, manifest_path = output_paths(data_dir, task, split)
    source = load_source(
        spec.dataset_id, spec.config, spec.hf_split, cache_dir, loader if loader is not None else hf_loader(revision)
    )
    rows = build_rows(spec, source)

    want = spec.expected if isinstance(expected, _UseSpecCount) else expected
    if want is not None and len(rows) != want:
        raise CountMismatchError(
            f"{task}/{split}: {len(rows)} problems from {spec.dataset_id!r} ({spec.config}, {spec.hf_split}, "
            f"filter: {spec.filter}), expected {want}. The source changed or the filter is wrong; "
            f"pin a revision or pass expected=None deliberately."
        )
    if not rows:
        raise DataError(f"{task}/{split}: no rows after filtering ({spec.filter})")

    table = pa.Table.from_pylist(rows, schema=_schema(spec))
    _atomic_write(parquet_path, lambda p: pq.write_table(table, p))

    manifest: dict[str, Any] = {
        "manifest_version": MANIFEST_VERSION,
        "task": task,
        "split": split,
        "source": {
            "dataset_id": spec.dataset_id,
            "config": spec.config,
            "hf_split": spec.hf_split,
            **_source_identity(source, revision),
        },
        "data_source": spec.dataset_id,
        "filter": spec.filter,
        "count": len(rows),
        "expected_count": want,
        "prompt_template": spec.prompt_template,
        "parquet": parquet_path.name,
        "sha256": sha256_file(parquet_path),
        "columns": table.schema.names,
    }
    _write_manifest(manifest_path, manifest)
    log.info("prepared %s/%s: %d rows -> %s", task, split, len(rows), parquet_path)
    return manifest


def prepare_task(
    task: str,
    data_dir: str | os.PathLike[str],
    cache_dir: str | os.PathLike[str],
    *,
    loader: Loader | None = None,
    revision: str | None = None,
) -> list[dict[str, Any]]:
    """Prepare every split of ``task`` at the paper's counts; return their manifests."""
    if task not in TASK_SPLITS:
        raise DataError(f"unknown task {task!r}; known: {', '.join(TASK_SPLITS)}")
    return [
        prepare_split(task, split, data_dir, cache_dir, loader=loader, revision=revision) for split in TASK_SPLITS[task]
    ]


def verify_manifest(manifest_path: str | os.PathLike[str]) -> dict[str, Any]:
    """Re-hash the parquet a manifest names and raise ``DataError`` if it changed since preparation."""
    path = Path(manifest_path)
    manifest = json.loads(path.read_text(encoding="utf-8"))
    parquet = path.parent / manifest["parquet"]
    actual = sha256_file(parquet)
    if actual != manifest["sha256"]:
        raise DataError(f"{parquet} changed since it was prepared: sha256 {actual} != {manifest['sha256']}")
    return manifest


# --------------------------------------------------------------------------- a study's own hub tasks

# What verl's RLHFDataset and reward managers read of every row (its own examples write these).
VERL_COLUMNS: Final = ("prompt", "data_source", "reward_model")


def prepare_hub_split(
    hub: Mapping[str, str],
    which: str,
    parquet: str | os.PathLike[str],
    cache_dir: str | os.PathLike[str],
    loader: Loader | None = None,
) -> dict[str, Any]:
    """A study task's split (``which``: ``train`` or ``val``) from a Hub dataset already in verl's format
    (``hub``: ``{dataset, revision, config?, train, val}``, the split names) into ``parquet``, with a
    manifest beside it. Rows are taken as they are; missing verl columns are an error naming them."""
    out = Path(parquet)
    rows = load_source(
        hub["dataset"],
        hub.get("config"),
        hub[which],
        cache_dir,
        loader if loader is not None else hf_loader(hub["revision"]),
    )
    table = (
        rows.data.table if hasattr(rows, "data") and hasattr(rows.data, "table") else pa.Table.from_pylist(list(rows))
    )
    missing = [c for c in VERL_COLUMNS if c not in table.column_names]
    if missing:
        raise DataError(
            f"{hub['dataset']} split {hub[which]}: no column {', '.join(missing)}; verl needs {VERL_COLUMNS}"
        )
    _atomic_write(out, lambda p: pq.write_table(table, p))
    manifest = {
        "manifest_version": MANIFEST_VERSION,
        "source": {
            "dataset": hub["dataset"],
            "config": hub.get("config"),
            "split": hub[which],
            "revision": hub["revision"],
        },
        "count": table.num_rows,
        "parquet": out.name,
        "sha256": sha256_file(out),
    }
    _write_manifest(out.with_suffix(".manifest.json"), manifest)
    return manifest
