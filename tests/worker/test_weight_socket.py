"""verl's weight-push socket, private to one run on every platform (coolsampler.worker.weight_socket).

verl names the socket by the Ray job id, ``01000000`` in every fresh Ray cluster, so two runs on one
node (two SLURM jobs on an 8-GPU node, Apptainer sharing the host's /tmp) would exchange weights.
Both ends move it into ``/tmp/coolsampler-<uid>-<token>/``; the tests patch stand-ins for verl's two
classes exactly as the hooks patch verl's, and check that the ends agree."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from coolsampler.train.container import PASS_ENV
from coolsampler.train.launch import run_verl
from coolsampler.train.platform import PLATFORMS, get_platform
from coolsampler.worker import weight_socket
from coolsampler.worker.env import RUN_TOKEN_ENV
from coolsampler.worker.weight_socket import (
    MAX_SOCKET_PATH,
    patch_receiver,
    patch_sender,
    private_dir,
    run_socket,
    socket_dir,
)

VERL = "ipc:///tmp/rl-colocate-zmq-01000000-replica-0-rank-0.sock"


@pytest.fixture
def token(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A token of this test's own (no other run's directory is touched), set as a run's would be; its
    directory is removed afterwards."""
    tok = f"test{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv(RUN_TOKEN_ENV, tok)
    yield tok
    d = socket_dir(tok)
    if d.is_dir() and not d.is_symlink():
        d.chmod(0o700)
        shutil.rmtree(d)


def fake_verl() -> tuple[SimpleNamespace, SimpleNamespace]:
    """Stand-ins for verl's two modules: each end names the socket as verl 0.9.1 does."""

    class ServerAdapter:
        def __init__(self, replica_rank: int = 0, local_rank: int = 0) -> None:
            self.zmq_handle = f"ipc:///tmp/rl-colocate-zmq-01000000-replica-{replica_rank}-rank-{local_rank}.sock"

    class vLLMColocateWorkerExtension:  # noqa: N801  (verl's name)
        def _get_zmq_handle(self) -> str:
            return VERL

    class CpuReloadWorkerExtension(vLLMColocateWorkerExtension):  # like coolsampler.worker.vllm_cpu_ext
        pass

    sender = SimpleNamespace(ServerAdapter=ServerAdapter)
    receiver = SimpleNamespace(
        vLLMColocateWorkerExtension=vLLMColocateWorkerExtension, CpuReloadWorkerExtension=CpuReloadWorkerExtension
    )
    patch_sender(sender)
    patch_receiver(receiver)
    return sender, receiver


@pytest.mark.parametrize("platform", list(PLATFORMS))
def test_every_platform_loads_the_private_socket(platform: str) -> None:
    """verl imports VERL_USE_EXTERNAL_MODULES in its driver, its Ray workers and the vLLM worker."""
    modules = get_platform(platform).env()["VERL_USE_EXTERNAL_MODULES"].split(",")
    assert "coolsampler.worker.weight_socket" in modules


def test_container_forwards_the_run_token() -> None:
    """Docker copies only the variables it is named; without the token both ends would keep verl's name."""
    assert RUN_TOKEN_ENV in PASS_ENV


def test_both_ends_meet_in_the_run_s_private_directory(token: str) -> None:
    sender, receiver = fake_verl()
    sent = sender.ServerAdapter().zmq_handle
    assert sent == receiver.vLLMColocateWorkerExtension()._get_zmq_handle()
    assert sent == receiver.CpuReloadWorkerExtension()._get_zmq_handle()  # a subclass is covered too
    d = Path(f"/tmp/coolsampler-{os.getuid()}-{token}")
    assert sent == f"ipc://{d}/01000000-replica-0-rank-0.sock"
    assert d.is_dir() and (d.stat().st_mode & 0o777) == 0o700 and d.stat().st_uid == os.getuid()
    assert len(sent[len("ipc://") :].encode()) <= MAX_SOCKET_PATH
    assert run_socket(sent) == sent  # idempotent: applied once, whichever end asks first
    assert sender.ServerAdapter(replica_rank=1).zmq_handle != sent  # replicas and ranks stay apart


def test_another_run_gets_another_directory(token: str, monkeypatch: pytest.MonkeyPatch) -> None:
    mine = run_socket(VERL)
    other = f"test{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv(RUN_TOKEN_ENV, other)
    try:
        assert run_socket(VERL) != mine
    finally:
        shutil.rmtree(socket_dir(other), ignore_errors=True)


