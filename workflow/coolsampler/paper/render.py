"""Rendering one figure or table target of the registry (``coolsampler.spec.targets``): its panels' runs
loaded, its drawing or table function called, and the body of the rule scripts that do it.

The registry names each target's function as ``"module:function"``; it is imported here, on first use,
so a study is validated without loading matplotlib.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from coolsampler.paper.labels import availability_notes
from coolsampler.paper.tables import Panels, RunEntry
from coolsampler.results.loaders import load_metrics, load_status
from coolsampler.spec.metrics_schema import RunStatus
from coolsampler.spec.provenance import Provenance, as_provenance
from coolsampler.spec.targets import OPTIONS_KEY, TARGETS, Target, check_panels, target_options


def target_function(target: Target) -> Any:
    """The paper-layer function that draws or writes ``target`` (its ``fn``, ``module:function``)."""
    module, _, name = target.fn.partition(":")
    return getattr(importlib.import_module(module), name)


def load_panels(spec: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, list[RunEntry]]:
    """Turn Snakemake params (panel -> [{settings, metrics path, status path}]) into panels.

    Each file is read once even when a run appears in several panels.
    """
    cache: dict[tuple[Any, Any], tuple[Any, RunStatus | None]] = {}
    out: dict[str, list[RunEntry]] = {}
    for panel, runs in spec.items():
        out[panel] = []
        for r in runs:
            k = (r.get("metrics"), r.get("status"))
            if k not in cache:
                cache[k] = (load_metrics(k[0]), load_status(k[1]))
            out[panel].append((dict(r["settings"]), *cache[k]))
    return out


def render(
    target: str,
    panels: Panels,
    study: str | Provenance,
    commit: str | None,
    outputs: Sequence[str | Path],
    options: Mapping[str, Any] | None = None,
    selection: Mapping[str, Any] | None = None,
    *,
    synthetic: bool = False,
    screen: Any = None,
) -> Any:
    """Draw or write one target. Panels the target expects but the study did not give are empty;
    a panel it does not have is refused (``PanelError``).

    ``study`` is a Provenance, or a study name with ``commit`` (a commit string, or None to ask git).
    ``options`` are checked against the registry (``target_options``). ``selection`` (panel ->
    the study's settings filter) is printed under a figure, the caption of what each panel shows.
    ``synthetic`` (or ``study.synthetic``): the runs are made up, and a figure says so across its image.
    ``screen``: the study's world screen table, for the figures that draw it (Figure 1).
    """
    if target not in TARGETS:
        raise KeyError(f"unknown target {target!r}; allowed: {', '.join(TARGETS)}")
    t = TARGETS[target]
    check_panels(target, panels)
    if selection is not None:
        check_panels(target, selection)
    prov = study if isinstance(study, Provenance) else as_provenance(commit, study)
    if synthetic:
        prov = replace(prov, synthetic=True)
    opts = target_options(target, {OPTIONS_KEY: dict(options or {})})
    # every panel the target draws, empty where no run is selected; an optional one only where it is named
    full = {n: list(panels.get(n, [])) for n in t.panels if n in panels or n not in t.optional}
    if t.kind == "figure":
        extra = {"screen": screen} if screen is not None else {}
        return target_function(t)(full, prov, outputs, opts, selection=selection, **extra)  # type: ignore[call-arg]
    return target_function(t)(full, prov, outputs, opts)


def run_snakemake_target(smk: Any, kind: str) -> None:
    """Body of ``workflow/scripts/{figure,table}.py``: render ``smk.params.target`` to ``smk.output``.

    Logging and stderr go to ``smk.log[0]``; a failure is logged with its traceback there and then
    re-raised with the real stderr restored, so Snakemake reports it and the log explains it.
    """
    from coolsampler.results.smklog import snakemake_log

    with snakemake_log(smk.log[0], f"rendering {getattr(smk.params, 'target', '?')}") as logger:
        target = smk.params.target
        if TARGETS[target].kind != kind:
            raise ValueError(f"{target} is a {TARGETS[target].kind}, not a {kind}")
        check_panels(target, smk.params.panels)
        panels = load_panels(dict(smk.params.panels))
        logger.info("%s: runs per panel %s", target, {p: len(r) for p, r in panels.items()})
        for note_ in dict.fromkeys(n for entries in panels.values() for n in availability_notes(entries)):
            logger.warning("%s: %s", target, note_)  # once, where a run sits in several panels
        # The commit is read here, not passed as a param: a param would rerun every figure on each commit.
        prov = Provenance.here(
            smk.params.study, commit=getattr(smk.params, "commit", None), script=f"workflow/scripts/{kind}.py"
        )
        options = getattr(smk.params, "options", None) or {}
        selection = getattr(smk.params, "selection", None)
        outs = [str(o) for o in smk.output]
        screen = getattr(getattr(smk, "input", None), "screen", None)  # a study's world screen, beside its Figure 1
        if screen:
            import pandas as pd

            screen = pd.read_csv(screen, sep="\t")
        render(target, panels, prov, None, outs, options, dict(selection) if selection else None, screen=screen)
        logger.info("wrote %s (%s)", ", ".join(map(str, smk.output)), prov.footer())
