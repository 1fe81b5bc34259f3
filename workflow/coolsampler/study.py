"""Studies, runs and run keys.

A *study* (``config/*.yaml``) lists runs by their settings. Each run has a *key*: a readable
relative path that holds every per-run setting, e.g.::

    qwen2.5-math-1.5b/gsm8k/N192_lr2e-6_tis_Tb0.8_Tl1_s43

``model/task/N<refresh>_lr<lr>_<correction>_Tb<sampler T>_Tl<learner T>_s<seed>`` followed, only
where they differ from the task's defaults, by ``_st<steps>`` and ``_v<val interval>``, and by
``_cut`` / ``_rerun`` for replicates. ``parse_key`` inverts ``Run.key`` exactly, so a Snakemake
wildcard is turned back into settings without a lookup table, and anything that does not parse is
rejected (no shell can hide in a key).

Study-wide recipe settings (batch shape, lengths) live in the study's ``recipe`` block and in
``coolsampler.settings``; the run directory records the fully resolved configuration.

This module never imports verl, vLLM or torch.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from coolsampler.settings import (
    CORRECTIONS,
    MODELS,
    REPLICATES,
    RERUN_SEED_OFFSET,
    SAMPLING_SEED,
    SATURATION_RULES,
    SCOPES,
    TASKS,
)

# the saturation controller's options, defaults first: defined where the rule lives (a pure-Python
# module, light to import)

# --------------------------------------------------------------------------------------------------
# Sampler temperature: a number, a schedule or a controller.

SCHEDULES = ("linear",)
CONTROLLERS = ("saturation", "kl_cooling")


def _num(x: float) -> str:
    """Shortest stable text for a number in a key: 1.0 -> '1', 0.8 -> '0.8', 2e-06 -> '2e-6'."""
    x = float(x)
    s = f"{x:.6e}" if 0 < abs(x) < 0.01 else f"{x:.6g}"  # small values (learning rates) as 3e-5
    if "e" in s:
        mant, exp = s.split("e")
        mant = mant.rstrip("0").rstrip(".") if "." in mant else mant
        s = f"{mant}e{int(exp)}"
    return s


@dataclass(frozen=True)
class Temperature:
    """The sampler temperature Tb of a run.

    ``kind`` is ``fixed`` (``value``), ``linear`` (``value`` -> ``end`` over the run),
    ``saturation`` (starts at ``value``; reheats as groups saturate; ``kl_gate`` blocks reheating
    while the learner-sampler KL is high) or ``kl_cooling`` (starts at ``value``; cools further
    whenever the KL grows). The saturation controller's ``scope`` is ``per_prompt`` (default: each
    prompt its own temperature, the paper's controller) or ``global`` (one per step), and
    ``saturated`` says when a group counts as saturated: ``all_correct`` (default) or ``all_equal``.
    The rules are in ``coolsampler.worker.controller``.

    Key tokens: ``Tb0.8``, ``Tblin0.8-1``, ``Tbklc0.8``, ``Tbsat0.8[kl][-global][-alleq]``: the
    default saturation controller keeps the short token, each non-default choice adds its suffix.
    """

    kind: str = "fixed"
    value: float = 1.0
    end: float | None = None
    kl_gate: bool = False
    scope: str = SCOPES[0]
    saturated: str = SATURATION_RULES[0]

    def __post_init__(self) -> None:
        if self.scope not in SCOPES or self.saturated not in SATURATION_RULES:
            raise ValueError(
                f"Tb: scope {self.scope!r} / saturated {self.saturated!r}; allowed: {SCOPES} / {SATURATION_RULES}"
            )
        if self.kind != "saturation" and (self.scope, self.saturated) != (SCOPES[0], SATURATION_RULES[0]):
            raise ValueError(f"Tb: scope and saturated are options of the saturation controller, not of {self.kind}")

    @property
    def initial(self) -> float:
        return self.value

    def token(self) -> str:
        if self.kind == "fixed":
            return f"Tb{_num(self.value)}"
        if self.kind == "linear":
            return f"Tblin{_num(self.value)}-{_num(self.end)}"
        if self.kind == "saturation":
            return (
                f"Tbsat{_num(self.value)}"
                + ("kl" if self.kl_gate else "")
                + ("" if self.scope == SCOPES[0] else f"-{_SCOPE_TOKENS[self.scope]}")
                + ("" if self.saturated == SATURATION_RULES[0] else f"-{_SATURATED_TOKENS[self.saturated]}")
            )
        if self.kind == "kl_cooling":
            return f"Tbklc{_num(self.value)}"
        raise ValueError(f"unknown temperature kind {self.kind!r}")

    def to_config(self) -> float | dict[str, Any]:
        if self.kind == "fixed":
            return self.value
        if self.kind == "linear":
            return {"schedule": "linear", "start": self.value, "end": self.end}
        out: dict[str, Any] = {"controller": self.kind, "start": self.value}
        if self.kind == "saturation":
            out["kl_gate"] = self.kl_gate
            if self.scope != SCOPES[0]:  # defaults are left out: the paper's specs stay as written
                out["scope"] = self.scope
            if self.saturated != SATURATION_RULES[0]:
                out["saturated"] = self.saturated
        return out

    @classmethod
    def from_config(cls, spec: float | int | Mapping[str, Any]) -> Temperature:
        if isinstance(spec, (int, float)) and not isinstance(spec, bool):
            return cls("fixed", float(spec))
        if "schedule" in spec:
            return cls("linear", float(spec["start"]), float(spec["end"]))
        kind = spec["controller"]
        return cls(
            kind,
            float(spec.get("start", 0.8)),
            None,
            bool(spec.get("kl_gate", False)),
            str(spec.get("scope", SCOPES[0])),
            str(spec.get("saturated", SATURATION_RULES[0])),
        )


# the key suffixes of the saturation controller's non-default choices (the defaults have none)
_SCOPE_TOKENS = {"global": "global"}
_SATURATED_TOKENS = {"all_equal": "alleq"}
_NUM_RE = r"\d+(?:\.\d+)?(?:e-?\d+)?"
_SAT_SUFFIX_RE = rf"(?:kl)?(?:-{'|-'.join(_SCOPE_TOKENS.values())})?(?:-{'|-'.join(_SATURATED_TOKENS.values())})?"
_TB_RE = re.compile(
    rf"^Tb(?:(?P<fixed>{_NUM_RE})|lin(?P<lin0>{_NUM_RE})-(?P<lin1>{_NUM_RE})"
    rf"|sat(?P<sat>{_NUM_RE})(?P<kl>kl)?(?:-(?P<scope>{'|'.join(_SCOPE_TOKENS.values())}))?"
    rf"(?:-(?P<saturated>{'|'.join(_SATURATED_TOKENS.values())}))?|klc(?P<klc>{_NUM_RE}))$"
)


def _parse_tb(tok: str) -> Temperature:
    m = _TB_RE.match(tok)
    if not m:
        raise ValueError(f"bad sampler-temperature token {tok!r}")
    if m["fixed"]:
        return Temperature("fixed", float(m["fixed"]))
    if m["lin0"]:
        return Temperature("linear", float(m["lin0"]), float(m["lin1"]))
    if m["sat"]:
        scope = {v: k for k, v in _SCOPE_TOKENS.items()}.get(m["scope"] or "", SCOPES[0])
        saturated = {v: k for k, v in _SATURATED_TOKENS.items()}.get(m["saturated"] or "", SATURATION_RULES[0])
        return Temperature("saturation", float(m["sat"]), None, bool(m["kl"]), scope, saturated)
    return Temperature("kl_cooling", float(m["klc"]))


# --------------------------------------------------------------------------------------------------
# Runs


@dataclass(frozen=True)
class Run:
    """Every per-run setting of the paper's Table 4, plus steps and validation interval."""

    model: str
    task: str
    N: int
    lr: float
    correction: str
    Tb: Temperature
    Tl: float | str  # learner temperature: a number, or "tied" (= the sampler's Tb)
    seed: int
    steps: int
    val_every: int
    replicate: str | None = None
    source: str = field(default="", compare=False)  # where in the paper the run comes from

    @property
    def key(self) -> str:
        task = TASKS[self.task]
        tl = "tied" if self.Tl == "tied" else _num(self.Tl)
        name = f"N{self.N}_lr{_num(self.lr)}_{self.correction}_{self.Tb.token()}_Tl{tl}_s{self.seed}"
        if self.steps != task.steps:
            name += f"_st{self.steps}"
        if self.val_every != task.val_every:
            name += f"_v{self.val_every}"
        if self.replicate:
            name += f"_{self.replicate}"
        return f"{self.model}/{self.task}/{name}"

    @property
    def sampling_seed(self) -> int:
        """vLLM's sampling seed: a ``rerun`` replicate draws its own samples (coolsampler.settings)."""
        return SAMPLING_SEED + (RERUN_SEED_OFFSET if self.replicate == "rerun" else 0)

    @property
    def learner_temperature(self) -> float:
        """The temperature of the actor, old-policy and reference passes."""
        return self.Tb.initial if self.Tl == "tied" else float(self.Tl)

    def settings(self) -> dict[str, Any]:
        """Plain settings, as written to ``run.yaml`` and used by figure selectors."""
        return {
            "model": self.model,
            "task": self.task,
            "N": self.N,
            "lr": self.lr,
            "correction": self.correction,
            "Tb": self.Tb.to_config(),
            "Tb_kind": self.Tb.kind,
            "Tb_initial": self.Tb.initial,
            "Tl": self.Tl,
            "seed": self.seed,
            "sampling_seed": self.sampling_seed,
            "steps": self.steps,
            "val_every": self.val_every,
            "replicate": self.replicate,
            "key": self.key,
        }


