"""The README's smoke results are generated from a results directory (workflow/tools/readme_results.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "workflow" / "tools" / "readme_results.py"

TABLE = """**Table 1.** smoke
| Objective | Tb | N | Degraded |
|---|---|---|---|
| TIS | 1.0 | 32 | 1/2 |
<sub>study smoke | commit abc1234</sub>
"""


def _results(root: Path) -> Path:
    res = root / "results" / "smoke"
    res.mkdir(parents=True)
    (res / "table1.md").write_text(TABLE)
    for i, complete in enumerate((True, True, False)):
        run = res / "runs" / "toy-qwen2" / "arith" / f"r{i}"
        run.mkdir(parents=True)
        (run / "status.json").write_text(json.dumps({"complete": complete}))
        (run / "train.log").write_text(f"[coolsampler] x: finished 64 steps in {300 + i}s (start-up {90 + i}s)\n")
        (run / "train.benchmark.tsv").write_text(f"s\th:m:s\n{310 + 60 * i}\t0:05:10\n")
        (run / "run.yaml").write_text("study: smoke\ntraining_key:\n  verl: v\n  key: 0123456789ab\nplatform: cpu\n")
    return res


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, check=False)


def test_block_is_written_from_the_results_and_checked(tmp_path):
    res = _results(tmp_path)
    readme = tmp_path / "README.md"
    readme.write_text("intro\n<!-- smoke-results -->\nold pasted numbers\n<!-- /smoke-results -->\nafter\n")
    refs = tmp_path / "fingerprints"
    refs.mkdir()
    (refs / "amd.json").write_text(json.dumps({"cpu": "AMD EPYC (avx2)", "training_keys": ["0123456789ab"]}))
    (refs / "old.json").write_text(json.dumps({"cpu": "Intel Xeon (avx512f)", "training_keys": ["ffffffffffff"]}))
    args = ("--results", str(res), "--readme", str(readme), "--references", str(refs))
    assert _run(*args, "--check").returncode == 1  # pasted numbers are not what the results give
    assert _run(*args).returncode == 0
    text = readme.read_text()
    assert "old pasted numbers" not in text and text.startswith("intro\n") and text.endswith("after\n")
    assert "| TIS | 1.0 | 32 | 1/2 |" in text and "commit abc1234" in text
    assert "runs trained under training key 0123456789ab, on AMD EPYC (avx2))" in text  # not the old key's CPU
    assert "Runs complete: 2 of 3" in text and "start-up 90–92 s" in text and "6.2 min (median)" in text
    assert _run(*args, "--check").returncode == 0


def test_the_readme_has_the_block():
    text = (REPO / "README.md").read_text()
    assert text.count("<!-- smoke-results -->") == 1 and text.count("<!-- /smoke-results -->") == 1


def test_missing_results_fail_with_a_clear_message(tmp_path):
    res = _run("--results", str(tmp_path / "none"), "--readme", str(REPO / "README.md"))
    assert res.returncode != 0 and "run the smoke study first" in res.stderr
