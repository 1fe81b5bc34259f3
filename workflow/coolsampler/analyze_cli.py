"""``coolsampler analyze PATH...``: the paper's per-run numbers for logs on a laptop, as text.

Takes verl JSONL logs (parsed by ``coolsampler.metrics.parse_jsonl``) or already parsed metrics tables
(``metrics.parquet``/``.csv``, with ``status.json`` beside them when present) and prints the degradation
events of each run and a Table-1-style summary. No verl, vLLM or torch: only pandas and numpy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from coolsampler.analysis import summarize_run
from coolsampler.labels import DASH
from coolsampler.metrics_schema import RunStatus
from coolsampler.tables import f3, fkl, flead, fstep, table1_frames
from coolsampler.writers import to_markdown


def infer_N(metrics: pd.DataFrame) -> int | None:
    """Refresh interval from the log itself: the first refreshed step, else max staleness + 1.

    Used when no settings are given; the max-staleness fallback underestimates N for a run shorter
    than one cycle, which the text output then says ("N inferred").
    """
    if "refreshed" in metrics.columns:
        r = metrics.loc[metrics["refreshed"].fillna(False).astype(bool), "step"]
        if len(r):
            return int(r.min())
    if "staleness" in metrics.columns and metrics["staleness"].notna().any():
        return int(metrics["staleness"].max()) + 1
    return None


def load_any(path: str | Path) -> tuple[pd.DataFrame, RunStatus | None]:
    """A metrics table and its status from a JSONL log, a parquet/CSV table (+ status.json beside it)."""
    p = Path(path)
    if p.suffix in (".parquet", ".csv"):
        from coolsampler.targets import load_metrics, load_status

        df = load_metrics(p)
        if df is None:
            raise FileNotFoundError(p)
        return df, load_status(p.with_name("status.json"))
    from coolsampler.metrics import parse_jsonl  # the parser module may land after this one

    return parse_jsonl(p)


def _settings_for(
    path: Path, metrics: pd.DataFrame, given: Mapping[str, Any] | None
) -> tuple[dict[str, Any], str]:
    """Settings for one run: the given ones, else run.yaml beside the log, else N inferred from it."""
    s: dict[str, Any] = dict(given or {})
    how = "given"
    if not s:
        run_yaml = path.with_name("run.yaml")
        if run_yaml.exists():
            import yaml

            loaded = yaml.safe_load(run_yaml.read_text()) or {}
            s, how = dict(loaded.get("settings", loaded)), "run.yaml"
    if not s.get("N"):
        n = infer_N(metrics)
        if n:
            s["N"], how = n, "N inferred from the log"
    if "Tb" not in s and "temperature" in metrics.columns and metrics["temperature"].notna().any():
        s["Tb"] = float(metrics["temperature"].dropna().iloc[0])  # the log's own sampler temperature
    s.setdefault("key", str(path))
    s.setdefault("seed", 0)
    if "steps" not in s and len(metrics):
        s["steps"] = int(metrics["step"].max())
    return s, how


def run_text(path: str, summary: Mapping[str, Any], settings: Mapping[str, Any], how: str) -> str:
    """One run's events in a few lines."""
    s = summary
    last = s["last_step"]
    state = "complete" if s["complete"] else "NOT complete"
    lines = [
        f"== {path}",
        f"   steps up to {fstep(last)} ({state}); N={settings.get('N', DASH)} ({how}); {s['n_val']} validations",
        f"   peak {f3(s['peak'])} at step {fstep(s['peak_step'])}; final {f3(s['final'])}",
    ]
    if s["onset"] is None:
        lines.append(
            "   no onset: stable under the Section 2 criteria"
            + (f"; severe {s['severe']}" if s["severe"] else "")
        )
    else:
        back = f", back at {s['recovered_at']}" if s["recovered_at"] is not None else ""
        ref, sev = f3(s["reference"]), fstep(s["severe"])
        lines.append(f"   onset {s['onset']} (running max {ref}), severe {sev}, {s['kind']}{back}")
    lines.append(
        f"   KL > 1 at {fstep(s['kl_cross_1'])}, KL > 0.1 at {fstep(s['kl_cross_01'])},"
        f" lead {flead(s['lead'])}, KL max {fkl(s['kl_max'])},"
        f" KL at step {fstep(s['kl_fixed_step'])} {fkl(s['kl_fixed'])}"
    )
    kl_init = fkl(s["kl_to_init_90"])
    lines.append(f"   last five {f3(s['last5'])}, whole run {f3(s['whole'])}, KL to init at 90 {kl_init}")
    if s["note"]:
        lines.append(f"   NOTE: {s['note']}")
    return "\n".join(lines)


def analyze(paths: Sequence[str], settings: dict[str, Any] | None = None) -> str:
    """Degradation events of every log in ``paths`` and a Table-1-style summary, as printable text.

    ``settings`` (optional, e.g. ``{"N": 192}`` or a full ``Run.settings()``) applies to every path;
    without it each run's ``run.yaml`` is used, else N is inferred from the log. A path that cannot be
    read is reported in the text, not raised, so one bad log does not hide the others.
    """
    blocks, entries = [], []
    for path in paths:
        try:
            metrics, status = load_any(path)
        except Exception as e:  # report and continue: the other logs are still worth reading
            blocks.append(f"== {path}\n   cannot read: {type(e).__name__}: {e}")
            continue
        s, how = _settings_for(Path(path), metrics, settings)
        blocks.append(run_text(path, summarize_run(metrics, s, status), s, how))
        entries.append((s, metrics, status))
    if entries:
        _, disp = table1_frames(entries)
        blocks.append("Summary (Table 1 style, one row per arm):\n" + to_markdown(disp))
    return "\n\n".join(blocks) + "\n"


__all__ = ["analyze", "infer_N", "load_any"]
