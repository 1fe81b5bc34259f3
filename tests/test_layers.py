"""The heavy stack stays at the edge: study, run keys, overrides, parsing, analysis, tables, figures and
the CLI import neither verl, vLLM nor torch (a researcher analyses logs with pandas alone), and the
code that runs inside verl workers imports no analysis."""

from __future__ import annotations

import subprocess
import sys

LIGHT = [
    "coolsampler.study",
    "coolsampler.verl_check",
    "coolsampler.validate",
    "coolsampler.overrides",
    "coolsampler.metrics",
    "coolsampler.analysis",
    "coolsampler.claims",
    "coolsampler.claims_cli",
    "coolsampler.synthetic",
    "coolsampler.synthetic_claims",
    "coolsampler.tables",
    "coolsampler.figures",
    "coolsampler.plotting",
    "coolsampler.labels",
    "coolsampler.provenance",
    "coolsampler.writers",
    "coolsampler.targets",
    "coolsampler.cli",
    "coolsampler.launch",
    "coolsampler.train_job",
    "coolsampler.acceptance",
    "coolsampler.worker.controller",
    "coolsampler.worker.prefork",
    "coolsampler.memory",
    "coolsampler.analyze_cli",
    "coolsampler.status",
    "coolsampler.plan",
    "coolsampler.study_cli",
    "coolsampler.version",
]


def _loaded_after_import(modules: list[str]) -> set[str]:
    code = (
        "import sys\n"
        + "".join(f"import {m}\n" for m in modules)
        + "print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return set(out.split())


def test_light_modules_import_no_heavy_stack():
    loaded = _loaded_after_import(LIGHT)
    assert not loaded & {"torch", "verl", "vllm", "ray", "transformers"}, loaded & {"torch", "verl", "vllm"}


def test_worker_code_imports_no_analysis():
    code = "import sys, coolsampler.worker.losses, coolsampler.worker.controller, coolsampler.worker.verl_config\n" + (
        "print([m for m in sys.modules if m in "
        "('coolsampler.analysis','coolsampler.figures','coolsampler.tables','coolsampler.plotting',"
        "'coolsampler.labels','coolsampler.targets','coolsampler.writers')])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
