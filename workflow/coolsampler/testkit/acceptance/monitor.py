"""Peak memory while a run trains: host (the summed PSS of the run's process session) and GPU (nvidia-smi;
another process's CUDA counters are not visible)."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from pathlib import Path

from coolsampler.train.launch import proc_table


def _pss_kb(pid: int) -> int:
    """Proportional set size (shared pages split among their users, so a sum over processes is honest);
    RSS where smaps_rollup cannot be read."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024
    except (OSError, ValueError):
        return 0


def session_memory_mb(parent: int) -> float:
    """Host memory of every process session a child of ``parent`` leads (run_verl starts verl with
    start_new_session: its pid is the session id, and Ray and vLLM stay in that session)."""
    table = proc_table()
    sessions = {p.pid for p in table if p.ppid == parent and p.session == p.pid}
    return sum(_pss_kb(p.pid) for p in table if p.session in sessions and p.state != "Z") / 1024


def gpu_memory_mb() -> list[tuple[float, float]] | None:
    """(used, total) MiB per GPU from nvidia-smi; None without one."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=memory.used,memory.total", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    rows = [tuple(float(x) for x in line.split(",")) for line in out.strip().splitlines() if "," in line]
    return rows or None  # type: ignore[return-value]


class PeakMonitor(threading.Thread):
    """Polls host (session PSS) and GPU (nvidia-smi) memory while a run trains; keeps the peaks."""

    def __init__(self, interval_s: float = 1.0) -> None:
        super().__init__(daemon=True)
        self.interval_s = interval_s
        self.host_mb = 0.0
        self.gpu_mb: float | None = None  # peak of the busiest GPU
        self.gpu_total_mb: float | None = None
        self._halt = threading.Event()  # not _stop: threading.Thread has a _stop method

    def run(self) -> None:
        me = os.getpid()
        while not self._halt.is_set():
            self.host_mb = max(self.host_mb, session_memory_mb(me))
            gpus = gpu_memory_mb()
            if gpus:
                used = max(u for u, _ in gpus)
                self.gpu_mb = used if self.gpu_mb is None else max(self.gpu_mb, used)
                self.gpu_total_mb = max(t for _, t in gpus)
            self._halt.wait(self.interval_s)

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=15)
