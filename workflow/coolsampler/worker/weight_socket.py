"""verl's weight-push socket, made private to one run on every platform (verl 0.9.1).

After each step the actor pushes its weights to the colocated vLLM sampler over a ZeroMQ ``ipc://``
socket. verl names it ``ipc:///tmp/rl-colocate-zmq-<Ray job id>-replica-<r>-rank-<k>.sock`` on both
ends (the actor's sender, ``vllm_rollout.ServerAdapter``; the sampler's receiver,
``vLLMColocateWorkerExtension._get_zmq_handle``), trusting the job id to tell runs apart. It does
not: every fresh Ray cluster numbers its first job ``01000000``. So two runs on one host share the
path, the later sender unlinks and rebinds it, and one run's sampler receives the other's weights or
both stall at their first push (seen on CPU: ``loaded_weight.shape[output_dim] ==
self.org_vocab_size`` failing in reload_weights, then both runs stalled). On GPUs it happens just as
well: SLURM places two 4-GPU jobs on one 8-GPU node, and Apptainer shares the host's /tmp between
them. And a stale socket file another user left in /tmp cannot be removed; verl ignores that
failure and its bind then fails with an error that names nothing.

So both ends move the socket into a directory of the run's own,
``/tmp/coolsampler-<uid>-<token>/`` (mode 0700, checked to be this user's and private), where
``<token>`` is ``coolsampler.worker.env.RUN_TOKEN_ENV``, drawn afresh for each attempt by
``coolsampler.train.launch.run_verl``, which removes the directory when the attempt ends. The sender
also turns a stale file it cannot remove into an error naming the file and its owner. Without the
token the handle stays verl's.

Loaded in every verl process (driver, Ray workers, the vLLM worker) through
``VERL_USE_EXTERNAL_MODULES`` (``coolsampler.train.platform.WORKER_MODULES``), from inside verl's own
``__init__``: so it imports the standard library only, and patches verl's modules right after they
are first imported (or at once, if they already are). Delete it when verl names the socket by
something unique per run.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from coolsampler.worker.after_import import patch_after_import
from coolsampler.worker.env import RUN_TOKEN_ENV

# What verl 0.9.1 puts in front of the rest of the handle, on both ends.
VERL_PREFIX = "ipc:///tmp/rl-colocate-zmq-"
# AF_UNIX paths hold 108 bytes including the terminating NUL.
MAX_SOCKET_PATH = 107

SENDER_MODULE = "verl.workers.rollout.vllm_rollout.vllm_rollout"
RECEIVER_MODULE = "verl.workers.rollout.vllm_rollout.utils"


def socket_dir(token: str) -> Path:
    """Where run ``token``'s sockets live (nothing is created: see ``private_dir``)."""
    return Path(f"/tmp/coolsampler-{os.getuid()}-{token}")


def private_dir(token: str) -> Path:
    """Run ``token``'s socket directory, created 0700 if missing, and checked to be this user's own
    directory that no one else can enter: a socket in someone else's directory could be replaced
    by theirs. Raises RuntimeError saying which directory and why."""
    path = socket_dir(token)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(path)  # lstat: a symlink planted under the name is refused, not followed
    uid = os.getuid()
    if not stat.S_ISDIR(st.st_mode):
        raise RuntimeError(f"weight-push socket directory {path} is not a directory (a symlink or a file)")
    if st.st_uid != uid:
        raise RuntimeError(f"weight-push socket directory {path} belongs to uid {st.st_uid}, not to this user ({uid})")
    if st.st_mode & 0o077:
        raise RuntimeError(
            f"weight-push socket directory {path} has mode {stat.S_IMODE(st.st_mode):o}: "
            "others may enter it (0700 expected)"
        )
    return path


def run_socket(handle: str) -> str:
    """verl's weight-push socket ``handle`` moved into this run's private directory (created here, so
    either end may ask first). Idempotent: a handle already there is returned unchanged; without the
    token (``RUN_TOKEN_ENV``), or for a handle verl did not name, the handle is verl's."""
    token = os.environ.get(RUN_TOKEN_ENV)
    if not token:
        return handle
    directory = socket_dir(token)
    if handle.startswith(f"ipc://{directory}/"):
        return handle
    if not handle.startswith(VERL_PREFIX):
        return handle
    path = f"{private_dir(token)}/{handle[len(VERL_PREFIX) :]}"
    if len(path.encode()) > MAX_SOCKET_PATH:
        raise RuntimeError(
            f"weight-push socket path {path} is {len(path.encode())} bytes; "
            f"AF_UNIX allows {MAX_SOCKET_PATH} (is {RUN_TOKEN_ENV} too long?)"
        )
    return f"ipc://{path}"


def clear_stale_socket(handle: str) -> None:
    """Remove a socket file a previous run left at ``handle``'s path, or say why it cannot be.

    verl's binder removes it too, but ignores every failure, and then its bind fails with an error
    that names neither the file nor its owner."""
    if not handle.startswith("ipc://"):
        return
    path = handle[len("ipc://") :]
    try:
        os.remove(path)
    except FileNotFoundError:
        pass
    except PermissionError as e:
        try:
            owner = f"uid {os.lstat(path).st_uid}"
        except OSError:
            owner = "an unknown user"
        raise RuntimeError(
            f"weight-push socket {path}: a stale file owned by {owner} that this user "
            f"(uid {os.getuid()}) cannot remove ({e.strerror}); remove it or run with {RUN_TOKEN_ENV} set"
        ) from e


def patch_sender(module: Any) -> None:
    """The actor's end: ``ServerAdapter.__init__`` sets ``zmq_handle``, which its sender binds."""
    cls = module.ServerAdapter
    init = cls.__init__
    if getattr(init, "_coolsampler_private_socket", False):
        return

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        self.zmq_handle = run_socket(self.zmq_handle)
        clear_stale_socket(self.zmq_handle)

    __init__._coolsampler_private_socket = True  # type: ignore[attr-defined]
    cls.__init__ = __init__


def patch_receiver(module: Any) -> None:
    """The sampler's end: ``vLLMColocateWorkerExtension._get_zmq_handle``, which its receiver connects
    to. Patched on the base class, so it covers every subclass that does not override it
    (``coolsampler.worker.vllm_cpu_ext.CpuReloadWorkerExtension``)."""
    cls = module.vLLMColocateWorkerExtension
    get = cls._get_zmq_handle
    if getattr(get, "_coolsampler_private_socket", False):
        return

    def _get_zmq_handle(self: Any) -> str:
        return run_socket(get(self))

    _get_zmq_handle._coolsampler_private_socket = True  # type: ignore[attr-defined]
    cls._get_zmq_handle = _get_zmq_handle


def install() -> None:
    """Patch both ends: now if verl's module is already imported, else right after its import."""
    patch_after_import(SENDER_MODULE, patch_sender)
    patch_after_import(RECEIVER_MODULE, patch_receiver)


install()

__all__ = ["MAX_SOCKET_PATH", "clear_stale_socket", "install", "private_dir", "run_socket", "socket_dir"]
