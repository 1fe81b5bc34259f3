"""``coolsampler memory --measure SID``: a process session sampled every ``--interval`` seconds until it
ends, written as the table the host budget reads, with ``--how`` (how the run was started) and the
interval stored beside the kinds."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from coolsampler.cli import main


def test_measure_samples_a_session_until_it_ends_and_records_how_and_the_interval(tmp_path: Path, capsys) -> None:
    # a session of its own, as run_verl starts verl: its leader's pid is the session id
    leader = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.5)"], start_new_session=True)
    out = tmp_path / "pss.json"
    try:
        argv = ["--measure", str(leader.pid), "--interval", "0.2", "--how", "a sleeping Python", "--out", str(out)]
        rc = main(["memory", *argv])
    finally:
        leader.kill()
        leader.wait()
    assert rc == 0
    doc = json.loads(out.read_text())
    assert json.loads(capsys.readouterr().out) == doc
    assert doc["how"] == "a sleeping Python" and doc["interval_s"] == 0.2
    [(kind, row)] = doc["kinds"].items()
    assert "time.sleep" in kind and row["count_seen"] == 1 and row["pss_mib"] > 1