_NAME_RE = re.compile(
    rf"^N(?P<N>\d+)_lr(?P<lr>{_NUM_RE})_(?P<corr>tis|none|mu_grpo)_(?P<tb>Tb[a-z]*{_NUM_RE}(?:-{_NUM_RE})?{_SAT_SUFFIX_RE})"
    rf"_Tl(?P<tl>tied|{_NUM_RE})_s(?P<seed>\d+)(?:_st(?P<steps>\d+))?(?:_v(?P<val>\d+))?"
    rf"(?:_(?P<rep>cut|rerun))?$"
)
KEY_WILDCARD_RE = r"[a-z0-9](?:[a-z0-9\-]|\.(?!\.))*/[a-z0-9]+/N\d+_lr[0-9.e\-]+_(?:tis|none|mu_grpo)_Tb[a-z0-9.\-]+_Tl[a-z0-9.]+_s\d+(?:_st\d+)?(?:_v\d+)?(?:_cut|_rerun)?"  # noqa: E501


def parse_key(key: str) -> Run:
    """Turn a run key back into a Run. Raises ValueError naming what does not parse."""
    parts = key.split("/")
    if len(parts) != 3:
        raise ValueError(f"run key {key!r}: expected <model>/<task>/<settings>")
    model, task, name = parts
    if model not in MODELS:
        raise ValueError(f"run key {key!r}: unknown model {model!r} (allowed: {', '.join(MODELS)})")
    if task not in TASKS:
        raise ValueError(f"run key {key!r}: unknown task {task!r} (allowed: {', '.join(TASKS)})")
    m = _NAME_RE.match(name)
    if not m:
        raise ValueError(f"run key {key!r}: settings part {name!r} does not parse")
    t = TASKS[task]
    run = Run(
        model=model,
        task=task,
        N=int(m["N"]),
        lr=float(m["lr"]),
        correction=m["corr"],
        Tb=_parse_tb(m["tb"]),
        Tl="tied" if m["tl"] == "tied" else float(m["tl"]),
        seed=int(m["seed"]),
        steps=int(m["steps"]) if m["steps"] else t.steps,
        val_every=int(m["val"]) if m["val"] else t.val_every,
        replicate=m["rep"],
    )
    if run.key != key:
        raise ValueError(f"run key {key!r} is not canonical (canonical form: {run.key!r})")
    return run


