"""The CPU platform's prefork server (coolsampler.worker.prefork): Ray workers forked from one
pre-imported process, the same programs in the same environment.

The real-stack proof that a forked run trains exactly as an unforked one is in tests/stack/test_reproducible.py
(test_prefork_changes_nothing_but_start_up); here: the mechanism, with Ray alone (seconds)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from coolsampler.train.launch import session_members, verl_command
from coolsampler.train.platform import PREFORK_ENV, get_platform
from coolsampler.worker import prefork

REPO = Path(__file__).resolve().parents[2]


def test_cpu_platform_preforks_and_gpu_does_not():
    assert get_platform("cpu").env()[PREFORK_ENV] == "1"
    assert PREFORK_ENV not in get_platform("gpu").env()


def test_verl_command_runs_verl_under_the_server_only_where_the_platform_says():
    ov = ["trainer.total_training_steps=2"]
    cpu = verl_command(ov, get_platform("cpu").env())
    assert cpu[:4] == [sys.executable, "-m", "coolsampler.worker.prefork", "verl.trainer.main_ppo"]
    assert cpu[4:] == [*ov, prefork.ray_override()]
    assert prefork.ray_override() == f"+ray_kwargs.ray_init.runtime_env.py_executable='{prefork.client_command()}'"
    assert verl_command(ov, get_platform("gpu").env()) == [sys.executable, "-m", "verl.trainer.main_ppo", *ov]
    # in a container the image's interpreter runs verl, as it always did
    image = ["apptainer", "exec", "x.sif", "python3"]
    assert verl_command(ov, get_platform("cpu").env(), image) == [*image, "-m", "verl.trainer.main_ppo", *ov]


def test_worker_sys_path_is_that_of_python_running_the_script():
    base = ["/usr/lib/python3.11", "/venv/site-packages", "/extra"]
    got = prefork._python_path({"PYTHONPATH": "/extra:/pp"}, "/ray/workers/default_worker.py", base)
    assert got == ["/ray/workers", "/extra", "/pp", "/usr/lib/python3.11", "/venv/site-packages"]


def test_client_without_a_server_runs_the_worker_itself(tmp_path):
    client = [sys.executable, "-S", "-I", str(prefork.CLIENT)]
    env = {k: v for k, v in os.environ.items() if k != prefork.SOCKET_ENV}
    out = subprocess.run([*client, "-c", "print(6 * 7)"], env=env, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "42"
    env[prefork.SOCKET_ENV] = str(tmp_path / "no-server")  # named but gone: the same
    out = subprocess.run([*client, "-c", "import sys; sys.exit(5)"], env=env, capture_output=True, timeout=60)
    assert out.returncode == 5


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_the_client_ends_by_the_signal_that_ended_its_worker(tmp_path, sig):
    """A worker killed by a signal (the OOM killer's SIGKILL, a SIGTERM) ends its client by the same
    signal, so Ray sees the worker die as it died; SIGKILL cannot be given a handler, and is sent as is."""
    import socket

    path = str(tmp_path / "server.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(1)
    env = {**os.environ, prefork.SOCKET_ENV: path}
    client = subprocess.Popen(
        [sys.executable, "-S", "-I", str(prefork.CLIENT), "-c", "pass"], env=env, stderr=subprocess.PIPE
    )
    worker = subprocess.Popen(["sleep", "60"])  # stands in for the forked worker the client relays to
    try:
        server.settimeout(60)
        conn, _ = server.accept()
        with conn:
            _, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
            for fd in fds:  # the client's standard streams: held here, its stderr would never end
                os.close(fd)
            conn.sendall(f"pid {worker.pid}\nsignal {int(sig)}\n".encode())
            err = client.communicate(timeout=60)[1].decode()
    finally:
        client.kill()
        worker.kill()
        server.close()
    assert client.returncode == -sig, err
    assert "Traceback" not in err


def _server(tmp_path: Path, module: str, preload: str, timeout: float = 180) -> tuple[subprocess.CompletedProcess, int]:
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO / 'workflow'}", "RAY_USAGE_STATS_ENABLED": "0"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "coolsampler.worker.prefork", "--preload", preload, module],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:  # whatever the outcome, nothing of this session outlives the test
        deadline = time.time() + 15
        while session_members(proc.pid) and time.time() < deadline:
            time.sleep(0.2)
        left = session_members(proc.pid)
        if left:
            os.killpg(proc.pid, signal.SIGKILL)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), len(left)


def test_a_preload_that_imports_ray_is_refused(tmp_path):
    (tmp_path / "noop.py").write_text("print('driver ran')\n")
    done, _ = _server(tmp_path, "noop", "ray", timeout=120)
    assert done.returncode != 0
    assert "Ray must be imported after the fork" in done.stderr and "driver ran" not in done.stdout


DRIVER = """
    import json, os, sys, time
    import ray
    from coolsampler.worker import prefork

    ray.init(num_cpus=2, include_dashboard=False, runtime_env={"py_executable": prefork.client_command()})

    @ray.remote
    class Probe:
        def info(self):
            return {"pid": os.getpid(), "ppid": os.getppid(), "job": os.environ.get("RAY_JOB_ID"),
                    "preloaded": "colorsys" in sys.modules, "marker": os.environ.get("PROBE_MARKER"),
                    "script": sys.argv[0]}

    probe = Probe.options(runtime_env={"env_vars": {"PROBE_MARKER": "m1"}}).remote()
    info = ray.get(probe.info.remote(), timeout=120)
    ray.kill(probe)  # Ray stops its worker: the forked process must go
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            os.kill(info["pid"], 0)
        except ProcessLookupError:
            info["gone"] = True
            break
        time.sleep(0.2)
    info["driver_ppid"] = os.getppid()
    print("PROBE " + json.dumps(info), flush=True)
    ray.shutdown()
    sys.exit(3)
"""


@pytest.mark.slow  # starts a Ray cluster: ~20 s
@pytest.mark.timeout(300)
def test_ray_workers_are_forked_from_the_server_and_behave_as_fresh_ones(tmp_path):
    (tmp_path / "probe_driver.py").write_text(textwrap.dedent(DRIVER))
    done, left = _server(tmp_path, "probe_driver", "colorsys")
    assert done.returncode == 3, done.stderr[-3000:]  # the driver's exit code is the server's
    line = next(x for x in done.stdout.splitlines() if x.startswith("PROBE "))
    info = json.loads(line.split(" ", 1)[1])
    server = info["driver_ppid"]  # the driver is forked from the server too
    assert info["ppid"] == server, info  # the actor's process is a fork of the server...
    assert info["preloaded"], info  # ...with the server's imports
    assert info["job"], info  # Ray's job id reached it (Ray is imported after the fork)
    assert info["marker"] == "m1", info  # and the actor's own runtime env
    assert info["script"].endswith("default_worker.py"), info
    assert info.get("gone"), info  # killed by Ray, it is gone
    assert left == 0  # the whole session ended with the driver
