"""When a training run trains again: by content, never by file times or Snakemake's metadata.

Why: results travel (a ``git clone`` on a new machine, ``cp`` or ``rsync`` of ``results/``, a branch
switch), and every one of those changes file times; Snakemake's metadata (``.snakemake/``) is often
left behind. A 300-step paper run costs hours of four GPUs, so a run must train again exactly when
something that changes its result changed:

* its settings: they are its key, i.e. its directory (``coolsampler.spec.study``);
* the patched verl: the wheel's name carries the patches' hash (``workflow/scripts/build_verl.py``),
  so a changed patch is a wheel that does not exist yet, which rule ``train`` needs;
* the training-side code, the study's recipe and the platform: together the *training key* below,
  recorded in each run's ``run.yaml`` when it finishes. A run whose recorded key differs from the
  current one gets the inputs ``key-changed-<key>.json`` (written when the DAG is built: newer than
  the run, so Snakemake reruns it) and ``set-aside-<key>.json`` (rule ``supersede``, which sets its
  stale checkpoints aside, so it trains from step 0 instead of resuming a run of other code).

Everything else that rule ``train`` reads is ``ancient()``: present is enough. The training-side code
is one list, ``coolsampler.train.container.image_sources``: what the training image is built from (the
package modules verl's workers import, found by walking their imports, the image definition, its
lock and ``pyproject.toml``). Light: hashing files only, no verl, vLLM or torch.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from coolsampler.spec.source import code_content
from coolsampler.train.container import image_sources

KEY_FIELD = "training_key"  # where run.yaml records it
KEY_LEN = 12
KEY_RE = rf"[0-9a-f]{{{KEY_LEN}}}"
SUPERSEDED_DIR = "superseded"
# what a run directory holds that a resumed run would pick up: set aside when its key changes
STALE_STATE = ("checkpoints", "attempts")


def _content(path: Path) -> bytes:
    """What of a file can change a run's result. For Python code its syntax tree without docstrings
    (``coolsampler.spec.source.code_content``): a comment or docstring edit retrains nothing, a code
    edit retrains every run whose image holds the module. Of ``pyproject.toml`` only the package's own
    table counts (its name, version and dependencies): its tool settings (pytest, ruff) are not
    training code. Any other file counts byte for byte."""
    if path.name == "pyproject.toml":
        import tomllib

        return json.dumps(tomllib.loads(path.read_text()).get("project", {}), sort_keys=True).encode()
    return code_content(path)


def file_digests(repo: str | Path, files: Iterable[str]) -> dict[str, str]:
    """Repository-relative path -> sha256 of its content (the files' times play no part)."""
    repo = Path(repo)
    return {f: hashlib.sha256(_content(repo / f)).hexdigest() for f in sorted(files)}


def code_files(repo: str | Path, engine: str | None = None) -> list[str]:
    """The training-side code: what the image is built from (coolsampler.train.container.image_sources)."""
    return image_sources(repo, engine)


def digest_of(obj: Any) -> str:
    """A short content hash of a JSON-able record (sorted keys: the same record, the same hash)."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:KEY_LEN]


def training_key(
    *,
    verl: str,
    recipe: Mapping[str, Any] | None,
    platform: str,
    code: Mapping[str, str],
    numerics: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The record of what, besides a run's settings, decides its result; ``key`` is its hash.

    ``verl``: the patched wheel's version (patch hash); ``recipe``: the study's ``recipe:`` block;
    ``platform``: gpu or cpu; ``code``: ``file_digests`` of ``code_files``; ``numerics``: the pinned
    numeric environment the platform trains under (``coolsampler.spec.numerics.PINNED_ENV``; empty where
    nothing is pinned): another kernel path is another result. Paths are relative and nothing depends on
    where the repository lives or when its files were written.
    """
    parts = {
        "verl": verl,
        "recipe": dict(recipe or {}),
        "platform": platform,
        "code": digest_of(dict(code)),
        "numerics": dict(numerics or {}),
    }
    return {"key": digest_of(parts), **parts}


class KeyRecord(Mapping[str, Any]):
    """A training key as a rule parameter that Snakemake does not record (it records only built-in
    types): the key is compared through run.yaml, and a new parameter in the metadata would make
    every run trained before it train again."""

    def __init__(self, record: Mapping[str, Any]) -> None:
        self._record = dict(record)

    def __getitem__(self, name: str) -> Any:
        return self._record[name]

    def __iter__(self):  # noqa: ANN204 - Mapping protocol
        return iter(self._record)

    def __len__(self) -> int:
        return len(self._record)

    def __repr__(self) -> str:
        return f"KeyRecord({self._record.get('key')})"


def recorded_key(run_yaml: str | Path) -> str | None:
    """The training key a finished run recorded in its run.yaml; None when it has none (not finished,
    or trained before keys were recorded: such a run counts as current)."""
    import yaml

    p = Path(run_yaml)
    if not p.is_file():
        return None
    try:
        data = yaml.safe_load(p.read_text()) or {}
    except yaml.YAMLError:
        return None
    entry = data.get(KEY_FIELD) if isinstance(data, dict) else None
    return str(entry.get("key")) if isinstance(entry, dict) and entry.get("key") else None


def key_markers(run_dir: str | Path, key: str) -> dict[str, str]:
    """The two files of a run whose training key changed to ``key``: ``changed`` (a note written when
    the DAG is built, which makes rule ``train`` run) and ``set_aside`` (rule ``supersede``'s)."""
    return {"changed": f"{run_dir}/key-changed-{key}.json", "set_aside": f"{run_dir}/set-aside-{key}.json"}


def key_inputs(run_dir: str | Path, key: str) -> tuple[dict[str, str], bool]:
    """The extra inputs of rule ``train`` for a run, and whether its key changed (train it again).

    Snakemake reruns a job whose outputs exist only for an input newer than them (or a change its
    metadata records, which may be gone): so when run.yaml records another key, a note
    ``key-changed-<key>.json`` is written now (also by a dry run) and is such an input, together with
    ``set-aside-<key>.json`` (rule ``supersede``); the note is rewritten at each DAG build until the
    run has trained, so it is newer than the run's outputs however they were copied. Both stay inputs
    while the note exists, so the job's inputs do not change after it trained (metadata, where
    present, agrees); the caller marks them ancient() when ``changed`` is False.
    """
    markers = key_markers(run_dir, key)
    old = recorded_key(Path(run_dir) / "run.yaml")
    changed = old is not None and old != key
    note = Path(markers["changed"])
    if changed:  # (re)written at every DAG build until the run trained: always newer than its outputs
        note.write_text(json.dumps({"from": old, "to": key}, sort_keys=True) + "\n")
    if changed or note.exists():
        return markers, changed
    return {}, False


def set_aside(run_dir: str | Path, key: str, record: Mapping[str, Any]) -> dict[str, Any]:
    """Body of rule ``supersede``: move the stale state of a run whose key changed out of the way.

    ``checkpoints/`` and ``attempts/`` (what a restarted job would resume from) go to
    ``superseded/<old key>/``: renamed, not deleted, so nothing expensive is lost by a mistake.
    The markers of earlier keys are removed. Returns what it did (also written to its marker).
    """
    run_dir = Path(run_dir)
    old = recorded_key(run_dir / "run.yaml") or "unkeyed"
    dest = run_dir / SUPERSEDED_DIR / old
    moved = []
    for name in STALE_STATE:
        src = run_dir / name
        if src.exists():
            dest.mkdir(parents=True, exist_ok=True)
            target = dest / name
            if target.exists():
                shutil.rmtree(target)
            src.rename(target)
            moved.append(f"{name} -> {target.relative_to(run_dir)}")
    keep = set(key_markers(run_dir, key).values())
    for m in [*run_dir.glob("key-changed-*.json"), *run_dir.glob("set-aside-*.json")]:
        if str(m) not in keep:
            m.unlink()
    info = {"from": old, "to": key, "moved": moved, KEY_FIELD: dict(record)}
    Path(key_markers(run_dir, key)["set_aside"]).write_text(json.dumps(info, indent=1, sort_keys=True) + "\n")
    return info


def supersede_job(marker: str | Path, key: str, record: Mapping[str, Any], log: str | Path) -> None:
    """Rule ``supersede``: ``set_aside`` the run directory holding ``marker``, and log what it did."""
    info = set_aside(Path(marker).parent, key, record)
    Path(log).write_text(json.dumps(info, indent=1, sort_keys=True) + "\n")


def write_digests(path: str | Path, digests: Mapping[str, str], log: str | Path) -> None:
    """Rule ``image_inputs``: the content-addressed record of what the image is built from."""
    Path(path).write_text(json.dumps(dict(digests), indent=1, sort_keys=True) + "\n")
    Path(log).write_text(f"{len(digests)} entries -> {path}\n")
