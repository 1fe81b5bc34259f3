"""The paths rule train gives verl. The result-path scheme itself (``Layout``, ``key_of``) is
``coolsampler.spec.layout``, which every layer may import; it is re-exported here for the rules
(common.smk, data.smk, toy.smk), the CLI and the rehearsal.

Nothing here touches the file system except ``resolve`` in ``run_paths``; no verl, vLLM or torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from coolsampler.spec.layout import (
    FINGERPRINTS,
    REHEARSAL_MODEL,
    SMOKE_STUDY,
    Layout,
    key_of,
    run_pattern,
)


@dataclass(frozen=True)
class RunPaths:
    """Where a run reads and writes: the files verl is given (``coolsampler.train.overrides``)."""

    model: str  # HF id or local directory
    train: str
    val: str
    out_dir: str  # the run directory: checkpoints, verl's JSONL


def run_paths(layout: Layout, run: Any) -> RunPaths:
    """The absolute paths rule train gives verl for ``run``."""
    files = layout.data_files(run.task_info)
    model = layout.model_path(run.model_info)
    return RunPaths(
        model=str(Path(model).resolve()) if layout.model_weights(run.model_info) else model,
        train=str(Path(files["train"]).resolve()),
        val=str(Path(files["val"]).resolve()),
        out_dir=str(Path(layout.run_dir(run.key)).resolve()),
    )


__all__ = [
    "FINGERPRINTS",
    "Layout",
    "REHEARSAL_MODEL",
    "SMOKE_STUDY",
    "RunPaths",
    "key_of",
    "run_paths",
    "run_pattern",
]
