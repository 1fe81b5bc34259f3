"""Study validation: the JSON schema, then the checks a schema cannot express.

Every failure is a ``StudyError`` whose message is one line naming the field and what is allowed,
raised before Snakemake builds a DAG, so a typo costs no GPU hours.

Imports only the spec layer and jsonschema (YAML through coolsampler.spec.yaml_file).
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Mapping
from functools import cache
from importlib import resources
from typing import Any

import jsonschema

from coolsampler.spec import corrections
from coolsampler.spec.guard import GuardSpec, check_guard_fits, check_schedule, check_signal_logged
from coolsampler.spec.layout import name_max
from coolsampler.spec.settings import MODELS, TASKS, Model, Task
from coolsampler.spec.targets import TARGETS, OptionError, panel_filters, target_options
from coolsampler.spec.temperature import KINDS as TEMPERATURE_KINDS
from coolsampler.spec.temperature import controller_spec
from coolsampler.spec.yaml_file import parse_yaml

# The settings a run has (and a figure filter may name): Run's fields, in the order of Table 4.
RUN_FIELDS = ("model", "task", "N", "lr", "correction", "Tb", "Tl", "seed", "steps", "val_every", "replicate")
# A setting a run may have besides those (and a figure filter may name, e.g. guard: null for the runs
# refreshed every N steps): its staleness guard; and how it is refreshed (Run.refresh: fixed, guard or
# schedule), derived from N and the guard.
REFRESH_FIELDS = ("guard", "refresh")
REFRESH_KINDS = ("fixed", "guard", "schedule")


class StudyError(ValueError):
    """A study config that must not start any job. The message is one line: field and what is allowed."""


def study_schema() -> dict[str, Any]:
    """The study schema, a run's ``correction`` choices and their descriptions filled from the registry
    (``coolsampler.spec.corrections``), so that a new correction is one entry there and the schema, its
    messages and the reference page follow. Shared: not to be edited by its callers."""
    return _study_schema(tuple((c.name, c.description) for c in corrections.corrections()))


@cache
def _study_schema(known: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    text = resources.files("coolsampler.spec").joinpath("schemas/study.schema.yaml").read_text()
    schema = parse_yaml(text, "schemas/study.schema.yaml")
    field = schema["$defs"]["entry"]["properties"]["correction"]
    field["description"] = "; ".join(f"{name}: {text}" if text else name for name, text in known)
    one, many = field["anyOf"]
    one["enum"] = many["items"]["enum"] = [name for name, _ in known]
    return schema


def _path(err: jsonschema.ValidationError) -> str:
    out = ""
    for p in err.absolute_path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(top level)"


_TYPE_WORDS = {"object": "a mapping", "array": "a list", "string": "a string", "boolean": "true or false"}
_TB_MAPPINGS = "{schedule: linear, start, end} or {controller: saturation|kl_cooling}"


_MAPPING_TEXT = {"guard": "a mapping {signal, threshold[, window, min]}", "schedule": "a mapping {schedule: [steps]}"}


def _tb_text(instance: Any) -> str:
    """What a sampler temperature may be; a bad *number* is told the number's bounds first."""
    if isinstance(instance, (int, float)) and not isinstance(instance, bool):
        return f"number > 0 and <= 2, or a mapping {_TB_MAPPINGS}"
    return f"a number in (0, 2] or {_TB_MAPPINGS}"


