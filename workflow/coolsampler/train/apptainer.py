"""The Apptainer side of the training image: its recipe, derived from the Dockerfile, and its commands.

One image, one definition. ``containers/Dockerfile`` is the only hand-written image definition;
``containers/coolsampler.def`` is derived from it (and from ``containers/Dockerfile.dockerignore``) by
spython, the Singularity/Apptainer Python library (``spython.main.parse``: ``DockerParser`` reads the
Dockerfile into a recipe, ``SingularityWriter`` writes it as a definition file). The derived file is
committed, not generated at build time, so that a cluster's login node builds the ``.sif`` with nothing
but Apptainer and a reader can see the recipe; ``python -m coolsampler.train.apptainer --check`` (run by
the tests, and by ``workflow/scripts/build_image.py`` before an Apptainer build) fails when the committed
file is not exactly what the Dockerfile gives, so the two cannot drift.

spython's conversion is not right for this Dockerfile as it comes; ``derive_recipe`` fixes the parsed
recipe before writing it, each fix for a reason that ``FIXES`` states in one line (the docs list them).
A construct the fixes do not cover (an instruction outside ``CONVERTED`` such as ``ADD`` or ``ONBUILD``,
COPY's options, a second stage, a defaulted ``ARG`` used outside ``FROM``, a shell-form ``CMD``, a
dockerignore glob inside a copied directory) is refused with a one-line error instead of being converted
silently.

The command lines: ``build_command`` (``apptainer build``, for rule ``image``) and ``exec_prefix``
(``apptainer exec``, before verl's command in rule ``train``) are built here as argv lists and run by
their callers. spython's ``Client.build``/``Client.execute`` are not used to run them: they call the
``singularity`` binary, build with ``sudo`` by default, exit the process on an error, and run the command
themselves, whereas a training run must own its process group (``coolsampler.train.launch``).

This module never runs Apptainer and imports spython only inside ``derive_recipe``: the rules import the
container layer on hosts where only the commands are needed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shlex
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Final

ROOT: Final[Path] = Path(__file__).resolve().parents[3]
DOCKERFILE: Final[str] = "containers/Dockerfile"
DOCKERIGNORE: Final[str] = "containers/Dockerfile.dockerignore"
RECIPE: Final[str] = "containers/coolsampler.def"
REGENERATE: Final[str] = "python -m coolsampler.train.apptainer --write"

# What derive_recipe changes in spython's conversion, and why (docs/paper-study.md lists these).
FIXES: Final[dict[str, str]] = {
    "from": "From: keeps the digest and drops the tag: Apptainer's docker transport refuses a reference with both",
    "build-args": "an ARG without a default becomes an Apptainer build argument ({{ NAME }}; the build fails without"
    " --build-arg NAME=...), exported in %post as Docker exports it to RUN; spython skips such an ARG",
    "arg-defaults": "an ARG with a default is used by FROM only, where spython substitutes it; its assignment left"
    " in %post is dropped",
    "env-export": "ENV is exported in %post: spython writes a plain shell assignment, which install.sh (a child"
    " process) would not see",
    "shell": "SHELL [prog, opts..., -c] becomes %post -c prog with set -e opts: spython copies the instruction"
    " into %post as a command, and Apptainer runs a -c shell without -e",
    "user": "USER is dropped: Apptainer runs as the calling user; spython turns it into `su`, which a build cannot run",
    "identity-env": "USER, LOGNAME and HOME stay out of %environment: Apptainer sets them for the calling user"
    " (the Dockerfile sets them for a uid without a passwd entry)",
    "labels": "labels are written `name value`, Apptainer's form; spython writes Docker's name=\"value\"",
    "dockerignore": "what Dockerfile.dockerignore leaves out of a copied directory is removed from it at the start"
    " of %post: Apptainer's %files has no ignore file",
    "symlinks": "a symbolic link inside a copied directory is put back as the link Docker's COPY keeps: Apptainer's"
    " %files copies what it points to (cp -L)",
    "runscript": "%runscript runs its arguments, else CMD, after ENTRYPOINT (Docker's rule), in the caller's"
    ' directory; spython\'s runs `CMD "$@"` after cd WORKDIR. No %startscript: no instance is started',
    "comments": "the Dockerfile's comments stay in the Dockerfile: spython copies them into %post",
}

_INSTRUCTION = re.compile(r"^(?P<word>[A-Z]+)\s+(?P<rest>.*)$")
_REF = re.compile(r"\$\{?(?P<name>[A-Za-z_][A-Za-z0-9_]*)\}?")
_IDENTITY_ENV = ("USER", "LOGNAME", "HOME")
# The Dockerfile instructions derive_recipe converts; any other is refused (ADD's downloads and archives,
# HEALTHCHECK, ONBUILD, VOLUME, EXPOSE, STOPSIGNAL have no checked Apptainer counterpart here).
CONVERTED: Final[tuple[str, ...]] = (
    "FROM", "ARG", "ENV", "LABEL", "SHELL", "COPY", "RUN", "USER", "WORKDIR", "ENTRYPOINT", "CMD",
)  # fmt: skip


class RecipeError(ValueError):
    """The Dockerfile holds something the derivation does not convert; the message says what."""


def _header() -> str:
    return (
        "# The coolsampler training image for Apptainer. GENERATED from containers/Dockerfile (and its\n"
        "# .dockerignore) by spython with the fixes of coolsampler.train.apptainer. Do not edit: edit the\n"
        f"# Dockerfile and run `{REGENERATE}`;\n"
        "# the tests and the image build refuse a stale copy.\n"
        "#\n"
        "# Built by rule `image` (workflow/rules/build.smk) from the repository root:\n"
        '#   apptainer build --build-arg VERL_VERSION="$(python workflow/scripts/build_verl.py --print-version)" \\\n'
        "#     results/build/coolsampler.sif containers/coolsampler.def\n"
    )


@contextlib.contextmanager
def _quiet_spython() -> Iterator[None]:
    """spython warns on stderr about what the fixes handle (an ARG without default, a wheel not built
    yet relative to the current directory); errors still show."""
    from spython.logger import bot
    from spython.logger.message import ERROR

    level = bot.level
    bot.level = ERROR
    try:
        yield
    finally:
        bot.level = level


def _check_instructions(dockerfile_text: str) -> None:
    """Refuse what spython would convert wrongly or drop without a word: an instruction outside
    ``CONVERTED``, and COPY's options (spython takes ``--chown=...`` for a source path)."""
    joined = re.sub(r"\\\n", " ", "\n".join(x for x in dockerfile_text.splitlines() if not x.lstrip().startswith("#")))
    for m in re.finditer(r"^\s*([A-Za-z]+)\s+(.*)$", joined, re.M):
        word, rest = m.group(1).upper(), m.group(2)
        if word not in CONVERTED:
            raise RecipeError(f"{DOCKERFILE}: {word} is not converted")
        if word == "COPY" and rest.startswith("--") and not rest.startswith("--from"):
            raise RecipeError(f"{DOCKERFILE}: COPY {rest.split()[0]} is not converted")


