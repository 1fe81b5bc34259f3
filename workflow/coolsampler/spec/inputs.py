"""The one input contract: every file a command reads is either read into validated data or refused
with an ``InputError`` that names the file, where in it (a line or a key), and what was expected.

Why one type: a researcher meets the tools first on files the project did not write (their own logs, a
hand-written ``run.yaml``, a study, a claims file, an overlay). Each command prints an ``InputError`` as
one line, ``coolsampler <cmd>: <file>[:<where>]: <problem>``, exits 2 where the input was the whole job,
and, where it reads several inputs, reports the bad one in its own line and goes on with the rest.

Pure Python, no third-party import: every layer may raise it.
"""

from __future__ import annotations

from pathlib import Path

# The exit status of a command whose input was refused (argparse's for a bad flag, too).
EXIT_INPUT = 2

# Control characters written as escapes: a file named "a\nb.yaml" (or a problem quoting a line of the
# file) must not break the one line a command prints into two.
_ESCAPES = {c: repr(chr(c))[1:-1] for c in (*range(32), 127)}


def one_line(text: str) -> str:
    """``text`` with every control character (newline, tab, escape, ...) written as its escape."""
    return text.translate(_ESCAPES)


class InputError(ValueError):
    """A file that is not what the reader expects: ``file``, optionally ``where`` in it (a line number
    or a key), and ``problem``, one sentence without the file's name."""

    def __init__(self, file: str | Path, problem: str, where: str | int | None = None) -> None:
        self.file = str(file)
        self.where = None if where is None else str(where)
        self.problem = problem
        super().__init__(str(self))

    def __str__(self) -> str:
        at = f":{self.where}" if self.where else ""
        return one_line(f"{self.file}{at}: {self.problem}")

    def line(self, command: str) -> str:
        """The one line a command prints for it."""
        return f"coolsampler {command}: {self}"
