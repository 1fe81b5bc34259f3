#!/usr/bin/env python3
"""A real SLURM cluster on this one host, for the tests and for trying profiles/slurm before a cluster.

    python workflow/tools/local_slurm.py start DIR     # prints the exports: SLURM_CONF, PATH
    python workflow/tools/local_slurm.py stop DIR      # stops what `start DIR` started, by PID

Everything is the Debian 12 packages (``apt-get install slurm-wlm slurmdbd munge mariadb-server``,
SLURM 22.05) run as root in the foreground, as children of this process, with all state under DIR and
ports of their own on 127.0.0.1: nothing in /etc/slurm, /etc/munge or /run is read or written, and a
second cluster (another test session) can run beside it. The daemons:

* ``munged`` with its own key and socket (slurm.conf ``AuthInfo=socket=``; the slurmdbd connections
  take theirs from ``AccountingStoragePass``, SLURM's place for a second MUNGE socket);
* ``mariadbd`` on a private socket and port, and ``slurmdbd`` on it: the executor plugin reads job
  states with ``sacct``, which needs accounting;
* ``slurmctld``, and two ``slurmd`` on this host (SLURM's multiple-slurmd mode), one per partition:

  - ``cpu``: node ``c<port>``, this host's real CPUs and most of its memory: the smoke study's jobs
    (one CPU each) run two at a time, as on a CPU node;
  - ``gpu``: node ``g<port>``, declared as a paper node (32 CPUs, 256 GiB, ``Gres=gpu:4`` backed by four
    placeholder files): ``SlurmdParameters=config_overrides`` makes SLURM believe the declaration, so
    it places (and runs) a paper job's request, whose training cannot run here.

``AuthInfo=cred_expire`` is 10 s: a requeued job waits that long (plus a scheduler pass) before it runs
again, instead of SLURM's default two minutes. The SLURM commands reach it through ``SLURM_CONF`` and
through DIR/bin, which holds one small script per client command that sets it (``srun`` inside a job
started by Snakemake's plugin would otherwise not find this cluster: ``_write_clients``). ``start``
prints both exports. Standard library only.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

CLUSTER = "coolsampler"
ACCOUNT = "default"
# The paper's training job: --gpus=4 on one node, 32 CPUs, 256000 MB (coolsampler.train.platform "gpu").
GPU_NODE = {"cpus": 32, "mem_mb": 262_144, "gpus": 4}
PACKAGES = "slurm-wlm slurmdbd munge mariadb-server"
# The one line that installs them (Debian/Ubuntu, as root): workflow/tools/setup_env.sh runs it where it
# can and prints it where it cannot; tests/stack/test_slurm.py skips with it as the reason.
APT_LINE = f"apt-get install {PACKAGES}"
# Set (to 1) by .ci/run: the SLURM tests fail instead of skipping, so CI never passes without the cluster.
REQUIRE_ENV = "COOLSAMPLER_REQUIRE_SLURM"
CLIENTS = ("sbatch", "srun", "salloc", "squeue", "sacct", "sacctmgr", "scancel", "scontrol", "sinfo", "sshare", "sstat")
DAEMONS = ("munged", "mariadbd", "mariadb-install-db", "slurmdbd", "slurmctld", "slurmd", "sacctmgr")


class ClusterError(RuntimeError):
    """The cluster could not be started; the message says which daemon and shows its log."""


def free_ports(n: int) -> list[int]:
    """``n`` distinct TCP ports that are free on 127.0.0.1 now (held open together while picked)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def host_memory_mb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024
    raise ClusterError("no MemTotal in /proc/meminfo")


def unavailable() -> str | None:
    """Why no local cluster can start on this machine (in one line, naming the install), or None."""
    missing = [d for d in DAEMONS if shutil.which(d) is None]
    if missing:
        return f"SLURM is not installed here (no {', '.join(missing)}): as root, {APT_LINE}"
    if os.geteuid() != 0:
        return "a local SLURM cluster runs its daemons as root: run the SLURM tests as root"
    return None


