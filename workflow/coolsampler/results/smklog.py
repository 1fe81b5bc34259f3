"""The one Snakemake log wrapper of the analysis jobs (figures, tables, the claims report).

Why one: a job's log is where a failed rule is explained, so every job writes it the same way: the
package's log records (timestamped) and stderr go to ``smk.log[0]``; a failure is logged there with
its traceback and re-raised with the real stderr restored, so Snakemake reports it and the log
explains it. In ``results`` so that results/ and paper/ can both use it.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LOGGER = "coolsampler"  # the package's loggers (coolsampler.results.claims, ...) propagate to it
FORMAT = "%(asctime)s %(levelname)s %(message)s"


@contextmanager
def snakemake_log(path: str | Path, what: str) -> Iterator[logging.Logger]:
    """Send logging and stderr to ``path`` for the body of the ``with``; on an exception, log
    ``"<what> failed"`` with the traceback, then re-raise. Yields the package's logger."""
    real_stderr = sys.stderr
    with open(path, "w") as log:
        sys.stderr = log
        handler = logging.StreamHandler(log)
        handler.setFormatter(logging.Formatter(FORMAT))
        logger = logging.getLogger(LOGGER)
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        try:
            yield logger
        except Exception:
            logger.exception("%s failed", what)
            raise
        finally:
            logger.removeHandler(handler)
            sys.stderr = real_stderr
