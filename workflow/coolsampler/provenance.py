"""Where a figure or table came from: the study, the commit, whether the tree was dirty, the script.

Why one module: a number in a PDF is only as good as the code that drew it. Every output (figure
footer and PDF metadata, the TeX comment line, the Markdown footer) carries the same record, made
here once. A commit of a tree with uncommitted changes is marked ``+dirty``: the committed code is
then *not* what drew the output. Outside git the commit is ``unknown`` (said so, never guessed).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

UNKNOWN = "unknown"


def _git(args: list[str], cwd: str | Path | None) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def git_commit(cwd: str | Path | None = None) -> str:
    """Short commit of the working tree (``git rev-parse --short HEAD``), or 'unknown'."""
    out = _git(["rev-parse", "--short", "HEAD"], cwd)
    return out.strip() if out and out.strip() else UNKNOWN


def git_dirty(cwd: str | Path | None = None) -> bool | None:
    """True if tracked files differ from HEAD (``git status --porcelain --untracked-files=no``).

    None outside git. Untracked files do not count: results and caches live in the tree, ignored
    or not, and do not change what the code draws.
    """
    out = _git(["status", "--porcelain", "--untracked-files=no"], cwd)
    return None if out is None else bool(out.strip())


@dataclass(frozen=True)
class Provenance:
    """What drew an output: study name, commit, dirty flag (None: unknown) and the drawing script."""

    study: str
    commit: str = UNKNOWN
    dirty: bool | None = None
    script: str = ""

    @classmethod
    def here(
        cls, study: str, *, script: str = "", commit: str | None = None, cwd: str | Path | None = None
    ) -> Provenance:
        """The record for the current working tree; ``commit`` given (tests) skips git for it."""
        return cls(study, commit or git_commit(cwd), git_dirty(cwd) if commit is None else None, script)

    @property
    def revision(self) -> str:
        """'abc1234', 'abc1234+dirty', or 'unknown'."""
        return self.commit + ("+dirty" if self.dirty else "")

    def footer(self) -> str:
        """One line for a figure footer or a table's last line."""
        text = f"study {self.study} | commit {self.revision}"
        return text + (f" | {self.script}" if self.script else "")

    def pdf_metadata(self) -> dict[str, str]:
        """PDF Info fields (Subject, Keywords, Creator) holding the same record."""
        keywords = f"study={self.study} commit={self.revision}" + (f" script={self.script}" if self.script else "")
        return {
            "Subject": f"coolsampler study {self.study}",
            "Keywords": keywords,
            "Creator": f"coolsampler (commit {self.revision})",
        }


def as_provenance(prov: Provenance | str | None, study: str = "") -> Provenance:
    """Accept a Provenance, a bare commit string (old callers, tests) or None (ask git)."""
    if isinstance(prov, Provenance):
        return prov
    return Provenance.here(study, commit=prov)


__all__ = ["UNKNOWN", "Provenance", "as_provenance", "git_commit", "git_dirty"]