# --------------------------------------------------------------------------------------------------
# Studies

RUN_FIELDS = ("model", "task", "N", "lr", "correction", "Tb", "Tl", "seed", "steps", "val_every", "replicate")


class StudyError(ValueError):
    """A study config that must not start any job. The message is one line: field and what is allowed."""


@dataclass
class Study:
    name: str
    results: Path
    runs: list[Run]
    figures: dict[str, dict[str, dict[str, Any]]]
    recipe: dict[str, Any]
    raw: dict[str, Any]

    def run_dir(self, run: Run) -> Path:
        return self.results / "runs" / run.key

    def by_key(self) -> dict[str, Run]:
        return {r.key: r for r in self.runs}

    def select(self, filt: Mapping[str, Any] | list[Mapping[str, Any]]) -> list[Run]:
        """Runs whose settings match every key of ``filt`` (a list value means any of).

        A list of filters selects the runs any of them selects, in study order."""
        filters = filt if isinstance(filt, list) else [filt]
        return [r for r in self.runs if any(matches(r, f) for f in filters)]


def matches(run: Run, filt: Mapping[str, Any]) -> bool:
    s = run.settings()
    for k, want in filt.items():
        have = s.get(k)
        options = want if isinstance(want, list) else [want]
        if k == "Tb":
            have_tb = run.Tb
            if not any(Temperature.from_config(o) == have_tb for o in options):
                return False
            continue
        if not any(_eq(have, o) for o in options):
            return False
    return True


