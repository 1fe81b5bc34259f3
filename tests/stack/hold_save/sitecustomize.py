"""Test hook of tests/stack/test_slurm.py: hold a run's checkpoint save open, so that a test can preempt the
job *during* that save, or at a known point after an earlier one (a toy model's save takes a fraction of a
second, and a toy run trains on while its job is being stopped).

On PYTHONPATH, Python imports this file in every process at start-up (``sitecustomize``), so it reaches
verl's processes inside a SLURM job as a real user's environment would (``sbatch --export=ALL``).
``COOLSAMPLER_TEST_HOLD_SAVE`` is a JSON list of ``{"path": <text>, "step": <k>, "seconds": <s>}``: the
learner's save (``FSDPCheckpointManager.save_checkpoint``: after patch 0004 has written the sampler
snapshot, before the learner's state) of checkpoint ``global_step_<k>`` whose path contains ``<text>``
first writes ``<checkpoints>/.held-global_step_<k>`` and sleeps, once per run (the marker stays for the
resumed attempt). Without the variable it does nothing. Never part of the package or of the image.
"""

import os

_SPEC = os.environ.get("COOLSAMPLER_TEST_HOLD_SAVE")

if _SPEC:
    import json
    import time
    from pathlib import Path

    from coolsampler.worker.after_import import patch_after_import

    _HOLDS = json.loads(_SPEC)

    def _hold(module):
        cls = module.FSDPCheckpointManager
        save = cls.save_checkpoint

        def save_checkpoint(self, local_path, *args, **kwargs):
            step_dir = Path(local_path).parent  # local_path: <run>/checkpoints/global_step_<k>/actor
            for h in _HOLDS:
                marker = step_dir.parent / f".held-{step_dir.name}"
                if h["path"] in str(local_path) and step_dir.name == f"global_step_{h['step']}" and not marker.exists():
                    marker.write_text(str(os.getpid()))
                    time.sleep(float(h["seconds"]))
            return save(self, local_path, *args, **kwargs)

        cls.save_checkpoint = save_checkpoint

    patch_after_import("verl.utils.checkpoint.fsdp_checkpoint_manager", _hold)
