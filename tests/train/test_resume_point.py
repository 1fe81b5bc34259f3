"""Where a retried or resumed attempt restarts: a checkpoint whose step the log covers."""

from __future__ import annotations

import json
from pathlib import Path

from coolsampler.train.launch import resume_overrides


def _log(path: Path, last: int) -> Path:
    lines = (json.dumps({"step": t, "data": {"training/global_step": t}}) for t in range(1, last + 1))
    path.write_text("".join(line + "\n" for line in lines))
    return path


def test_resume_point(tmp_path: Path):
    for k in (4, 6):
        (tmp_path / "ckpt" / f"global_step_{k}" / "actor").mkdir(parents=True)
    # what verl's retention leaves of an older checkpoint: its dataloader state, no actor: not a resume point
    (tmp_path / "ckpt" / "global_step_2").mkdir()
    (tmp_path / "ckpt" / "global_step_2" / "data.pt").write_bytes(b"")
    ov = [f"trainer.default_local_dir={tmp_path / 'ckpt'}"]
    log = tmp_path / "01.jsonl"
    # killed after checkpoint 6 was saved but before step 6 was logged: resume from 4
    assert resume_overrides(ov, [_log(log, 5)]) == [
        "trainer.resume_mode=resume_path",
        f"trainer.resume_from_path={tmp_path / 'ckpt'}/global_step_4",
    ]
    assert resume_overrides(ov, [_log(log, 6)]) == []  # verl's auto-resume (6) is consistent
    # nothing the log covers (one checkpoint kept): the oldest newer one loses least (step 4's metrics row)
    assert resume_overrides(ov, [_log(log, 3)]) == [
        "trainer.resume_mode=resume_path",
        f"trainer.resume_from_path={tmp_path / 'ckpt'}/global_step_4",
    ]
    assert resume_overrides([], [log]) == []
    # only the leftover of step 2 and the full 6: a log covering 3 resumes from 6, not from the leftover
    import shutil

    shutil.rmtree(tmp_path / "ckpt" / "global_step_4")
    assert resume_overrides(ov, [_log(log, 3)])[1] == f"trainer.resume_from_path={tmp_path / 'ckpt'}/global_step_6"
