"""CPU only: verl's processes forked from one that has already imported torch, transformers and vLLM.

Upstream limitation covered (Ray 2.60, verl 0.9.1): Ray starts every actor in a fresh interpreter
(``default_worker.py``), and each of verl's ten processes of a run imports torch, transformers,
tensordict, verl and mostly vLLM again: 6-17 CPU-seconds and 260-950 MB apiece, measured by
``workflow/tools/bench_stack.py``. On a GPU node that is noise beside loading a model; on two CPU
cores it is most of a run's start-up. Delete this module when Ray can fork workers from a warm
process (or verl needs fewer of them).

How: ``python -m coolsampler.worker.prefork verl.trainer.main_ppo OVERRIDE... RAY_OVERRIDE``
(``coolsampler.train.launch.verl_command``) imports ``PRELOAD`` once, forks the verl driver, and serves a
Unix socket. Ray's runtime env names the command that runs ``default_worker.py``
(``py_executable``); ours is ``prefork_client.py``, which hands the worker's argv, environment,
working directory and standard streams to this server. The server forks a copy of itself that takes
them over and runs ``default_worker.py`` as ``python`` would: the same program in the same
environment (plus what the preloaded imports put in it), minus the imports. Ray and verl are
imported after the fork (see PRELOAD). What a fork cannot copy from a fresh interpreter: the
string-hash seed is the server's (verl sets PYTHONHASHSEED for workers under full determinism; the
same deterministic run with and without this server logs the same samples and rewards, see
tests/stack/test_verl_stack.py). Forked workers share the imported pages until they write to them.

Measured (bench_stack.py, 2 cores, one smoke run): start-up 105 -> 56 s, CPU-seconds to the first
step 129 -> 64, memory (sum of USS) 5.2 -> 2.7 GB; steps unchanged.

Every process stays in the session ``coolsampler.train.launch`` started, so its clean-up (the session's
process group) still stops all of them. A client that cannot reach the server runs the worker the
ordinary way; a worker whose client dies (Ray killed it) stops too. ``COOLSAMPLER_PREFORK_PRELOAD``
(comma-separated modules) replaces PRELOAD, for measurements.

Imports only the standard library at module level: ``PRELOAD`` is imported by ``serve``.
"""

from __future__ import annotations

import atexit
import gc
import importlib
import json
import os
import random
import select
import signal
import socket
import sys
import tempfile
import threading
import traceback
from pathlib import Path

# the client runs isolated from this package (stdlib only): it holds the name, this module reads it
from coolsampler.worker.prefork_client import SOCKET_ENV

CLIENT = Path(__file__).with_name("prefork_client.py")

# What verl's processes of a run import, except Ray and what imports it: Ray reads a worker's job id
# and its raylet's pid from the environment once, when ``ray`` is imported (``RayConfig``, whose
# ``initialize`` does not read them again), so a worker must import Ray itself, after the fork. That
# leaves ~2 of a worker's ~11 CPU-seconds of imports (Ray, verl's own modules, vLLM's engine): the
# rest is torch, transformers, tensordict, vLLM's server side and their dependencies. A module missing
# here is imported by the worker itself (slower, not wrong); one that imports Ray stops the server.
PRELOAD: tuple[str, ...] = (
    "torch",
    "torch._dynamo",
    "torch.distributed.fsdp",
    "transformers",
    "transformers.models.qwen2.modeling_qwen2",
    "tensordict",
    "tensordict.nn",
    "vllm",
    "vllm.config",
    "vllm.engine.arg_utils",
    "vllm.entrypoints.openai.api_server",
    "vllm.inputs",
    "vllm.outputs",
    "vllm.sampling_params",
    "openai",
    "peft",
    "accelerate",
    "datasets",
    "pandas",
    "pyarrow",
    "sympy",
    "hydra",
    "omegaconf",
    "fastapi",
    "aiohttp",
    "uvicorn",
    "zmq",
    "msgspec",
    "codetiming",
)


def client_command() -> str:
    """Ray's ``py_executable`` for a run's workers: the client, run by this interpreter without
    site-packages and isolated (it needs only the standard library, and starts in milliseconds)."""
    return f"{sys.executable} -S -I {CLIENT}"


