"""``python -m coolsampler.verl_check --study config/paper.yaml --platform gpu``: every run of a study
against verl's own config checks (``coolsampler.worker.verl_config``), one line per run.

Kept out of ``coolsampler.worker``: it reads studies and builds overrides (coolsampler.cli), which the
training image must not depend on (editing a study's code would rebuild the image and retrain every
run). verl is imported only when a check runs.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import sys
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path


def check_study(study: str | Path, platform: str | None = None) -> Iterator[tuple[str, str | None]]:
    """Every run of ``study``: (key, None) if verl accepts its config, else (key, the error)."""
    from coolsampler.cli import overrides_for
    from coolsampler.study import load_study
    from coolsampler.worker.verl_config import VerlConfigError, check_run_config

    for key in load_study(study).by_key():
        try:
            check_run_config(overrides_for(key, study, platform), name=key)
            yield key, None
        except VerlConfigError as err:
            yield key, str(err)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m coolsampler.verl_check",
        description="Check every run of a study against verl's own config checks (no GPU, model or data).",
    )
    parser.add_argument("--study", default="config/paper.yaml")
    parser.add_argument("--platform", choices=["cpu", "gpu"], default=None, help="default: the study's profile")
    args = parser.parse_args(argv)
    out, counts = sys.stdout, {"ok": 0, "FAIL": 0}
    # verl prints and logs as it checks ("[validate_config] All configuration checks passed", the
    # replay buffer's INFO line, warnings): keep one line per run on stdout
    logging.disable(logging.WARNING)
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        for key, err in check_study(args.study, args.platform):
            status = "ok" if err is None else "FAIL"
            counts[status] += 1
            print(f"{status:<5} {key}" if err is None else f"{status:<5} {err}", file=out, flush=True)
    logging.disable(logging.NOTSET)
    total = counts["ok"] + counts["FAIL"]
    print(f"{counts['ok']}/{total} runs of {args.study} pass verl's config checks", file=out)
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