def _eq(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return abs(float(a) - float(b)) <= 1e-12 * max(1.0, abs(float(a)))
    return a == b


def _expand(entry: Mapping[str, Any]) -> Iterable[dict[str, Any]]:
    """A run entry whose values may be lists: the cross product of those lists."""
    grid_keys = [k for k, v in entry.items() if isinstance(v, list) and k != "source"]
    if not grid_keys:
        yield dict(entry)
        return
    for combo in itertools.product(*(entry[k] for k in grid_keys)):
        out = dict(entry)
        out.update(zip(grid_keys, combo, strict=True))
        yield out


def _make_run(settings: Mapping[str, Any]) -> Run:
    task = TASKS[settings["task"]]
    return Run(
        model=settings["model"],
        task=settings["task"],
        N=int(settings["N"]),
        lr=float(settings["lr"]),
        correction=settings["correction"],
        Tb=Temperature.from_config(settings["Tb"]),
        Tl=settings.get("Tl", 1.0) if settings.get("Tl", 1.0) == "tied" else float(settings.get("Tl", 1.0)),
        seed=int(settings["seed"]),
        steps=int(settings.get("steps", task.steps)),
        val_every=int(settings.get("val_every", task.val_every)),
        replicate=settings.get("replicate"),
        source=str(settings.get("source", "")),
    )


def load_study(path: str | Path, *, results: str | Path | None = None) -> Study:
    """Read, validate and expand a study config. Raises StudyError (one line) on any bad value."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise StudyError(f"{path}: not valid YAML: {e}".replace("\n", " ")) from e
    return study_from_dict(raw, origin=str(path), results=results)


def study_from_dict(raw: Any, *, origin: str = "study", results: str | Path | None = None) -> Study:
    from coolsampler.validate import check_study  # schema + semantic checks, one-line errors

    check_study(raw, origin)
    defaults = raw.get("defaults", {})
    runs: list[Run] = []
    where: dict[str, str] = {}
    for i, entry in enumerate(raw["runs"]):
        for settings in _expand({**defaults, **entry}):
            from coolsampler.validate import check_run_settings

            check_run_settings(settings, f"{origin}: runs[{i}]")
            run = _make_run(settings)
            if run.key in where:
                raise StudyError(
                    f"{origin}: runs[{i}]: duplicate run {run.key} (already defined by {where[run.key]});"
                    " a replicate needs replicate: cut|rerun"
                )
            where[run.key] = f"runs[{i}]"
            runs.append(run)
    study = Study(
        name=raw["name"],
        results=Path(results if results is not None else raw.get("results", f"results/{raw['name']}")),
        runs=runs,
        figures=raw.get("figures", {}) or {},
        recipe=raw.get("recipe", {}) or {},
        raw=raw,
    )
    from coolsampler.validate import check_figures

    check_figures(study, origin)
    return study


def with_settings(run: Run, **changes: Any) -> Run:
    return replace(run, **changes)


__all__ = [
    "CORRECTIONS",
    "REPLICATES",
    "Run",
    "Study",
    "StudyError",
    "Temperature",
    "load_study",
    "parse_key",
    "study_from_dict",
]