def ray_override() -> str:
    """The Hydra override that gives verl's Ray cluster ``client_command`` as its ``py_executable``."""
    return f"+ray_kwargs.ray_init.runtime_env.py_executable='{client_command()}'"


def _recv_request(conn: socket.socket) -> tuple[dict, list[int]]:
    """One request: an 8-byte length, a JSON body (argv, env, cwd), the client's fds 0, 1 and 2."""
    data, fds, _flags, _addr = socket.recv_fds(conn, 1 << 20, 3)
    if len(data) < 8:
        raise ConnectionError("short request")
    size = int.from_bytes(data[:8], "big")
    body = data[8:]
    while len(body) < size:
        chunk = conn.recv(size - len(body))
        if not chunk:
            raise ConnectionError("request cut short")
        body += chunk
    if len(fds) != 3:
        raise ConnectionError(f"expected 3 descriptors, got {len(fds)}")
    return json.loads(body), fds


def _reset_child_state() -> None:
    """What a fresh interpreter would have that a fork does not: default signal handlers and fresh
    random states (verl seeds explicitly where a run must be reproducible)."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    random.seed()
    np = sys.modules.get("numpy")
    if np is not None:
        np.random.seed(int.from_bytes(os.urandom(4), "little"))


def _exit_child(code: int) -> None:
    """Leave a forked child as its program would (atexit handlers run: Ray's own shutdown is one),
    without unwinding into the server's frames."""
    try:
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code)


def _run_as_main(run) -> int:
    try:
        run()
        return 0
    except SystemExit as e:
        if e.code is None:
            return 0
        if isinstance(e.code, int):
            return e.code
        print(e.code, file=sys.stderr)
        return 1
    except BaseException:
        traceback.print_exc()
        return 1


def _python_path(env: dict[str, str], script: str, base: list[str]) -> list[str]:
    """``sys.path`` as ``python SCRIPT`` would have it under ``env``: the script's folder, then
    PYTHONPATH, then the interpreter's own entries."""
    extra = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    head = [os.path.dirname(os.path.abspath(script)), *extra]
    return [*head, *(p for p in base if p not in head)]


def inherited_options() -> set[str]:
    """Interpreter options of Ray's worker command that a child forked from this process already has:
    -u (our stdio is unbuffered: PYTHONUNBUFFERED), and the -s / -S Ray copies from its driver's own flags
    (PYTHONNOUSERSITE=1, as the images set, gives -s) when this process runs with them too."""
    return {"-u"} | ({"-s"} if sys.flags.no_user_site else set()) | ({"-S"} if sys.flags.no_site else set())


def _worker_child(
    req: dict, fds: list[int], conn: socket.socket, base_path: list[str], import_env: dict[str, str]
) -> None:
    """In the forked child: become ``python [-u] SCRIPT ARGS...`` in the client's place."""
    _reset_child_state()
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    argv = list(req["argv"])
    while argv and argv[0].startswith("-"):
        opt = argv.pop(0)
        if opt not in inherited_options():
            print(f"prefork: interpreter option {opt!r} not supported", file=sys.stderr)
            _exit_child(2)
    if not argv:
        print("prefork: no script to run", file=sys.stderr)
        _exit_child(2)
    os.chdir(req["cwd"])
    os.environ.clear()
    os.environ.update(req["env"])
    for k, v in import_env.items():
        os.environ.setdefault(k, v)
    sys.argv = argv
    sys.path[:] = _python_path(req["env"], argv[0], base_path)

    def lifeline() -> None:
        # The client holds the other end: when Ray kills it, this worker goes too.
        try:
            while conn.recv(1):
                pass
        except OSError:
            pass
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=lifeline, name="prefork-lifeline", daemon=True).start()
    import runpy

    _exit_child(_run_as_main(lambda: runpy.run_path(argv[0], run_name="__main__")))


def _fork(child) -> int:
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    pid = os.fork()
    if pid == 0:
        try:
            child()
        finally:
            os._exit(1)  # child() exits itself; this only guards against a return
    return pid


def _send(conn: socket.socket, line: str) -> None:
    try:
        conn.sendall(line.encode() + b"\n")
    except OSError:
        pass  # the client is gone; its worker's lifeline has seen it too