def test_without_the_token_the_handle_is_verl_s(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(RUN_TOKEN_ENV, raising=False)
    removed: list[str] = []
    monkeypatch.setattr(weight_socket.os, "remove", removed.append)  # never touch a real run's /tmp file
    sender, receiver = fake_verl()
    assert sender.ServerAdapter().zmq_handle == VERL
    assert receiver.vLLMColocateWorkerExtension()._get_zmq_handle() == VERL
    assert run_socket(VERL) == VERL
    assert removed == [VERL[len("ipc://") :]]  # the sender still clears a stale file, loudly if it cannot


def test_an_open_directory_is_refused(token: str) -> None:
    d = socket_dir(token)
    d.mkdir(mode=0o700)
    d.chmod(0o755)
    with pytest.raises(RuntimeError, match=rf"{d} has mode 755: others may enter it"):
        private_dir(token)
    with pytest.raises(RuntimeError, match=str(d)):
        run_socket(VERL)


def test_a_symlink_under_the_directory_s_name_is_refused(token: str, tmp_path: Path) -> None:
    d = socket_dir(token)
    d.symlink_to(tmp_path)
    try:
        with pytest.raises(RuntimeError, match=rf"{d} is not a directory"):
            private_dir(token)
    finally:
        d.unlink()


def test_a_stale_socket_that_cannot_be_removed_is_named(token: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """verl's binder ignores the failed removal and its bind then fails naming nothing."""
    path = run_socket(VERL)[len("ipc://") :]
    Path(path).write_text("")

    def refuse(p: str) -> None:
        raise PermissionError(errno.EPERM, "Operation not permitted", p)

    monkeypatch.setattr(weight_socket.os, "remove", refuse)
    sender, _ = fake_verl()
    with pytest.raises(RuntimeError, match=rf"{path}: a stale file owned by uid {os.getuid()}"):
        sender.ServerAdapter()


def test_a_stale_socket_of_this_user_is_removed(token: str) -> None:
    path = Path(run_socket(VERL)[len("ipc://") :])
    path.write_text("")
    sender, _ = fake_verl()
    sender.ServerAdapter()
    assert not path.exists()


def test_an_overlong_path_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(RUN_TOKEN_ENV, "x" * 120)
    monkeypatch.setattr(weight_socket, "private_dir", socket_dir)  # nothing to create for this check
    with pytest.raises(RuntimeError, match=f"AF_UNIX allows {MAX_SOCKET_PATH}"):
        run_socket(VERL)


def test_patching_twice_wraps_once(token: str) -> None:
    sender, receiver = fake_verl()
    init = sender.ServerAdapter.__init__
    patch_sender(sender)
    patch_receiver(receiver)
    assert sender.ServerAdapter.__init__ is init
    assert receiver.vLLMColocateWorkerExtension()._get_zmq_handle() == run_socket(VERL)


def test_importing_it_loads_neither_torch_nor_verl() -> None:
    """verl imports it from inside its own __init__, in every process: it must not import them back."""
    code = (
        "import sys, coolsampler.worker.weight_socket\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'verl', 'vllm', 'ray'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_run_verl_removes_the_attempt_s_directory(tmp_path: Path) -> None:
    """Each attempt draws a token; when it ends, its socket directory (and a socket left in it) goes."""
    trainer = (
        "import json, os\n"
        "from coolsampler.worker.weight_socket import private_dir\n"
        f"d = private_dir(os.environ[{RUN_TOKEN_ENV!r}])\n"
        "(d / 'left-behind.sock').write_text('')\n"
        "print('socket dir', d, flush=True)\n"
        "with open(os.environ['VERL_FILE_LOGGER_PATH'], 'a') as f:\n"
        "    f.write(json.dumps({'step': 1, 'data': {'training/global_step': 1}}) + '\\n')\n"
    )
    log = tmp_path / "train.log"
    cmd = [sys.executable, "-c", trainer]
    run_verl([], jsonl=tmp_path / "train.jsonl", log=log, total_steps=1, timeout_s=60, poll_s=0.1, cmd=cmd)
    line = next(x for x in log.with_name("verl.log").read_text().splitlines() if x.startswith("socket dir "))
    d = Path(line.removeprefix("socket dir "))
    assert d.parent == Path("/tmp") and d.name.startswith(f"coolsampler-{os.getuid()}-")
    assert not d.exists()