def _required_args(dockerfile_text: str) -> list[str]:
    """``ARG NAME`` lines without a default: the image's build arguments."""
    return re.findall(r"^ARG\s+([A-Za-z_][A-Za-z0-9_]*)\s*$", dockerfile_text, re.M)


def _template(text: str, names: Sequence[str]) -> str:
    """``${NAME}`` / ``$NAME`` of a build argument -> Apptainer's ``{{ NAME }}``."""
    return _REF.sub(lambda m: f"{{{{ {m.group('name')} }}}}" if m.group("name") in names else m.group(0), text)


def _ignored_paths(dockerignore_text: str) -> list[str]:
    return [s for line in dockerignore_text.splitlines() if (s := line.strip()) and not s.startswith("#")]


def _dockerignore_removals(files: Sequence[Sequence[str]], patterns: Sequence[str], root: Path) -> list[str]:
    """Shell lines removing from each copied directory what the dockerignore keeps out of Docker's context.

    Two forms are translated: ``**/NAME`` (anywhere: ``find -name``) and a plain path inside a copied
    directory (``rm -rf``). Other patterns either lie outside every copied directory (``*``, the ``!``
    re-inclusions of what is copied) or are refused."""
    lines: list[str] = []
    for src, dst in files:
        if not (root / src).is_dir():
            continue
        prefix = src.rstrip("/") + "/"
        dest = dst.rstrip("/")
        for pattern in patterns:
            if pattern.startswith("**/") and "/" not in pattern[3:]:
                lines.append(f"find {dest} -name {shlex.quote(pattern[3:])} -prune -exec rm -rf {{}} +")
            elif pattern.startswith(prefix):
                rest = pattern[len(prefix) :]
                if re.search(r"[*?\[]", rest):
                    raise RecipeError(f"{DOCKERIGNORE}: {pattern!r}: a glob inside a copied directory is not converted")
                lines.append(f"rm -rf {dest}/{rest}")
            elif pattern.startswith("!") or not pattern.startswith(src.split("/")[0]) or pattern == "*":
                continue
            elif re.search(r"[*?\[]", pattern):
                raise RecipeError(f"{DOCKERIGNORE}: {pattern!r} may match inside {src}: not converted")
    return lines


