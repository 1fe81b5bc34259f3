"""The analysis jobs' one Snakemake log wrapper: records and stderr in the log, a failure logged with
its traceback and re-raised, stderr given back either way."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest

from coolsampler.results.smklog import snakemake_log


def test_records_and_stderr_go_to_the_log(tmp_path: Path) -> None:
    real = sys.stderr
    with snakemake_log(tmp_path / "job.log", "job") as logger:
        logging.getLogger("coolsampler.results.claims").info("a child logger's record")
        logger.warning("the package's own")
        print("to stderr", file=sys.stderr)
    text = (tmp_path / "job.log").read_text()
    assert "INFO a child logger's record" in text and "WARNING the package's own" in text
    assert "to stderr" in text and sys.stderr is real


def test_a_failure_is_logged_with_its_traceback_and_re_raised(tmp_path: Path) -> None:
    real = sys.stderr
    with pytest.raises(ValueError, match="bad panel"), snakemake_log(tmp_path / "job.log", "rendering fig3"):
        raise ValueError("bad panel")
    text = (tmp_path / "job.log").read_text()
    assert "ERROR rendering fig3 failed" in text and "Traceback" in text and "bad panel" in text
    assert sys.stderr is real
    assert not logging.getLogger("coolsampler").handlers  # nothing left behind for the next job