@dataclass
class LocalSlurm:
    """One cluster whose state lives under ``root``; ``start`` it, hand ``env`` to SLURM clients."""

    root: Path
    cpu_mem_mb: int = 0  # the cpu node's memory; default 85% of this host's
    cred_expire_s: int = 10
    pids: dict[str, int] = field(default_factory=dict)
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.root = Path(self.root).resolve()
        self.conf = self.root / "etc" / "slurm.conf"
        self.host = socket.gethostname().split(".")[0]
        if not self.cpu_mem_mb:
            self.cpu_mem_mb = int(host_memory_mb() * 0.85)

    @property
    def env(self) -> dict[str, str]:
        """What a SLURM client (sbatch, squeue, sacct, Snakemake's plugin) needs to reach this cluster:
        ``SLURM_CONF``, and ``bin/`` first on PATH (see ``_write_clients``)."""
        return {"SLURM_CONF": str(self.conf), "PATH": f"{self.root / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}

    def client_env(self) -> dict[str, str]:
        return {**os.environ, **self.env}

    # ------------------------------------------------------------------------------------ files
    def _write_config(self) -> None:
        r = self.root
        ctld, cport, gport, dbd, db = free_ports(5)
        self.ports = {"slurmctld": ctld, "cpu": cport, "gpu": gport, "slurmdbd": dbd, "mariadb": db}
        # node names of this cluster only: a job's cgroup is named by its node and job id, and a second
        # cluster on this host numbers its jobs from 1 too
        self.nodes = {"cpu": f"c{ctld}", "gpu": f"g{ctld}"}
        c1, g1 = self.nodes["cpu"], self.nodes["gpu"]
        for d in ("etc", "state", "log", "dev", "munge", "munge-key", "db", f"spool/{c1}", f"spool/{g1}"):
            (r / d).mkdir(parents=True, exist_ok=True)
        (r / "munge").chmod(0o755)  # the socket's directory: every user of the cluster connects
        (r / "munge-key").chmod(0o700)
        key = r / "munge-key" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        for i in range(GPU_NODE["gpus"]):
            (r / "dev" / f"nvidia{i}").touch()
        munge = r / "munge" / "munge.sock"
        self.munge_socket = munge
        self.db_socket = r / "db" / "mysqld.sock"
        host, cpus = self.host, os.cpu_count() or 1
        lines = [
            f"ClusterName={CLUSTER}",
            f"SlurmctldHost={host}(127.0.0.1)",
            f"SlurmctldPort={ctld}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={munge},cred_expire={self.cred_expire_s}",
            f"StateSaveLocation={r}/state",
            f"SlurmdSpoolDir={r}/spool/%n",
            f"SlurmctldPidFile={r}/slurmctld.pid",
            f"SlurmdPidFile={r}/slurmd-%n.pid",
            f"SlurmctldLogFile={r}/log/slurmctld.log",
            f"SlurmdLogFile={r}/log/slurmd-%n.log",
            # cgroup tracking, as on a real cluster: every process of a job is ended with it, also one whose
            # parent died first (a Snakemake that waits out a SIGTERM while its batch shell is gone: with
            # linuxproc, which follows parent ids, it outlived a requeue)
            "ProctrackType=proctrack/cgroup",
            "TaskPlugin=task/none",
            "MpiDefault=none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core_Memory",
            "SlurmdParameters=config_overrides",
            "GresTypes=gpu",
            "ReturnToService=2",
            "SchedulerParameters=sched_interval=5",
            "AccountingStorageType=accounting_storage/slurmdbd",
            "AccountingStorageHost=127.0.0.1",
            f"AccountingStoragePort={dbd}",
            f"AccountingStoragePass={munge}",
            "JobAcctGatherType=jobacct_gather/linux",
            "AccountingStorageEnforce=associations,limits,qos",
            "AccountingStorageTRES=gres/gpu",  # sacct shows a job's GPUs
            f"NodeName={c1} NodeHostname={host} NodeAddr=127.0.0.1 Port={cport} CPUs={cpus} "
            f"RealMemory={self.cpu_mem_mb} State=UNKNOWN",
            f"NodeName={g1} NodeHostname={host} NodeAddr=127.0.0.1 Port={gport} CPUs={GPU_NODE['cpus']} "
            f"RealMemory={GPU_NODE['mem_mb']} Gres=gpu:{GPU_NODE['gpus']} State=UNKNOWN",
            f"PartitionName=cpu Nodes={c1} Default=YES MaxTime=INFINITE State=UP",
            f"PartitionName=gpu Nodes={g1} MaxTime=INFINITE State=UP",
        ]
        self.conf.write_text("\n".join(lines) + "\n")
        last = GPU_NODE["gpus"] - 1
        (r / "etc" / "cgroup.conf").write_text(
            "CgroupPlugin=cgroup/v1\nCgroupMountpoint=/sys/fs/cgroup\nCgroupAutomount=no\n"
        )
        (r / "etc" / "gres.conf").write_text(f"NodeName={g1} Name=gpu File={r}/dev/nvidia[0-{last}]\n")
        self.db_password = os.urandom(12).hex()
        dbd_conf = r / "etc" / "slurmdbd.conf"  # slurmdbd reads it beside $SLURM_CONF; it must be 0600
        dbd_conf.write_text(
            "\n".join(
                [
                    "AuthType=auth/munge",
                    f"AuthInfo=socket={munge}",
                    "DbdHost=localhost",
                    "DbdAddr=127.0.0.1",
                    f"DbdPort={dbd}",
                    "SlurmUser=root",
                    "StorageType=accounting_storage/mysql",
                    "StorageHost=127.0.0.1",
                    f"StoragePort={db}",
                    "StorageUser=slurm",
                    f"StoragePass={self.db_password}",
                    "StorageLoc=slurm_acct_db",
                    f"PidFile={r}/slurmdbd.pid",
                    f"LogFile={r}/log/slurmdbd.log",
                ]
            )
            + "\n"
        )
        dbd_conf.chmod(0o600)

    def _write_clients(self) -> None:
        """``bin/<command>`` for each SLURM client: the real one with this cluster's ``SLURM_CONF``.

        Why: snakemake-executor-plugin-slurm-jobstep, inside a job, starts the rule with ``srun`` in an
        environment from which it removes every ``SLURM_*`` variable but the job's identity, so
        ``SLURM_CONF`` (which sbatch --export=ALL carried into the job) does not reach that srun, and
        srun then looks for /etc/slurm/slurm.conf, then a DNS record. A real cluster keeps its
        configuration there; this one must not touch /etc, so its clients carry the path themselves."""
        bindir = self.root / "bin"
        bindir.mkdir(exist_ok=True)
        for cmd in CLIENTS:
            real = shutil.which(cmd, path=os.defpath + os.pathsep + "/usr/sbin:/usr/bin")
            if real is None:
                continue
            f = bindir / cmd
            f.write_text(f'#!/bin/sh\nSLURM_CONF={self.conf} exec {real} "$@"\n')
            f.chmod(0o755)

    # ---------------------------------------------------------------------------------- daemons
    def _spawn(self, name: str, argv: list[str]) -> None:
        """Start a daemon in the foreground as a child of this process (its own session: a Ctrl-C of
        the caller reaches it only through ``stop``); its output goes to log/<name>.out."""
        out = (self.root / "log" / f"{name}.out").open("ab")
        proc = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, env=self.client_env(), start_new_session=True
        )
        out.close()
        self.procs[name] = proc
        self.pids[name] = proc.pid
        (self.root / "pids.json").write_text(json.dumps(self.pids, indent=1))

    def _wait(self, what: str, check, timeout_s: float = 60, logs: tuple[str, ...] = ()) -> None:
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            dead = [n for n, p in self.procs.items() if p.poll() is not None]
            if dead:
                raise ClusterError(f"{dead[0]} exited while waiting for {what}:\n{self._tail(dead[0], *logs)}")
            if check():
                return
            time.sleep(0.3)
        raise ClusterError(f"timed out after {timeout_s:.0f}s waiting for {what}:\n{self._tail(*logs)}")

    def _tail(self, *names: str) -> str:
        out = []
        for n in names:
            for p in (self.root / "log" / f"{n}.out", self.root / "log" / f"{n}.log"):
                if p.exists():
                    text = p.read_text(errors="replace").splitlines()[-15:]
                    out.append(f"--- {p} ---\n" + "\n".join(text))
        return "\n".join(out)

    def _ok(self, *argv: str) -> bool:
        return subprocess.run(argv, env=self.client_env(), capture_output=True, timeout=30).returncode == 0

    def run(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess:
        """A SLURM client command against this cluster."""
        res = subprocess.run(argv, env=self.client_env(), capture_output=True, text=True, timeout=60)
        if check and res.returncode != 0:
            raise ClusterError(
                f"{' '.join(argv)} failed ({res.returncode}): {res.stderr.strip() or res.stdout.strip()}"
            )
        return res

    def start(self) -> LocalSlurm:
        """Write the configuration and start every daemon; returns when both nodes are idle and the
        accounting knows this user. On any failure what was started is stopped again."""
        why = unavailable()
        if why:
            raise ClusterError(why)
        if self.root.exists() and (self.root / "pids.json").exists():
            raise ClusterError(f"{self.root} holds a cluster already (stop it first)")
        self.root.mkdir(parents=True, exist_ok=True)
        for d in ("db", "state", "spool", "munge", "munge-key"):  # a stopped cluster's: start afresh
            shutil.rmtree(self.root / d, ignore_errors=True)
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self) -> None:
        r = self.root
        self._write_config()
        self._write_clients()
        self._spawn(
            "munged",
            [
                "munged",
                "--foreground",
                "--force",  # runs as root, with its files outside /etc/munge and /run/munge
                f"--socket={self.munge_socket}",
                f"--key-file={r}/munge-key/munge.key",
                f"--pid-file={r}/munge-key/munged.pid",
                f"--seed-file={r}/munge-key/munged.seed",
                f"--log-file={r}/log/munged.log",
            ],
        )
        self._wait("munged", lambda: self.munge_socket.exists(), logs=("munged",))
        install = subprocess.run(
            ["mariadb-install-db", "--user=root", f"--datadir={r}/db/data", "--auth-root-authentication-method=socket"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        if install.returncode != 0:
            raise ClusterError(f"mariadb-install-db failed:\n{install.stdout[-2000:]}{install.stderr[-2000:]}")
        self._spawn(
            "mariadbd",
            [
                "mariadbd",
                "--no-defaults",
                "--user=root",
                f"--datadir={r}/db/data",
                f"--socket={self.db_socket}",
                f"--port={self.ports['mariadb']}",
                "--bind-address=127.0.0.1",
                "--skip-name-resolve",
                f"--pid-file={r}/db/mysqld.pid",
                f"--log-error={r}/log/mariadbd.log",
                "--innodb-buffer-pool-size=64M",  # a handful of jobs: keep it small on a shared machine
            ],
        )
        sql = (
            "CREATE DATABASE slurm_acct_db; "
            f"CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY '{self.db_password}'; "
            "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';"
        )
        mysql = ["mariadb", "--no-defaults", f"--socket={self.db_socket}", "-u", "root"]
        self._wait("mariadbd", lambda: self._ok(*mysql, "-e", "SELECT 1"), logs=("mariadbd",))
        subprocess.run([*mysql, "-e", sql], check=True, capture_output=True, timeout=60)
        self._spawn("slurmdbd", ["slurmdbd", "-D"])
        self._wait("slurmdbd", lambda: self._ok("sacctmgr", "-n", "show", "cluster"), logs=("slurmdbd",))
        self.run("sacctmgr", "-i", "add", "cluster", CLUSTER)
        self._spawn("slurmctld", ["slurmctld", "-D", "-f", str(self.conf)])
        self._wait("slurmctld", lambda: self._ok("scontrol", "ping"), logs=("slurmctld",))
        for node in self.nodes.values():
            self._spawn(f"slurmd-{node}", ["slurmd", "-D", "-N", node, "-f", str(self.conf)])
        logs = ("slurmctld", *(f"slurmd-{n}" for n in self.nodes.values()))
        self._wait("both nodes idle", self._nodes_idle, logs=logs)
        user = _user()
        self.run("sacctmgr", "-i", "add", "account", ACCOUNT)
        self.run("sacctmgr", "-i", "add", "user", user, f"account={ACCOUNT}")
        # slurmctld learns the association from slurmdbd shortly after
        self._wait("the account in slurmctld", lambda: self._ok("sbatch", "--test-only", "-p", "cpu", "--wrap", "true"))

    def _nodes_idle(self) -> bool:
        res = subprocess.run(
            ["sinfo", "-h", "-N", "-o", "%N %t"], env=self.client_env(), capture_output=True, text=True, timeout=30
        )
        states = dict(line.split() for line in res.stdout.splitlines() if line.strip())
        return all(states.get(n) == "idle" for n in self.nodes.values())

    def stop(self) -> None:
        """Cancel every job of this cluster and stop its daemons, by PID, newest first (SIGTERM, then
        SIGKILL after 20 s). Also for a cluster started by another process (pids.json)."""
        if not self.pids and (self.root / "pids.json").exists():
            self.pids = json.loads((self.root / "pids.json").read_text())
        if "slurmctld" in self.pids and _alive(self.pids["slurmctld"]):
            # the jobs' processes belong to slurmstepd, which outlives slurmd: end them first
            subprocess.run(["scancel", "--full", "-u", _user()], env=self.client_env(), capture_output=True, timeout=60)
            deadline = time.time() + 60
            while time.time() < deadline:
                q = subprocess.run(["squeue", "-h"], env=self.client_env(), capture_output=True, text=True, timeout=30)
                if q.returncode != 0 or not q.stdout.strip():
                    break
                time.sleep(1)
        for name, pid in reversed(list(self.pids.items())):
            proc = self.procs.get(name)
            if proc is not None or _runs(pid, name.split("-")[0]):  # a recycled PID is left alone
                _terminate(pid, proc)
        (self.root / "pids.json").unlink(missing_ok=True)
        self.pids.clear()
        self.procs.clear()
        self._remove_cgroups()

    def _remove_cgroups(self) -> None:
        """slurmd leaves its nodes' (empty) cgroup directories, e.g. freezer/slurm_<node>: remove them,
        deepest first (an empty cgroup is removed with rmdir; one still in use is left alone)."""
        if hasattr(self, "nodes"):
            nodes = list(self.nodes.values())
        else:
            try:
                text = self.conf.read_text()
            except OSError:
                return
            nodes = [line.split()[0].split("=", 1)[1] for line in text.splitlines() if line.startswith("NodeName=")]
        for node in nodes:
            for top in Path("/sys/fs/cgroup").glob(f"*/slurm_{node}"):
                for d in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)) + [top]:
                    with contextlib.suppress(OSError):
                        d.rmdir()