def _symlinks(files: Sequence[Sequence[str]], root: Path) -> list[str]:
    """Shell lines putting back each symbolic link of a copied directory as the link it is in the repository
    (Docker copies a link inside a COPY'd directory as a link; Apptainer's %files dereferences it)."""
    lines: list[str] = []
    for src, dst in files:
        if not (root / src).is_dir():
            continue
        for here, dirs, names in sorted(os.walk(root / src)):  # links are not followed
            for name in sorted(dirs + names):
                path = Path(here, name)
                if path.is_symlink():
                    at = f"{dst.rstrip('/')}/{path.relative_to(root / src).as_posix()}"
                    lines.append(f"rm -rf {at} && ln -s {shlex.quote(os.readlink(path))} {at}")
    return lines


def _shell(install: Sequence[str]) -> tuple[str | None, list[str]]:
    """The program and ``set`` options of the Dockerfile's SHELL instruction, if any."""
    for line in install:
        m = _INSTRUCTION.match(line.strip())
        if m and m.group("word") == "SHELL":
            argv = json.loads(m.group("rest"))
            if not isinstance(argv, list) or len(argv) < 2 or argv[-1] != "-c":
                raise RecipeError(f"{DOCKERFILE}: SHELL {m.group('rest')}: only an exec form ending in -c is converted")
            return argv[0], argv[1:-1]
    return None, []


def _runscript(entrypoint: object, cmd: object) -> list[str]:
    """Docker's rule: ENTRYPOINT, then the arguments given, else CMD."""
    for name, value in (("ENTRYPOINT", entrypoint), ("CMD", cmd)):
        if value is not None and not isinstance(value, list):
            raise RecipeError(f"{DOCKERFILE}: {name} {value!r}: only the exec form (a JSON list) is converted")
    lines = [f'if [ "$#" -eq 0 ]; then set -- {shlex.join(cmd)}; fi'] if cmd else []  # type: ignore[arg-type]
    return [*lines, " ".join(["exec", *([shlex.join(entrypoint)] if entrypoint else []), '"$@"'])]  # type: ignore[arg-type]


def derive_recipe(root: str | Path = ROOT) -> str:
    """The Apptainer definition file for ``root``'s Dockerfile: spython's conversion with ``FIXES``."""
    from spython.main.parse.parsers import DockerParser
    from spython.main.parse.writers import SingularityWriter

    root = Path(root)
    text = (root / DOCKERFILE).read_text()
    _check_instructions(text)
    required = _required_args(text)
    with _quiet_spython():
        parser = DockerParser(str(root / DOCKERFILE))
    if len(parser.recipe) != 1:
        raise RecipeError(f"{DOCKERFILE}: {len(parser.recipe)} stages; one is converted")
    stage = next(iter(parser.recipe.values()))
    if stage.layer_files:
        raise RecipeError(f"{DOCKERFILE}: COPY --from is not converted")
    defaults = dict(parser.args)
    for name in defaults:
        for part in (json.dumps(stage.files), json.dumps(stage.labels), *stage.environ, *stage.install):
            if part != f"{name}={defaults[name]}" and re.search(rf"\$\{{?{name}\b", part):
                raise RecipeError(f"{DOCKERFILE}: ARG {name} has a default and is used outside FROM: not converted")

    # from
    stage.fromHeader = re.sub(r"^([^@]+?):[^:/@]+@(sha256:[0-9a-f]{64})$", r"\1@\2", stage.fromHeader)
    # files, labels, environment: build arguments as templates; identity variables out
    stage.files = [[_template(src, required), dst] for src, dst in stage.files]
    labels = []
    for item in stage.labels:
        for token in shlex.split(" ".join(item).rstrip("\\")):
            key, _, value = token.partition("=")
            labels.append([key, _template(value, required)])
    stage.labels = labels
    environ = list(stage.environ)
    stage.environ = [_template(e, required) for e in environ if e.split("=", 1)[0] not in _IDENTITY_ENV]
    # %post
    program, options = _shell(stage.install)
    assignments = {f"{k}={v}" for k, v in defaults.items()}
    post = [f"export {name}={{{{ {name} }}}}" for name in required]
    post += _symlinks(stage.files, root)
    post += _dockerignore_removals(stage.files, _ignored_paths((root / DOCKERIGNORE).read_text()), root)
    for line in stage.install:
        bare = line.strip()
        word = m.group("word") if (m := _INSTRUCTION.match(bare)) else ""
        if not bare or bare.startswith("#") or bare in assignments or word in ("SHELL", "USER"):
            continue
        post.append(f"export {bare}" if bare in environ else bare)
    if options or program:
        post.insert(0, "set -e" + "".join(f" {o}" for o in options))
    stage.install = post
    stage.workdir = None

    with _quiet_spython():
        written = SingularityWriter(parser.recipe).convert()
    written = re.sub(r"^Stage: .*\n", "", written, flags=re.M)
    if program:
        written = re.sub(r"^%post$", f"%post -c {program}", written, flags=re.M)
    written = written[: written.index("\n%runscript")]
    head, _, rest = written.partition("\n%")
    sections = [f"%{part}".rstrip("\n").split("\n") for part in rest.split("\n%")]
    sections.append(["%runscript", *_runscript(stage.entrypoint, stage.cmd)])
    text = "\n\n".join("\n".join([lines[0], *("    " + line for line in lines[1:] if line)]) for lines in sections)
    return f"{_header()}{head.strip()}\n\n{text}\n"