def _allowed(err: jsonschema.ValidationError) -> str:
    """What the schema allows at the failing place, in words."""
    s = err.schema if isinstance(err.schema, dict) else {}
    if s == study_schema()["$defs"]["tb"]:
        return "allowed: " + _tb_text(err.instance)
    if err.validator == "minItems":
        return "allowed: a non-empty list"
    if err.validator == "pattern":
        return f"allowed: text matching {s['pattern']}"
    if "enum" in s:
        return "allowed: " + ", ".join(map(str, s["enum"]))
    desc = []
    for branch in s.get("anyOf", []) + s.get("oneOf", []):
        if "enum" in branch:
            desc.append(" | ".join(map(str, branch["enum"])))
        elif "const" in branch:
            desc.append(str(branch["const"]))
        elif "$ref" in branch and branch["$ref"].endswith("/tb"):
            desc.append(_tb_text(err.instance))
        elif "$ref" in branch and branch["$ref"].rpartition("/")[2] in _MAPPING_TEXT:
            desc.append(_MAPPING_TEXT[branch["$ref"].rpartition("/")[2]])
        elif branch.get("type") in ("number", "integer"):
            lo = branch.get("exclusiveMinimum", branch.get("minimum"))
            op = ">" if "exclusiveMinimum" in branch else ">="
            hi = f" and <= {branch['maximum']}" if "maximum" in branch else ""
            desc.append(f"{branch['type']} {op} {lo}{hi}" if lo is not None else branch["type"])
        elif branch.get("type") == "array":
            desc.append("a non-empty list of those" if branch.get("minItems") else "a list of those")
        elif "type" in branch:
            desc.append(_TYPE_WORDS.get(branch["type"], str(branch["type"])))
    if desc:
        return "allowed: " + "; or ".join(dict.fromkeys(desc))
    if "type" in s:
        bound = ""
        if "exclusiveMinimum" in s:
            bound = f" > {s['exclusiveMinimum']}"
        elif "minimum" in s:
            bound = f" >= {s['minimum']}"
        if "maximum" in s:
            bound += f" and <= {s['maximum']}"
        return f"allowed: {_TYPE_WORDS.get(s['type'], s['type'])}{bound}"
    return err.message


def _non_finite(x: Any, path: str = "") -> str | None:
    """Path of the first NaN or infinity in a loaded config (YAML's .nan/.inf), or None.

    JSON Schema bounds cannot catch NaN: every comparison with it is false, so ``.nan`` would pass
    ``exclusiveMinimum: 0`` and reach verl as a temperature or learning rate."""
    if isinstance(x, float) and not math.isfinite(x):
        return path or "(top level)"
    items = x.items() if isinstance(x, dict) else enumerate(x) if isinstance(x, list) else ()
    for k, v in items:
        sub = f"{path}[{k}]" if isinstance(k, int) else (f"{path}.{k}" if path else str(k))
        if (hit := _non_finite(v, sub)) is not None:
            return hit
    return None


def _tb_branch(err: jsonschema.ValidationError) -> jsonschema.ValidationError | None:
    """For a Tb mapping, the error of the one branch its ``schedule``/``controller`` key selects.

    Without this a mapping with one bad key is reported against the *number* branch ("allowed: a
    number"), which names the wrong fix."""
    tb = study_schema()["$defs"]["tb"]
    if err.schema != tb:  # Tb: anyOf [tb, list of tb]: look one level in, at the same field
        err = next((e for e in err.context if e.schema == tb and not e.path), None) or err
    if err.schema != tb or not isinstance(err.instance, dict):
        return None
    branch = 1 if "schedule" in err.instance else 2 if "controller" in err.instance else None
    if branch is None:
        return None
    sub = jsonschema.Draft202012Validator(tb["oneOf"][branch]).iter_errors(err.instance)
    first = min(sub, key=lambda e: len(list(e.path)), default=None)
    if first is not None:
        first.path.extendleft(reversed(list(err.absolute_path)))
    return first


def _mapping_branch(err: jsonschema.ValidationError) -> jsonschema.ValidationError | None:
    """For a mapping where a ``guard`` or ``N: {schedule}`` may stand, the error of that mapping's own
    definition (a missing threshold, an unknown key), not the summary of every branch it failed."""
    if not isinstance(err.instance, dict) or not isinstance(err.schema, dict):
        return None
    defs = study_schema()["$defs"]
    for branch in err.schema.get("anyOf", []):
        name = branch.get("$ref", "").rpartition("/")[2]
        if name in ("guard", "schedule"):
            sub = jsonschema.Draft202012Validator({"$defs": defs, **defs[name]}).iter_errors(err.instance)
            first = min(sub, key=lambda e: len(list(e.path)), default=None)
            if first is not None:
                first.path.extendleft(reversed(list(err.absolute_path)))
            return first
    return None


def _message(origin: str, err: jsonschema.ValidationError) -> str:
    """One line: the field's path, the bad value, what is allowed there."""
    if err.validator == "additionalProperties" and isinstance(err.instance, dict):
        known = sorted((err.schema.get("properties") or {}).keys())
        extra = [k for k in err.instance if k not in known]
        where = _path(err)
        field = f"{where}.{extra[0]}" if where != "(top level)" else str(extra[0])
        return f"{origin}: {field}: unknown key; allowed keys here: {', '.join(known)}"
    if err.validator == "required" and isinstance(err.instance, dict):
        need = [k for k in err.validator_value if k not in err.instance]
        where = _path(err)
        field = f"{where}.{need[0]}" if where != "(top level)" else str(need[0])
        return f"{origin}: {field}: missing; required keys here: {', '.join(err.validator_value)}"
    bad = err.instance if not isinstance(err.instance, (dict, list)) else type(err.instance).__name__
    hint = (
        text_number_hint(err.instance)
        if isinstance(err.instance, str) and _EXPONENT_TEXT.fullmatch(err.instance)
        else ""
    )
    return f"{origin}: {_path(err)}: {bad!r} is not valid; {_allowed(err)}{hint}"


