"""Study validation: the JSON schema, then the checks a schema cannot express.

Every failure is a ``StudyError`` whose message is one line naming the field and what is allowed,
raised before Snakemake builds a DAG, so a typo costs no GPU hours.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

import jsonschema
import yaml

from coolsampler.settings import MODELS, TASKS

if TYPE_CHECKING:
    from coolsampler.study import Study


def _error(msg: str) -> Exception:
    from coolsampler.study import StudyError

    return StudyError(msg)


@cache
def study_schema() -> dict[str, Any]:
    text = resources.files("coolsampler").joinpath("schemas/study.schema.yaml").read_text()
    return yaml.safe_load(text)


def _path(err: jsonschema.ValidationError) -> str:
    out = ""
    for p in err.absolute_path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(top level)"


def _allowed(err: jsonschema.ValidationError) -> str:
    """What the schema allows at the failing place, in words."""
    s = err.schema if isinstance(err.schema, dict) else {}
    if err.validator == "additionalProperties":
        allowed = sorted((err.schema.get("properties") or {}).keys())
        extra = [k for k in err.instance if k not in allowed] if isinstance(err.instance, dict) else []
        return f"unknown key {', '.join(map(repr, extra))}; allowed keys: {', '.join(allowed)}"
    if err.validator == "required":
        return err.message
    if "enum" in s:
        return "allowed: " + ", ".join(map(str, s["enum"]))
    desc = []
    for branch in s.get("anyOf", []) + s.get("oneOf", []):
        if "enum" in branch:
            desc.append(" | ".join(map(str, branch["enum"])))
        elif "const" in branch:
            desc.append(str(branch["const"]))
        elif "$ref" in branch and branch["$ref"].endswith("/tb"):
            desc.append("a number in (0, 2] or {schedule: linear, start, end} or {controller: saturation|kl_cooling}")
        elif branch.get("type") in ("number", "integer"):
            lo = branch.get("exclusiveMinimum", branch.get("minimum"))
            op = ">" if "exclusiveMinimum" in branch else ">="
            hi = f" and <= {branch['maximum']}" if "maximum" in branch else ""
            desc.append(f"{branch['type']} {op} {lo}{hi}" if lo is not None else branch["type"])
        elif branch.get("type") == "array":
            desc.append("a list of those")
        elif "type" in branch:
            desc.append(str(branch["type"]))
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
        return f"allowed: {s['type']}{bound}"
    return err.message


def check_study(raw: Any, origin: str) -> None:
    if not isinstance(raw, dict):
        raise _error(f"{origin}: a study must be a mapping with name and runs")
    validator = jsonschema.Draft202012Validator(study_schema())
    errors = sorted(validator.iter_errors(raw), key=lambda e: (len(list(e.absolute_path)), str(e.absolute_path)))
    if errors:
        err = errors[0]
        # Prefer the deepest error inside an anyOf: it names the real field.
        while err.context:
            err = sorted(err.context, key=lambda e: -len(list(e.absolute_path)))[0]
        bad = err.instance if not isinstance(err.instance, (dict, list)) else type(err.instance).__name__
        raise _error(f"{origin}: {_path(err)}: {bad!r} is not valid; {_allowed(err)}")


def check_run_settings(s: dict[str, Any], where: str) -> None:
    """Checks across fields of one expanded run."""
    for key in ("model", "task", "N", "lr", "correction", "Tb", "seed"):
        if key not in s:
            raise _error(f"{where}: missing {key} (set it in the run or in defaults)")
    if s["model"] not in MODELS:
        raise _error(f"{where}.model: {s['model']!r} is not valid; allowed: {', '.join(MODELS)}")
    if s["task"] not in TASKS:
        raise _error(f"{where}.task: {s['task']!r} is not valid; allowed: {', '.join(TASKS)}")
    if (s["model"] == "toy-qwen2") != (s["task"] == "arith"):
        raise _error(
            f"{where}: model {s['model']!r} with task {s['task']!r} contradict each other;"
            " allowed: toy-qwen2 with arith, the Qwen2.5-Math models with gsm8k or math"
        )
    steps = int(s.get("steps", TASKS[s["task"]].steps))
    if int(s.get("val_every", TASKS[s["task"]].val_every)) > steps:
        raise _error(f"{where}.val_every: {s.get('val_every')} exceeds steps {steps}; allowed: 1..steps")
    tb = s["Tb"]
    if isinstance(tb, dict) and s.get("Tl") == "tied":
        raise _error(f"{where}.Tl: 'tied' with a {tb.get('schedule') or tb.get('controller')} Tb; allowed: a number")
    if isinstance(tb, dict) and "schedule" in tb and tb["start"] == tb["end"]:
        raise _error(f"{where}.Tb: a linear schedule with start == end; allowed: a fixed number instead")
    if isinstance(tb, dict) and "kl_gate" in tb and tb.get("controller") != "saturation":
        raise _error(f"{where}.Tb.kl_gate: only the saturation controller has a KL gate; allowed: remove it")
    if s.get("replicate") == "cut" and int(s.get("steps", TASKS[s["task"]].steps)) >= TASKS[s["task"]].steps:
        raise _error(
            f"{where}.steps: a 'cut' replicate must say at which step it ended;"
            f" allowed: steps < {TASKS[s['task']].steps}"
        )


def check_figures(study: Study, origin: str) -> None:
    from coolsampler.study import RUN_FIELDS

    allowed = set(RUN_FIELDS) | {"Tb_kind", "Tb_initial"}
    tb_validator = jsonschema.Draft202012Validator({"$defs": study_schema()["$defs"], "$ref": "#/$defs/tb"})
    targets = {f"fig{i}" for i in range(1, 9)} | {f"table{i}" for i in range(1, 5)}
    for target, panels in study.figures.items():
        if target not in targets:
            raise _error(f"{origin}: figures.{target}: unknown target; allowed: {', '.join(sorted(targets))}")
        for panel, filters in panels.items():
            where = f"{origin}: figures.{target}.{panel}"
            for filt in filters if isinstance(filters, list) else [filters]:
                for k, v in filt.items():
                    if k not in allowed:
                        raise _error(f"{where}: unknown setting {k!r}; allowed: {', '.join(sorted(allowed))}")
                    for opt in v if isinstance(v, list) else [v]:
                        if k == "Tb" and not tb_validator.is_valid(opt):
                            raise _error(f"{where}.Tb: {opt!r} is not a temperature; allowed: a number or a Tb mapping")
                        if k in ("lr", "N", "seed", "steps", "val_every") and (
                            isinstance(opt, (str, bool)) or not isinstance(opt, (int, float))
                        ):
                            raise _error(f"{where}.{k}: {opt!r} is not a number (write 2.0e-6, not 2e-6, in YAML)")
            if not study.select(filters):
                raise _error(f"{where}: selects no run of the study; allowed: filters that match at least one run")