# ------------------------------------------------------------------------------------------- commands


def build_command(
    recipe: str | Path, sif: str | Path, build_args: Mapping[str, str], *, fakeroot: bool, force: bool = True
) -> list[str]:
    """``apptainer build`` of ``recipe`` into ``sif``. ``fakeroot``: %post installs packages as root, so a
    user without root builds in a fake-root namespace (``--fakeroot``)."""
    cmd = ["apptainer", "build"]
    if fakeroot:
        cmd.append("--fakeroot")
    if force:
        cmd.append("--force")
    for name, value in build_args.items():
        cmd += ["--build-arg", f"{name}={value}"]
    return [*cmd, str(sif), str(recipe)]


def exec_prefix(sif: str | Path, *, workdir: str | Path, binds: Sequence[str | Path] = ()) -> list[str]:
    """``apptainer exec`` of the image with the GPUs (``--nv``), ``workdir`` and ``binds`` mounted at their
    own paths, and the host's Python kept out: Apptainer passes the host environment through and mounts
    ``$HOME``, so the prefix empties ``PYTHONPATH`` and turns off user site-packages."""
    workdir = str(Path(workdir).resolve())
    cmd = ["apptainer", "exec", "--nv", "--env", "PYTHONNOUSERSITE=1", "--env", "PYTHONPATH="]
    for m in dict.fromkeys([workdir, *(str(Path(b).resolve()) for b in binds)]):
        cmd += ["--bind", m]
    return [*cmd, "--pwd", workdir, str(Path(sif).resolve())]


# ------------------------------------------------------------------------------------------- the file


def stale(root: str | Path = ROOT) -> str | None:
    """Why the committed recipe is not what the Dockerfile gives, or None when it is."""
    path = Path(root) / RECIPE
    want = derive_recipe(root)
    if not path.is_file():
        return f"{RECIPE} is missing: run `{REGENERATE}`"
    have = path.read_text()
    if have == want:
        return None
    line = next(
        (i for i, (a, b) in enumerate(zip(have.splitlines(), want.splitlines(), strict=False), 1) if a != b),
        min(len(have.splitlines()), len(want.splitlines())) + 1,
    )
    return f"{RECIPE} differs from what {DOCKERFILE} gives (first at line {line}): run `{REGENERATE}`"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Derive containers/coolsampler.def from containers/Dockerfile.")
    group = ap.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", action="store_true", help=f"write {RECIPE}")
    group.add_argument("--check", action="store_true", help=f"exit 1 if {RECIPE} is stale")
    ap.add_argument("--root", type=Path, default=ROOT, help="the repository root")
    args = ap.parse_args(argv)
    if not (args.root / DOCKERFILE).is_file():
        print(f"apptainer recipe: no {DOCKERFILE} under {args.root}: pass the checkout with --root", file=sys.stderr)
        return 1
    try:
        if args.write:
            (args.root / RECIPE).write_text(derive_recipe(args.root))
        why = None if args.write else stale(args.root)
    except RecipeError as e:
        why = str(e)
    if why:
        print(f"apptainer recipe: {why}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
