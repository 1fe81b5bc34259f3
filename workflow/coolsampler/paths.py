"""The result-path scheme, in code and in one place: the rules (common.smk, data.smk, toy.smk), the CLI and
the rehearsal call this. The scheme is documented once, in the Snakefile's header.

Nothing here touches the file system except ``resolve`` in ``run_paths``; no verl, vLLM or torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from coolsampler.settings import MODELS, TASKS

SHARED = "results"
REHEARSAL_DIR = "rehearsal"
REHEARSAL_MODEL = "toy-qwen2-rehearsal"  # the rehearsal's stand-in for every model (coolsampler.rehearsal)
RUN_FILES = ("run.yaml", "train.jsonl", "train.log", "train.benchmark.tsv", "metrics.parquet", "status.json")


@dataclass(frozen=True)
class Layout:
    """Where one study's files go. ``rehearsal`` = the study's rehearsal: its own results below R, and
    the rehearsal's model and data in place of every model and task data set."""

    results: str  # R
    shared: str = SHARED  # S
    data_dir: str | None = None  # D (default S/data)
    rehearsal: bool = False

    @classmethod
    def from_config(cls, config: dict[str, Any], results: str | Path) -> Layout:
        return cls(str(results), SHARED, str(config["data_dir"]) if config.get("data_dir") else None)

    def rehearsal_layout(self) -> Layout:
        return Layout(f"{self.results}/{REHEARSAL_DIR}", self.shared, self.data_dir, rehearsal=True)

    @property
    def data(self) -> str:
        return self.data_dir or f"{self.shared}/data"

    @property
    def build(self) -> str:
        return f"{self.shared}/build"

    def run_dir(self, key: str) -> str:
        return f"{self.results}/runs/{key}"

    def run_file(self, key: str, name: str) -> str:
        return f"{self.run_dir(key)}/{name}"

    def target(self, name: str, ext: str) -> str:
        return f"{self.results}/{name}.{ext}"

    def model_name(self, model: str) -> str:
        return REHEARSAL_MODEL if self.rehearsal else model

    def model_dir(self, model: str) -> str:
        return f"{self.shared}/models/{model}"

    def model_weights(self, model: str) -> str | None:
        """The generated model's weights file a run depends on, or None for a hub model (fetched by verl)."""
        name = self.model_name(model)
        if name == REHEARSAL_MODEL or MODELS[name].source == "generated":
            return f"{self.model_dir(name)}/model.safetensors"
        return None

    def model_path(self, model: str) -> str:
        """What verl loads: a local directory (generated models) or the hub id."""
        name = self.model_name(model)
        return self.model_dir(name) if self.model_weights(model) else MODELS[name].source

    def task_data(self, task: str, split: str) -> str:
        base = f"{self.data}/{REHEARSAL_DIR}" if self.rehearsal else self.data
        return f"{base}/{task}/{split}.parquet"

    def data_files(self, task: str) -> dict[str, str]:
        t = TASKS[task]
        return {"train": self.task_data(task, t.train), "val": self.task_data(task, t.val)}


def run_paths(layout: Layout, run: Any):
    """The absolute paths rule train gives verl for ``run`` (``coolsampler.overrides.RunPaths``)."""
    from coolsampler.overrides import RunPaths

    files = layout.data_files(run.task)
    model = layout.model_path(run.model)
    return RunPaths(
        model=str(Path(model).resolve()) if layout.model_weights(run.model) else model,
        train=str(Path(files["train"]).resolve()),
        val=str(Path(files["val"]).resolve()),
        out_dir=str(Path(layout.run_dir(run.key)).resolve()),
    )


__all__ = ["Layout", "REHEARSAL_MODEL", "RUN_FILES", "SHARED", "run_paths"]