def serve(module: str, args: list[str], preload: tuple[str, ...] = PRELOAD) -> int:
    """Import ``preload``, fork ``python -m MODULE ARGS...``, serve forks of Ray workers (whose
    ``py_executable`` is ``client_command()``) until it exits; return its exit code."""
    before = dict(os.environ)
    if os.environ.get("VERL_PLATFORM", "").lower() == "cpu":
        # before vLLM is pre-imported: it picks its kernel library once, at its first import
        importlib.import_module("coolsampler.worker.cpu_kernels")
    for name in preload:
        try:
            importlib.import_module(name)
        except Exception as e:  # the worker imports it itself then: slower, not wrong
            print(f"prefork: could not preload {name}: {e!r}", file=sys.stderr)
    if "ray" in sys.modules:
        raise RuntimeError("prefork: a preloaded module imported ray; Ray must be imported after the fork")
    # what the imports put in the environment (vLLM: TORCHINDUCTOR_*, cv2: LD_LIBRARY_PATH...): a worker
    # that imported them itself would have it, and pass it on (vLLM's engine-core process inherits it)
    import_env = {k: v for k, v in os.environ.items() if before.get(k) != v}
    gc.collect()
    gc.freeze()  # keep imported objects out of the collector's writes: their pages stay shared

    sockdir = tempfile.mkdtemp(prefix="coolsampler-prefork-")
    path = os.path.join(sockdir, "s")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(64)
    os.environ[SOCKET_ENV] = path  # the driver's environment, so Ray's workers' and their clients'
    base_path = list(sys.path[1:])  # without this module's -m entry (the working directory)

    def driver() -> None:
        srv.close()
        _reset_child_state()
        sys.argv = [module, *args]
        import runpy

        _exit_child(_run_as_main(lambda: runpy.run_module(module, run_name="__main__", alter_sys=True)))

    driver_pid = _fork(driver)
    clients: dict[int, socket.socket] = {}
    driver_code: int | None = None
    forward = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}
    for sig in forward:  # a signal to the server is one to the run
        signal.signal(sig, lambda s, _f: os.kill(driver_pid, s))
    try:
        while driver_code is None:
            ready, _, _ = select.select([srv], [], [], 0.2)
            if ready:
                conn, _ = srv.accept()
                try:
                    req, fds = _recv_request(conn)
                except (OSError, ValueError) as e:
                    print(f"prefork: bad request: {e!r}", file=sys.stderr)
                    conn.close()
                    continue

                def worker(req=req, fds=fds, conn=conn) -> None:
                    srv.close()
                    for other in clients.values():
                        other.close()
                    _worker_child(req, fds, conn, base_path, import_env)

                pid = _fork(worker)
                for fd in fds:
                    os.close(fd)
                clients[pid] = conn
                _send(conn, f"pid {pid}")
            while True:  # reap every child that has ended
                try:
                    pid, status = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    pid = 0
                if pid == 0:
                    break
                if pid == driver_pid:
                    driver_code = os.waitstatus_to_exitcode(status)
                elif pid in clients:
                    code = os.waitstatus_to_exitcode(status)
                    conn = clients.pop(pid)
                    _send(conn, f"signal {-code}" if code < 0 else f"exit {code}")
                    conn.close()
    finally:
        srv.close()
        for conn in clients.values():
            conn.close()
        try:
            os.unlink(path)
            os.rmdir(sockdir)
        except OSError:
            pass
    return driver_code if driver_code >= 0 else 128 - driver_code


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    preload = tuple(m for m in os.environ.get("COOLSAMPLER_PREFORK_PRELOAD", ",".join(PRELOAD)).split(",") if m)
    if argv[:1] == ["--preload"] and len(argv) >= 2:  # tests: a cheap preload
        preload = tuple(m for m in argv[1].split(",") if m)
        argv = argv[2:]
    if not argv or argv[0].startswith("-"):
        print("usage: python -m coolsampler.worker.prefork [--preload MOD,...] MODULE [ARG...]", file=sys.stderr)
        return 2
    return serve(argv[0], argv[1:], preload)


if __name__ == "__main__":
    sys.exit(main())