def _user() -> str:
    return pwd.getpwuid(os.geteuid()).pw_name


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _runs(pid: int, program: str) -> bool:
    """Whether process ``pid`` runs ``program`` (its argv[0]'s name)."""
    try:
        argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
    except OSError:
        return False
    return Path(argv0).name == program


def _terminate(pid: int, proc: subprocess.Popen | None, wait_s: float = 20) -> None:
    for sig, wait in ((signal.SIGTERM, wait_s), (signal.SIGKILL, 5)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            break
        deadline = time.time() + wait
        while time.time() < deadline:
            if proc is not None:
                if proc.poll() is not None:
                    return
            elif not _alive(pid):
                return
            time.sleep(0.2)
    if proc is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("action", choices=["start", "stop", "packages"], help="packages: the Debian packages it needs")
    ap.add_argument("dir", type=Path, nargs="?", help="where the cluster's configuration, state and logs live")
    args = ap.parse_args(argv)
    if args.action == "packages":
        print(PACKAGES)
        return 0
    if args.dir is None:
        ap.error(f"{args.action} needs DIR")
    cluster = LocalSlurm(args.dir)
    try:
        if args.action == "start":
            cluster.start()
            print(f"export SLURM_CONF={cluster.conf}")
            print(f'export PATH="{cluster.root / "bin"}:$PATH"')
        else:
            cluster.stop()
    except ClusterError as e:
        print(f"local_slurm: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
