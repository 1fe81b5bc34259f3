"""The acceptance's summary: a table of checks and of runs, as Markdown and JSON; the failed checks named
first, so that a failure says what failed without reading the table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def summary_markdown(s: dict[str, Any]) -> str:
    failed = [c["name"] for c in s["checks"] if c["status"] == "fail"]
    lines = [
        f"# Acceptance ({s['platform']} platform): {'PASSED' if s['passed'] else 'FAILED'}",
        "",
        f"Model: {s['model']['label']}",
        "",
    ]
    if s.get("broken_gate"):
        lines += ["**The gate was deliberately broken (the sampler refreshed at every step): this run must FAIL.**", ""]
    if failed:
        lines += ["Failed: " + "; ".join(failed), ""]
    lines += [
        f"Wall time {s['wall_s']:.0f} s; GPUs {s['gpus']}.",
        "",
        "| check | value | limit | result |",
        "|---|---|---|---|",
    ]
    for c in s["checks"]:
        lines.append(f"| {c['name']} | {c['value']} | {c['limit']} | {c['status'].upper()} |")
    lines += [
        "",
        "| run | N | steps | wall s | start-up s | host peak MB | GPU peak MB | error |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for k, r in s["runs"].items():
        lines.append(
            f"| {k} | {r['N']} | {r['steps']} | {r['wall_s']} | {r['startup_s']} | {r['host_peak_mb']} "
            f"| {r['gpu_peak_mb']} | {r['error'] or ''} |"
        )
    return "\n".join(lines) + "\n"


def write_summary(s: dict[str, Any], out: Path) -> None:
    (out / "summary.json").write_text(json.dumps(s, indent=1, default=str))
    (out / "summary.md").write_text(summary_markdown(s))
