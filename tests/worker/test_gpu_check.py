"""A GPU without bf16 is named in one line before any engine is built (coolsampler.worker.gpu_check)."""

from __future__ import annotations

import subprocess
import sys

from coolsampler.worker.gpu_check import bf16_problem


def test_a_gpu_below_ampere_is_named_with_its_capability():
    devices = [("NVIDIA H100 80GB HBM3", (9, 0)), ("Tesla V100-SXM2-32GB", (7, 0))]
    line = bf16_problem(devices)
    assert line is not None and "\n" not in line
    assert line.startswith("GPU 1 (Tesla V100-SXM2-32GB, compute capability 7.0) has no bf16")
    assert bf16_problem(devices[:1]) is None
    assert bf16_problem([("NVIDIA A100-SXM4-80GB", (8, 0))]) is None
    assert bf16_problem([]) is None  # no GPU: nothing to say (a login node)


def test_the_module_is_what_a_job_runs_in_the_image():
    """``python -m coolsampler.worker.gpu_check``: exit 0 where no GPU lacks bf16 (here: none at all)."""
    res = subprocess.run([sys.executable, "-m", "coolsampler.worker.gpu_check"], capture_output=True, text=True)
    assert res.returncode == 0 and res.stdout == ""


def test_a_training_job_stops_on_that_line_through_its_container_prefix():
    """The job asks through the prefix that training uses (the image sees the GPUs), and fails with the
    check's own line, not a traceback."""
    import pytest

    from coolsampler.train.job import check_gpus
    from coolsampler.train.launch import TrainingFailed

    fake_image = ["bash", "-c", 'echo "GPU 0 (Tesla T4, compute capability 7.5) has no bf16"; exit 1', "--"]
    with pytest.raises(TrainingFailed, match=r"^GPU 0 \(Tesla T4, compute capability 7.5\) has no bf16$"):
        check_gpus(fake_image)
    check_gpus(None)  # this interpreter, no GPU: passes
