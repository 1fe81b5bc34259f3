"""What the Snakemake HTML report shows beyond the figures and tables: one small figure per run
(its curves and its status), the labels the report lists runs by, and the captions' texts.

Why a module: the report is read by someone deciding whether a study worked. A run that stalled
must say so next to its curves, the settings must be the run's own (its ``run.yaml``), and where it
ran (platform, image digest, commit) must be visible without opening files. The rules
(``workflow/rules/analysis.smk``) call these functions; captions live in ``workflow/report/*.rst``.
Nothing here imports verl, vLLM or torch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import yaml

from coolsampler.paper import labels as L
from coolsampler.spec.metrics_schema import RunStatus
from coolsampler.spec.provenance import Provenance

NO_IMAGE = "none (no container: cpu platform)"
NOT_RECORDED = "not recorded"


def read_run_yaml(path: str | Path) -> dict[str, Any]:
    """A run's ``run.yaml`` ({} when absent or empty)."""
    p = Path(path)
    if not p.exists():
        return {}
    return yaml.safe_load(p.read_text()) or {}


def status_text(status: RunStatus | None) -> str:
    """'complete (64/64 steps)', 'unfinished at step 40/64: <why>', 'unknown (no status.json)'."""
    if status is None:
        return "unknown (no status.json)"
    if status.complete:
        return f"complete ({status.last_step}/{status.expected_steps} steps)"
    why = f": {'; '.join(status.problems)}" if status.problems else ""
    return f"unfinished at step {status.last_step}/{status.expected_steps}{why}"


def image_text(run_yaml: Mapping[str, Any]) -> str:
    """The image the run trained in (its digest), or that it used none."""
    image = run_yaml.get("image")
    if not image:
        return NO_IMAGE
    if isinstance(image, Mapping):
        return str(image.get("digest") or image.get("image") or image)
    return str(image)


def commit_text(run_yaml: Mapping[str, Any]) -> str:
    """The repository commit that trained the run (``+dirty`` if the tree was), when recorded."""
    # run.yaml's ``repository: {commit, dirty}`` (coolsampler.spec.provenance.run_record); dirty may be
    # "unknown" (outside git), which is not a dirty tree
    commit = run_yaml.get("repository", run_yaml.get("commit"))
    if isinstance(commit, Mapping):
        rev = str(commit.get("commit") or commit.get("revision") or NOT_RECORDED)
        return rev + ("+dirty" if commit.get("dirty") is True else "")
    return str(commit) if commit else NOT_RECORDED


def run_labels(status_path: str | Path, run_yaml_path: str | Path, figure: str = "curves") -> dict[str, str]:
    """The columns the report lists a run's figure under (evaluated when the report is made);
    ``figure`` tells a run's figures apart (curves, diagnostics)."""
    from coolsampler.results.loaders import load_status

    meta = read_run_yaml(run_yaml_path)
    s = meta.get("settings", {})
    return {
        "run": str(s.get("key", Path(run_yaml_path).parent.name)),
        "figure": figure,
        "status": status_text(load_status(status_path)),
        "platform": str(meta.get("platform", NOT_RECORDED)),
        "image": image_text(meta),
        "commit": commit_text(meta),
    }


def run_curves(
    settings: Mapping[str, Any],
    metrics: Any,
    status: RunStatus | None,
    outputs: Sequence[str | Path],
    provenance: Provenance,
) -> Any:
    """One run at a glance: validation accuracy and training reward, KL (log axis, values <= 0 on
    the floor, marked), entropy; the title says the run's status. Returns the figure."""
    from coolsampler.paper import figures as F
    from coolsampler.paper import plotting as P
    from coolsampler.paper import style as S

    entry = [(dict(settings), metrics, status)]
    state = status_text(status)
    fig, ax = P.new_figure(11, 2.6, [] if status is None or status.complete else [f"run {state}"], ncols=3)
    a0, a1, a2 = ax[0]
    F.plot_runs(a0, entry, "val_acc")
    if metrics is not None and not metrics.empty and "reward" in metrics.columns:
        a0.plot(metrics["step"].to_numpy(), metrics["reward"].to_numpy(dtype="float64"), color="#777777", lw=0.7,
                label="training reward")  # fmt: skip
    a0.set_ylim(0.0, 1.0)
    a0.set_ylabel("accuracy / reward")
    F.log_panel(a1, entry, "kl", lw=0.8)
    P.kl_axis(a1, label="KL (k1), nats/token", limits=a1.get_ylim())
    F.plot_runs(a2, entry, "entropy", lw=0.8)
    a2.set_ylabel("learner entropy")
    steps = int(settings.get("steps", 0) or 0)
    for a in (a0, a1, a2):
        P.refresh_lines(a, settings.get("N"), steps or 300)
        if steps:
            a.set_xlim(0, steps)
        a.set_xlabel("step")
    a0.plot(
        [], [], color=P.run_colour(settings), marker=P.seed_marker(settings.get("seed")), label="validation accuracy"
    )
    key = str(settings.get("key", ""))
    colour = "#1a7f37" if status is not None and status.complete else "#b00000"
    fig.suptitle(f"{key}  [{state}]", fontsize=S.TITLE_PT, x=0.01, ha="left", color=colour)
    fig.subplots_adjust(top=0.84)
    arm = L.run_label(settings, seed=False)  # one run: its arm label says nothing the title does not
    for a in (a0, a1, a2):
        for line in a.get_lines():
            if line.get_label() == arm:
                line.set_label("_")
    P.figure_legend(fig, fig.axes)
    P.save(fig, outputs, provenance=provenance, title=f"{key}: curves")
    return fig


def run_figure_from_files(
    draw: Any,
    script: str,
    metrics_path: str | Path,
    status_path: str | Path,
    run_yaml_path: str | Path,
    out: str | Path,
    study: str,
) -> None:
    """One run's figure (``draw``: ``run_curves`` or ``coolsampler.paper.diagnostics.run_diagnostics``) from
    its run directory, stamped with the rule ``script`` that drew it."""
    from coolsampler.results.loaders import load_metrics, load_status

    meta = read_run_yaml(run_yaml_path)
    settings = meta.get("settings") or {"key": Path(run_yaml_path).parent.name}
    prov = Provenance.here(study, script=script)
    draw(settings, load_metrics(metrics_path), load_status(status_path), [out], prov)


# Body of ``workflow/scripts/run_curves.py``: one run's ``curves.png`` from its run directory, called with
# (metrics, status, run.yaml, out, study) as ``run_figure_from_files`` takes them.
run_curves_from_files = partial(run_figure_from_files, run_curves, "workflow/scripts/run_curves.py")


def settings_text(settings: Mapping[str, Any]) -> dict[str, str]:
    """A run's settings as the run keys write them ('1e-4', not 0.0001), for its report caption."""
    return {k: L.value_text(v) for k, v in settings.items()}


def selection_texts(entry: Mapping[str, Any] | None) -> dict[str, str]:
    """Panel -> its filter as one line, for a figure's report caption."""
    from coolsampler.spec.targets import panel_filters

    return {p: L.selection_text(f) for p, f in panel_filters(entry or {}).items()}


def target_caption(target: str) -> str:
    """What a figure draws (the registry) or a table's caption (``coolsampler.paper.tables``)."""
    from coolsampler.spec.targets import TARGETS

    t = TARGETS[target]
    if t.kind == "table":
        from coolsampler.paper import tables

        return str(getattr(tables, f"{target.upper()}_CAPTION", ""))
    return t.draws
