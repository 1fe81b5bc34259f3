"""Rule prefetch_model: a hub model at a pinned revision into the study's models dir (coolsampler.train.prefetch).

Snakemake prepends a preamble to this script: no ``from __future__`` import here.
"""

import contextlib
from pathlib import Path

from coolsampler.train.prefetch import prefetch_model

smk = snakemake  # noqa: F821
Path(smk.log[0]).parent.mkdir(parents=True, exist_ok=True)
with open(smk.log[0], "w") as log, contextlib.redirect_stderr(log), contextlib.redirect_stdout(log):
    manifest = prefetch_model(smk.params.hf_id, smk.params.revision, Path(smk.output[0]).parent)
    print(f"{smk.params.hf_id}@{smk.params.revision}: {len(manifest['files'])} files")
