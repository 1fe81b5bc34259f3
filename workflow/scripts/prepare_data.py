"""Snakemake script of the prepare_gsm8k / prepare_math rules (workflow/rules/data.smk).

Reads ``snakemake.output.{parquet,manifest}``, ``snakemake.wildcards.split``,
``snakemake.params.{task,cache,revisions}`` and ``snakemake.log[0]`` and calls
``coolsampler.train.data.prepare_split``. Everything the HF ``datasets`` package prints (progress bars,
retries) goes to the log, so a failed download can be read there; the error itself is re-raised for
Snakemake to report.

Without Snakemake it is a small CLI for one split::

    python workflow/scripts/prepare_data.py --task gsm8k --split test --data-dir results/data \
        --cache .cache/datasets

No ``from __future__`` import: Snakemake prepends a preamble to the script, after which a future
import is a syntax error (Python 3.11 needs none for the annotations used here).
"""

import argparse
import contextlib
import logging
import sys
from pathlib import Path
from typing import Any

from coolsampler.train.data import get_spec, output_paths, prepare_split


def run(
    task: str, split: str, data_dir: Path, cache: str, revisions: dict[str, str] | None, log_path: str | None
) -> dict[str, Any]:
    """Prepare one split, logging to ``log_path`` (stderr when None)."""
    revision = (revisions or {}).get(get_spec(task, split).dataset_id)
    with contextlib.ExitStack() as stack:
        if log_path is not None:
            Path(log_path).parent.mkdir(parents=True, exist_ok=True)
            fh = stack.enter_context(open(log_path, "w", encoding="utf-8"))
            stack.enter_context(contextlib.redirect_stderr(fh))
            stack.enter_context(contextlib.redirect_stdout(fh))
        logging.basicConfig(
            stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", force=True
        )
        logging.info("preparing %s/%s into %s (cache %s, revision %s)", task, split, data_dir, cache, revision)
        try:
            manifest = prepare_split(task, split, data_dir, cache, revision=revision)
        except Exception:
            logging.exception("preparation of %s/%s failed", task, split)
            raise
        logging.info("done: %d rows, sha256 %s", manifest["count"], manifest["sha256"])
        return manifest


def main_snakemake(smk: Any) -> None:
    """Entry point under Snakemake's ``script:`` directive."""
    task = smk.params.task
    split = smk.wildcards.split
    parquet = Path(smk.output.parquet)
    data_dir = parquet.parent.parent
    expected = output_paths(data_dir, task, split)
    if (parquet, Path(smk.output.manifest)) != expected:
        raise ValueError(f"rule outputs {parquet}, {smk.output.manifest} do not follow the layout {expected}")
    run(task, split, data_dir, str(smk.params.cache), dict(smk.params.revisions or {}), smk.log[0])


def main_cli(argv: list[str] | None = None) -> None:
    """Entry point from the command line (one split)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", required=True, choices=["gsm8k", "math"])
    parser.add_argument("--split", required=True)
    parser.add_argument("--data-dir", default="results/data", type=Path)
    parser.add_argument("--cache", default=".cache/datasets")
    parser.add_argument("--revision", default=None, help="HF commit of the source dataset")
    args = parser.parse_args(argv)
    revisions = {get_spec(args.task, args.split).dataset_id: args.revision} if args.revision else None
    run(args.task, args.split, args.data_dir, args.cache, revisions, None)


if __name__ == "__main__":
    if "snakemake" in globals():
        main_snakemake(globals()["snakemake"])
    else:
        main_cli()
