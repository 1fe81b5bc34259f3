"""Where a study's files live, and the way back from a run directory to its run key: one owner for both.

Why in ``spec``: every layer writes or reads run directories (the rules and the job write them, the
analysis, the figures, the claims report and the CLI read them), and ``spec`` is the one layer all of
them may import; were the scheme kept in ``train``, results/, paper/ and cli/ would each spell
``runs/<model>/<task>/<settings>`` again. ``coolsampler.train.paths`` re-exports it beside the paths
verl is given. The scheme is documented once, in the Snakefile's header (tests/spec/test_layout.py
holds that header to the functions here).

Two forms of one scheme: ``Layout`` gives the concrete paths (scripts, the CLI, the analysis), and
``run_pattern`` the same paths with Snakemake's wildcards for the rules, built by ``Layout`` itself so
that a rule's output and the path a script computes for it cannot disagree.

Nothing here touches the file system; no verl, vLLM or torch.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from coolsampler.spec.settings import MODELS, TASKS, Model, Task

SHARED = "results"
SMOKE_STUDY = "config/config.yaml"  # the study Snakemake and the CLI use when none is named
REHEARSAL_DIR = "rehearsal"
REHEARSAL_MODEL = "toy-qwen2-rehearsal"  # the rehearsal's stand-in for every model (coolsampler.train.rehearsal)
# Committed fingerprints of a study's deterministic artefacts, one file per CPU family they were measured on
# (coolsampler.results.fingerprint; `coolsampler fingerprint`): FINGERPRINTS/<study name>/<family slug>.json
FINGERPRINTS = "config/fingerprints"
RUN_FILES = ("run.yaml", "train.jsonl", "train.log", "train.benchmark.tsv", "metrics.parquet", "status.json")


# The installed package (workflow/coolsampler): no study's results may go inside it.
PACKAGE = Path(__file__).resolve().parents[1]
NAME_MAX = 255  # bytes in one path component where the file system does not say (Linux, macOS, Windows)

RUNS = "runs"  # R/runs/<run key>: one directory per run
KEY_PARTS = 3  # a run key is <model>/<task>/<settings> (coolsampler.spec.study.Run.key)
RUN_GLOB = "/".join([RUNS] + ["*"] * KEY_PARTS)  # every run directory below R


# Snakemake's wildcards for a result root (R, or one of its rehearsal's) and a run key: the names the
# rules' wildcard_constraints and their helpers (workflow/rules/common.smk: root_of, run_of) read.
ROOT_WILDCARD = "{root}"
KEY_WILDCARD = "{key}"


def run_pattern(name: str | None = None) -> str:
    """The rules' wildcard pattern of every run directory (``{root}/runs/{key}``), or of the file
    ``name`` in each (``{root}/runs/{key}/<name>``; ``name`` may hold wildcards of its own). It is
    ``Layout.run_dir``/``Layout.run_file`` with the wildcards in place of R and the key."""
    layout = Layout(ROOT_WILDCARD)
    return layout.run_file(KEY_WILDCARD, name) if name else layout.run_dir(KEY_WILDCARD)


def key_of(run_dir: str | Path) -> str:
    """The run key of a run directory (``.../runs/<model>/<task>/<settings>``): its last ``KEY_PARTS``
    parts. The inverse of ``Layout.run_dir``; it reads the path only, so a run copied anywhere keeps its key."""
    return "/".join(Path(run_dir).parts[-KEY_PARTS:])


def key_of_file(path: str | Path) -> str:
    """The run key of a file in a run directory (``.../runs/<key>/metrics.parquet``)."""
    return key_of(Path(path).parent)


_VAR = re.compile(r"\$(?:\{(?P<braced>[^}]*)\}|(?P<bare>[A-Za-z_][A-Za-z0-9_]*))")


def name_max(near: str | Path = ".") -> int:
    """The longest file name (bytes) the file system holding ``near`` (or its nearest existing parent)
    takes: ``os.pathconf``'s PC_NAME_MAX where it answers, else ``NAME_MAX``."""
    p = Path(near).absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        return int(os.pathconf(p, "PC_NAME_MAX"))
    except (AttributeError, OSError, ValueError):
        return NAME_MAX


def long_component(path: str | Path, limit: int | None = None) -> str | None:
    """The first component of ``path`` longer (in bytes) than the file system takes, or None."""
    limit = name_max(path) if limit is None else limit
    return next((c for c in Path(path).parts if len(os.fsencode(c)) > limit), None)


def expand_results(value: str) -> str:
    """A results path as the shell would expand it: ``~`` and ``~user`` first, then ``$VAR`` and
    ``${VAR}``. ValueError (one line) for a variable that is not set or a ``~user`` with no home:
    left as written, either would become a literal folder of that name, beside the one meant, and
    every run in it would be trained again."""
    out = os.path.expanduser(value)
    if out.startswith("~"):
        user = out[1:].split("/", 1)[0]
        raise ValueError(f"{value!r}: ~{user} names no user's home folder; allowed: ~, ~/path or an existing user")
    for m in _VAR.finditer(out):
        name = m["braced"] if m["braced"] is not None else m["bare"]
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name or ""):
            raise ValueError(f"{value!r}: {m[0]} is not a variable the shell expands; allowed: $NAME or ${{NAME}}")
        if name not in os.environ:
            raise ValueError(f"{value!r}: the environment variable {name} is not set; set it or write the path")
    return os.path.expandvars(out)