def check_study(raw: Any, origin: str) -> None:
    if not isinstance(raw, dict):
        raise StudyError(f"{origin}: a study must be a mapping with name and runs; allowed: a YAML mapping")
    if (where := _non_finite(raw)) is not None:
        raise StudyError(f"{origin}: {where}: not a finite number; allowed: finite numbers only (no .nan/.inf)")
    validator = jsonschema.Draft202012Validator(study_schema())
    errors = sorted(validator.iter_errors(raw), key=lambda e: (len(list(e.absolute_path)), str(e.absolute_path)))
    if errors:
        err = errors[0]
        # Inside an anyOf/oneOf, descend only to an error *deeper* in the document (it names the
        # real field, e.g. Tb[1]); branches failing at the same place are summarised by _allowed.
        while err.context:
            depth = len(list(err.absolute_path))
            deeper = [e for e in err.context if len(list(e.absolute_path)) > depth]
            if not deeper:
                break
            err = max(deeper, key=lambda e: len(list(e.absolute_path)))
        err = _tb_branch(err) or _mapping_branch(err) or err
        raise StudyError(_message(origin, err))
    check_name_lengths(raw, origin)
    timeout, stall = raw.get("timeout_min"), raw.get("stall_min")
    if timeout is not None and stall is not None and stall >= timeout:
        raise StudyError(
            f"{origin}: stall_min: {stall} is not below timeout_min {timeout};"
            " allowed: stall_min < timeout_min (a watchdog longer than the job's time limit never fires)"
        )


# A world's model and task are named <world>-<8 hex> in a run key and on disk (coolsampler.spec.world).
WORLD_SUFFIX = 9


def check_name_lengths(raw: dict[str, Any], origin: str) -> None:
    """Each name that becomes a folder (the study's ``results/<name>``, a model's or task's run-key part
    and models/ folder, a world's ``<name>-<key>``) fits one file name of the file system, so that a
    run does not fail at its first write, after its data and model were prepared."""
    limit = name_max()
    names = [("name", raw.get("name"), 0)]
    for block, extra in (("models", 0), ("tasks", 0), ("worlds", WORLD_SUFFIX)):
        names += [(f"{block}.{k if len(k) <= 40 else k[:37] + '...'}", k, extra) for k in raw.get(block) or {}]
    for field, value, extra in names:
        if isinstance(value, str) and len(value.encode()) + extra > limit:
            raise StudyError(
                f"{origin}: {field}: a name of {len(value.encode())} bytes is longer than a file name may be;"
                f" allowed: at most {limit - extra} bytes"
            )


# What an unknown model or task name is told: where a study defines its own (one line, with an example).
EXTEND_HINT = {
    "model": "or define it in the study's models: block, e.g. models: {my-7b: {hf_id: org/My-7B, revision: <commit>,"
    " params_b: 7.6}}",
    "task": "or define it in the study's tasks: block, e.g. tasks: {mytask: {train: t.parquet, val: v.parquet,"
    " reward: my_reward.py:score, max_prompt_length: 512, max_response_length: 512, steps: 300, val_every: 10}}",
}


def unknown_name(field: str, kind: str, value: Any, table: Any) -> str:
    """The one-line error for an unknown model or task: what is allowed, and the extension point."""
    return f"{field}: {value!r} is not valid; allowed: {', '.join(table)}; {EXTEND_HINT[kind]}"


def check_names(
    raw: dict[str, Any], origin: str, models: dict[str, Model] = MODELS, tasks: dict[str, Task] = TASKS
) -> None:
    """Model and task names where they are written (defaults or a run entry), not where expanded."""
    entries = [("defaults", raw.get("defaults") or {})]
    entries += [(f"runs[{i}]", e) for i, e in enumerate(raw["runs"])]
    for where, entry in entries:
        for key, table in (("model", models), ("task", tasks)):
            if key not in entry:
                continue
            values = entry[key] if isinstance(entry[key], list) else [entry[key]]
            for j, v in enumerate(values):
                if v not in table:
                    field = f"{where}.{key}" + (f"[{j}]" if isinstance(entry[key], list) else "")
                    raise StudyError(f"{origin}: {unknown_name(field, key, v, table)}")


