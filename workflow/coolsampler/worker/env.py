"""Names of the environment variables the pipeline hands code that runs inside verl's processes.

Stdlib only and nothing else: the train layer imports these names to set them, the worker modules to
read them, and neither side may drag the other's imports along (``coolsampler.worker.cpu_platform``
imports torch and verl).
"""

from __future__ import annotations

# A token unique to one attempt of one run (coolsampler.train.launch.run_verl sets it), which names the
# private directory of verl's weight-push socket on every platform (coolsampler.worker.weight_socket).
RUN_TOKEN_ENV = "COOLSAMPLER_RUN_TOKEN"

__all__ = ["RUN_TOKEN_ENV"]