def check_results(results: str | Path, config: dict[str, Any] | None = None) -> None:
    """Refuse a results folder no study may have, with a one-line ValueError: an empty path, one inside
    the installed package (``PACKAGE``: a reinstall or ``git clean`` removes it), one inside the shared
    data, models or build folder (``Layout.data`` ...: the rules write and replace those for every
    study), or one with a name longer than the file system takes (every run would fail on its first
    write, after its data and model were prepared)."""
    text = str(results)
    if not text.strip():
        raise ValueError("empty; allowed: a folder path, e.g. results/<study name>")
    if (long := long_component(text)) is not None:
        raise ValueError(
            f"the name {long[:40]!r}... is {len(os.fsencode(long))} bytes; allowed: names of at most"
            f" {name_max(text)} bytes (the file system's limit)"
        )
    where = Path(text).resolve()
    layout = Layout.from_config(config or {}, text)
    inside = {"the installed package": PACKAGE}
    inside |= {f"the shared {what} folder": Path(p).resolve() for what, p in
               (("data", layout.data), ("models", layout.models), ("build", layout.build))}  # fmt: skip
    for what, folder in inside.items():
        if where == folder or folder in where.parents:
            raise ValueError(
                f"{text!r} is inside {what} ({folder}); allowed: a folder of its own, e.g. results/<study name>"
            )


@dataclass(frozen=True)
class Layout:
    """Where one study's files go. ``rehearsal`` = the study's rehearsal: its own results below R, and
    the rehearsal's model and data in place of every model and task data set."""

    results: str  # R
    shared: str = SHARED  # S
    data_dir: str | None = None  # D (default S/data)
    rehearsal: bool = False
    models_dir: str | None = None  # M (default S/models): generated and prefetched models

    @classmethod
    def from_config(cls, config: dict[str, Any], results: str | Path) -> Layout:
        return cls(
            str(results),
            SHARED,
            str(config["data_dir"]) if config.get("data_dir") else None,
            models_dir=str(config["models_dir"]) if config.get("models_dir") else None,
        )

    def rehearsal_layout(self, shape: str | None = None) -> Layout:
        """The rehearsal's results below R (a shape of it, e.g. the two-rank one, below those)."""
        below = f"{REHEARSAL_DIR}/{shape}" if shape else REHEARSAL_DIR
        return Layout(f"{self.results}/{below}", self.shared, self.data_dir, True, self.models_dir)

    @property
    def models(self) -> str:
        return self.models_dir or f"{self.shared}/models"

    @property
    def data(self) -> str:
        return self.data_dir or f"{self.shared}/data"

    @property
    def build(self) -> str:
        return f"{self.shared}/build"

    @property
    def runs(self) -> str:
        """The directory holding every run directory of R (``R/runs``)."""
        return f"{self.results}/{RUNS}"

    def run_dir(self, key: str) -> str:
        return f"{self.runs}/{key}"

    def run_glob(self, name: str | None = None) -> str:
        """A glob of every run directory below R, or of the file ``name`` in each."""
        return f"{self.results}/{RUN_GLOB}" + (f"/{name}" if name else "")

    def run_file(self, key: str, name: str) -> str:
        return f"{self.run_dir(key)}/{name}"

    def target(self, name: str, ext: str) -> str:
        return f"{self.results}/{name}.{ext}"

    def model_name(self, model: str) -> str:
        return REHEARSAL_MODEL if self.rehearsal else model

    def model_dir(self, model: str) -> str:
        return f"{self.models}/{model}"

    def prefetch_dir(self, hf_id: str, revision: str) -> str:
        """Where rule prefetch_model puts a hub model at a pinned revision (M/hub/<org>/<name>/<revision>)."""
        return f"{self.models}/hub/{hf_id}/{revision}"

    def _model(self, model: str | Model) -> tuple[str, Model | None]:
        """(name, definition) of the model a run loads; the rehearsal's stand-in has no definition here."""
        name = self.model_name(model if isinstance(model, str) else model.name)
        if name == REHEARSAL_MODEL:
            return name, None
        return name, MODELS[name] if isinstance(model, str) else model

    def model_weights(self, model: str | Model) -> str | None:
        """The local file a run depends on: a generated model's weights, a prefetched model's manifest
        (rule prefetch_model), a local model's config.json (weights of a generated model's directory);
        None for a hub model without a pinned revision (fetched by verl)."""
        name, m = self._model(model)
        if m is None or m.source == "generated":
            return f"{self.model_dir(name)}/model.safetensors"
        if m.path is not None:
            generated = {self.model_dir(k) for k, v in MODELS.items() if v.source == "generated"}
            made = Path(m.path).as_posix().rstrip("/") in generated
            return f"{m.path.rstrip('/')}/{'model.safetensors' if made else 'config.json'}"
        if m.revision is not None:
            return f"{self.prefetch_dir(m.source, m.revision)}/prefetch.json"
        return None

    def model_path(self, model: str | Model) -> str:
        """What verl loads: a local directory (generated, local or prefetched models) or the hub id."""
        name, m = self._model(model)
        if m is None or m.source == "generated":
            return self.model_dir(name)
        if m.path is not None:
            return m.path.rstrip("/")
        if m.revision is not None:
            return self.prefetch_dir(m.source, m.revision)
        return m.source

    def task_data(self, task: str, split: str) -> str:
        base = f"{self.data}/{REHEARSAL_DIR}" if self.rehearsal else self.data
        return f"{base}/{task}/{split}.parquet"

    def data_files(self, task: str | Task) -> dict[str, str]:
        """A task's train and val parquet: the files a study task names, else D/<task>/<split>.parquet."""
        t = TASKS[task] if isinstance(task, str) else task
        if t.train_file is not None and t.val_file is not None and not self.rehearsal:
            return {"train": t.train_file, "val": t.val_file}
        return {"train": self.task_data(t.name, t.train), "val": self.task_data(t.name, t.val)}