def check_run_settings(
    s: dict[str, Any], where: str, models: dict[str, Model] = MODELS, tasks: dict[str, Task] = TASKS
) -> None:
    """Checks across fields of one expanded run (``models``/``tasks``: the study's, built-ins included)."""
    for key in ("model", "task", "N", "lr", "correction", "Tb", "seed"):
        if key not in s:
            raise StudyError(f"{where}: missing {key} (set it in the run or in defaults)")
    if s["model"] not in models:
        raise StudyError(unknown_name(f"{where}.model", "model", s["model"], models))
    if s["task"] not in tasks:
        raise StudyError(unknown_name(f"{where}.task", "task", s["task"], tasks))
    builtin = models[s["model"]] is MODELS.get(s["model"]) and tasks[s["task"]] is TASKS.get(s["task"])
    if builtin and (s["model"] == "toy-qwen2") != (s["task"] == "arith"):
        raise StudyError(
            f"{where}: model {s['model']!r} with task {s['task']!r} contradict each other;"
            " allowed: toy-qwen2 with arith, the Qwen2.5-Math models with gsm8k or math"
        )
    steps = int(s.get("steps", tasks[s["task"]].steps))
    val_every = int(s.get("val_every", tasks[s["task"]].val_every))
    if val_every > steps:
        said = str(val_every) if "val_every" in s else f"not set, so task {s['task']}'s default {val_every},"
        raise StudyError(f"{where}.val_every: {said} exceeds steps {steps}; allowed: val_every: 1..{steps}")
    kind, params = controller_spec(s["Tb"])  # the temperature grammar's one parser
    if kind != "fixed" and s.get("Tl") == "tied":
        raise StudyError(f"{where}.Tl: 'tied' with a {kind} Tb; allowed: a number")
    if kind == "linear" and params["start"] == params["end"]:
        raise StudyError(f"{where}.Tb: a linear schedule with start == end; allowed: a fixed number instead")
    for opt in ("kl_gate", "scope", "saturated"):
        if opt in params and kind != "saturation":
            raise StudyError(f"{where}.Tb.{opt}: only the saturation controller has it; allowed: remove it")
    check_refresh(s, where, steps)
    if s.get("replicate") == "cut" and steps >= tasks[s["task"]].steps:
        raise StudyError(
            f"{where}.steps: a 'cut' replicate must say at which step it ended;"
            f" allowed: steps < {tasks[s['task']].steps}"
        )


def check_refresh(s: dict[str, Any], where: str, steps: int) -> None:
    """How one expanded run refreshes its sampler: a guard fits its N, a schedule its steps, not both.

    The guard's own rules (known signal, positive window, ...) are ``coolsampler.spec.guard``'s, so the
    study, the trainer and the replay refuse the same things; here they become one-line StudyErrors."""
    N, guard = s["N"], s.get("guard")
    schedule = N.get("schedule") if isinstance(N, dict) else None
    try:
        if schedule is not None:
            check_schedule(schedule, steps)
        if guard is not None:
            if schedule is not None:
                raise ValueError("guard: with N: {schedule: ...}; allowed: a guard or a schedule, not both")
            spec = GuardSpec.from_config(guard)
            check_guard_fits(spec, int(N))
            check_signal_logged(spec.signal, s["correction"])
    except ValueError as err:
        raise StudyError(f"{where}.{err}") from None


# The settings a filter may name (a figure panel's, a claim's): a run's fields, how it refreshes, and the
# sampler temperature's kind and starting value; those of them that hold a number.
FILTER_FIELDS = frozenset(RUN_FIELDS) | frozenset(REFRESH_FIELDS) | {"Tb_kind", "Tb_initial"}
NUMBER_FIELDS = ("lr", "N", "seed", "steps", "val_every", "Tb_initial")
_EXPONENT_TEXT = re.compile(r"[+-]?\d+(\.\d*)?[eE][+-]?\d+")


def text_number_hint(value: Any) -> str:
    """What to write instead, where YAML read a number as text: ``1e-4`` (PyYAML's YAML 1.1 wants a decimal
    point) or a quoted ``'4'``; empty for anything else."""
    if not isinstance(value, str):
        return ""
    if _EXPONENT_TEXT.fullmatch(value.strip()):
        return f" (YAML reads {value} as text: write it with a decimal point, e.g. 2.0e-6)"
    try:
        float(value)
    except ValueError:
        return ""
    return f" (YAML reads {value!r} in quotes as text: write it without quotes)"


