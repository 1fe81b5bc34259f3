"""coolsampler.worker.prefork: the interpreter options of Ray's worker command a forked child already has.

Found by training in the CPU image, whose PYTHONNOUSERSITE=1 makes Ray start every worker with ``-s``
(copied from its driver's flags): the forked child refused it, every Ray worker died, and the run stalled
silently until the watchdog stopped it.
"""

from __future__ import annotations

import subprocess
import sys


def options(*flags: str, env: dict | None = None) -> set[str]:
    code = "from coolsampler.worker.prefork import inherited_options; print(sorted(inherited_options()))"
    out = subprocess.run([sys.executable, *flags, "-c", code], capture_output=True, text=True, check=True, env=env)
    return set(eval(out.stdout))


def test_unbuffered_always_and_site_flags_when_this_interpreter_has_them():
    import os

    env = {k: v for k, v in os.environ.items() if k != "PYTHONNOUSERSITE"}
    assert options(env=env) == {"-u"}
    assert options(env={**env, "PYTHONNOUSERSITE": "1"}) == {"-u", "-s"}
    assert options("-s", env=env) == {"-u", "-s"}
