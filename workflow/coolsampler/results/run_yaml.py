"""A run's ``run.yaml`` read as the settings of one run, by the study's own rules.

The training job writes it (``settings:`` under its header); a researcher writes one by hand beside a log
of their own (``N: 32``, ``Tb: 1.0``, ``steps: 300``). Either way it is the weakest input the tools read:
anything YAML can hold may be in it. So every value a study would check is checked by the function
``coolsampler runs --study`` applies (``coolsampler.spec.validate.check_study``), on a one-run study made
of those values, so that a value is refused or accepted the same way in both places and told in the same
words. Anything else is an ``InputError`` naming the file and the key (or the line, for YAML that does
not parse).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from coolsampler.spec.inputs import InputError

RUN_YAML = "run.yaml"

# The settings of a run a study checks (validate.RUN_FIELDS, and the guard); the rest of a run.yaml (its
# key, the derived Tb_kind, the sampling seed, the header) is the pipeline's record, not checked here.
CHECKED = ("model", "task", "N", "lr", "correction", "Tb", "Tl", "seed", "steps", "val_every", "replicate", "guard")

# The most nodes a checked value may hold: a sampler-temperature controller or a refresh schedule is a few
# dozen; YAML's aliases could make one value a billion (each alias one more walk of the same node).
MAX_NODES = 10_000


def _bounded(value: Any, where: str, file: Path) -> None:
    """Refuse a value that is cyclic (a YAML anchor holding itself) or too large to check, before any
    recursive check walks it."""
    count = 0
    stack: list[tuple[Any, frozenset[int]]] = [(value, frozenset())]
    while stack:
        node, seen = stack.pop()
        count += 1
        if count > MAX_NODES:
            raise InputError(file, f"more than {MAX_NODES} values; allowed: one run's setting", where)
        if isinstance(node, (dict, list)):
            if id(node) in seen:
                raise InputError(file, "refers to itself (a YAML anchor inside its own alias)", where)
            inner = seen | {id(node)}
            stack.extend((v, inner) for v in (node.values() if isinstance(node, dict) else node))


def _yaml_where(err: yaml.YAMLError) -> int | None:
    mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
    return None if mark is None else mark.line + 1


def run_yaml_document(path: str | Path) -> Mapping[str, Any]:
    """A ``run.yaml`` as its whole document (its ``settings:`` and the pipeline's record beside them, such
    as ``platform:``), the file's shape checked as ``load_run_yaml`` checks it: ``InputError`` for a file
    that cannot be read, YAML that does not parse, or a document that is not a mapping."""
    file = Path(path)
    if file.is_dir():
        raise InputError(file, "a directory; expected a YAML file of the run's settings (N: 32, Tb: 1.0, ...)")
    try:
        text = file.read_bytes().decode("utf-8-sig")
    except OSError as e:
        raise InputError(file, f"cannot be read ({e.strerror or e})") from None
    except UnicodeDecodeError:
        raise InputError(file, "not UTF-8; save it as UTF-8") from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:  # a syntax error, or a tag safe_load will not construct
        problem = " ".join(str(getattr(e, "problem", None) or e).split())
        raise InputError(file, f"not valid YAML: {problem}", _yaml_where(e)) from None
    if doc is None:
        return {}
    if not isinstance(doc, Mapping):
        raise InputError(file, f"a {type(doc).__name__}; expected a mapping of the run's settings (N: 32, Tb: 1.0)")
    return doc


def load_run_yaml(path: str | Path) -> dict[str, Any]:
    """The settings a ``run.yaml`` holds (under ``settings:``, or at its top level when written by hand),
    each value a study checks checked by the study's rules. Raises ``InputError`` for a file that cannot
    be read, YAML that does not parse, a shape that is not a mapping of settings, or a refused value."""
    file = Path(path)
    doc = run_yaml_document(file)
    if not doc:
        return {}
    settings = doc.get("settings", doc) if "settings" in doc else doc
    if not isinstance(settings, Mapping):
        shown = "null" if settings is None else f"a {type(settings).__name__}"
        raise InputError(file, f"{shown}; expected a mapping of the run's settings", "settings")
    for key in CHECKED:
        if key in settings:
            _bounded(settings[key], key, file)
    if (bad := settings_problem(settings)) is not None:
        raise InputError(file, bad[1], bad[0])
    return {str(k): v for k, v in settings.items()}


def settings_problem(settings: Mapping[str, Any]) -> tuple[str, str] | None:
    """The first of a run's settings the study's rules refuse, as (key, problem), or None: the check
    ``coolsampler runs --study`` makes of a run, on a one-run study of the settings it checks. A list
    is refused first: a study expands it into runs, and these are one run's settings."""
    from coolsampler.spec.validate import StudyError, check_study

    checked = {k: settings[k] for k in CHECKED if k in settings}
    for key, value in checked.items():
        if isinstance(value, list):
            return key, f"a list {value!r}; allowed: one value (one run's setting)"
    try:
        check_study({"name": "run-settings", "runs": [checked]}, "settings")
    except StudyError as e:
        where, _, problem = str(e).removeprefix("settings: runs[0].").partition(": ")
        return where, problem
    return None