def check_filter(filt: Mapping[str, Any], where: str, allowed: Collection[str] = FILTER_FIELDS) -> None:
    """One settings filter (a figure panel's; a claim's runs): each setting one a run can hold, each value
    one that setting can take (a number where a run holds a number, a known correction, a temperature).
    A wrong value would select no run and be told as that; here it is told as what it is. ``where``: the
    message's prefix (the file and the field)."""
    tb_validator = jsonschema.Draft202012Validator({"$defs": study_schema()["$defs"], "$ref": "#/$defs/tb"})
    known = [c.name for c in corrections.corrections()]
    for k, v in filt.items():
        if k not in allowed:
            raise StudyError(f"{where}: unknown setting {k!r}; allowed: {', '.join(sorted(allowed))}")
        for opt in v if isinstance(v, list) else [v]:
            if k == "refresh" and opt not in REFRESH_KINDS:
                raise StudyError(f"{where}.refresh: {opt!r}; allowed: {', '.join(REFRESH_KINDS)}")
            if k == "correction" and opt not in known:
                near = [c for c in known if isinstance(opt, str) and c.lower() == opt.lower()]
                hint = f" (did you mean {near[0]!r}?)" if near else ""
                raise StudyError(f"{where}.correction: {opt!r} is not a correction; allowed: {', '.join(known)}{hint}")
            if k == "Tb" and not tb_validator.is_valid(opt):
                raise StudyError(f"{where}.Tb: {opt!r} is not a temperature; allowed: a number or a Tb mapping")
            if k == "Tb_kind" and opt not in TEMPERATURE_KINDS:
                raise StudyError(f"{where}.Tb_kind: {opt!r}; allowed: {', '.join(TEMPERATURE_KINDS)}")
            if k == "Tl" and opt != "tied" and (isinstance(opt, bool) or not isinstance(opt, (int, float))):
                raise StudyError(f"{where}.Tl: {opt!r} is not valid; allowed: a number or tied{text_number_hint(opt)}")
            if k in NUMBER_FIELDS and (isinstance(opt, (str, bool)) or not isinstance(opt, (int, float))):
                hint = text_number_hint(opt)
                raise StudyError(f"{where}.{k}: {opt!r} is not a number; allowed: a number{hint}")


def check_figures(study: Any, origin: str) -> None:
    """Each target of the study's ``figures:`` block exists, takes its options and panels, and each
    panel's filters name known settings and select at least one run (``study``: a ``Study``)."""
    targets = set(TARGETS)
    for target, entry in study.figures.items():
        if target not in targets:
            raise StudyError(f"{origin}: figures.{target}: unknown target; allowed: {', '.join(sorted(targets))}")
        try:
            target_options(target, entry)
        except OptionError as err:
            raise StudyError(f"{origin}: {err}") from None
        panels = panel_filters(entry)
        for panel, filters in panels.items():
            where = f"{origin}: figures.{target}.{panel}"
            if panel not in TARGETS[target].panels:
                raise StudyError(f"{where}: unknown panel; allowed: {', '.join(TARGETS[target].panels)}")
            for filt in filters if isinstance(filters, list) else [filters]:
                check_filter(filt, where)
            if not study.select(filters):
                raise StudyError(f"{where}: selects no run of the study; allowed: filters that match at least one run")


# --------------------------------------------------------------------------------------------------
# Extra verl overrides: their shape (which keys they may touch is the train layer's check)

EXTRA_RE = re.compile(r"^(\+\+|\+|~)?[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*(=.*)?$")


def bare_key(key: str) -> str:
    """A Hydra override's key without its ``+``, ``++`` or ``~`` prefix."""
    return key.lstrip("+~")


def check_extra_syntax(items: Any) -> list[str]:
    """Each extra override is Hydra-shaped and given once; returns their bare keys in order.
    Raises ValueError with a one-line reason."""
    seen: list[str] = []
    for item in items:
        if not EXTRA_RE.match(item) or ("=" not in item and not item.startswith("~")):
            raise ValueError(f"{item!r} is not a Hydra override; allowed: key=value, +key=value, ~key")
        key = bare_key(item.partition("=")[0])
        if key in seen:
            raise ValueError(f"{key} is given twice; allowed: once")
        seen.append(key)
    return seen
