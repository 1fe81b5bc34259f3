"""The Apptainer recipe derived from the Dockerfile, and the Apptainer command lines.

containers/coolsampler.def is what spython makes of containers/Dockerfile plus the fixes of
coolsampler.train.apptainer; these tests regenerate it and compare, hold the two images equivalent
instruction by instruction (independently of the derivation), check each fix on a small Dockerfile,
run the recipe's shell parts, and check the exact argv of ``apptainer build`` and ``apptainer exec``
with a fake ``apptainer`` on PATH. No Apptainer binary is needed, and none has run these recipes.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from coolsampler.train import apptainer
from coolsampler.train.apptainer import RecipeError, build_command, derive_recipe, exec_prefix, stale
from coolsampler.train.container import ContainerSpec, training_prefix

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "workflow" / "scripts"))
import build_image  # noqa: E402


def section(recipe: str, name: str) -> list[str]:
    """The lines of one %section, without the header line's arguments and without indentation."""
    m = re.search(rf"^%{name}\b[^\n]*\n(.*?)(?=^%|\Z)", recipe, re.M | re.S)
    assert m, f"%{name} missing"
    return [line.strip() for line in m.group(1).splitlines() if line.strip()]


def instructions(dockerfile: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n\s*", " ", "\n".join(x for x in dockerfile.splitlines() if not x.lstrip().startswith("#")))
    return [(m.group(1), m.group(2).strip()) for m in re.finditer(r"^([A-Z]+)\s+(.*)$", text, re.M)]


# ------------------------------------------------------------------------ the committed recipe


def test_the_committed_recipe_is_what_the_dockerfile_gives() -> None:
    """One definition: containers/coolsampler.def is regenerated from the Dockerfile and compared byte for
    byte; `python -m coolsampler.train.apptainer --check` is the same check."""
    assert stale(ROOT) is None
    assert (ROOT / apptainer.RECIPE).read_text() == derive_recipe(ROOT)
    assert apptainer.main(["--check"]) == 0


def test_the_command_needs_a_checkout(tmp_path: Path, capsys) -> None:
    assert apptainer.main(["--check", "--root", str(tmp_path)]) == 1
    assert capsys.readouterr().err == (
        f"apptainer recipe: no containers/Dockerfile under {tmp_path}: pass the checkout with --root\n"
    )


def test_the_apptainer_image_is_the_docker_image() -> None:
    """Read from the two files themselves, not from the derivation: every ENV, LABEL, COPY and RUN of the
    Dockerfile is in the recipe, the base is the same digest, the required build argument is one too.
    The hand-written recipe this replaced missed the user the Dockerfile creates and one label."""
    docker = (ROOT / "containers/Dockerfile").read_text()
    recipe = (ROOT / apptainer.RECIPE).read_text()
    post, files = "\n".join(section(recipe, "post")), section(recipe, "files")
    environment, labels = section(recipe, "environment"), section(recipe, "labels")
    required = re.findall(r"^ARG (\w+)$", docker, re.M)
    assert required == ["VERL_VERSION"]

    def templ(s: str) -> str:
        return s.replace("${VERL_VERSION}", "{{ VERL_VERSION }}")

    for word, args in instructions(docker):
        if word == "ARG" and "=" in args:
            name, default = args.split("=", 1)
            repo, digest = re.fullmatch(r"(.+?):[^:/@]+@(sha256:[0-9a-f]{64})", default).groups()
            assert re.search(rf"^From: {re.escape(repo)}@{digest}$", recipe, re.M), name
        elif word == "ENV":
            for pair in shlex.split(args):
                assert f"export {pair}" in post.splitlines(), pair
                if pair.split("=")[0] not in ("USER", "LOGNAME", "HOME"):
                    assert f"export {templ(pair)}" in environment, pair
        elif word == "LABEL":
            for pair in shlex.split(args):
                key, value = pair.split("=", 1)
                assert f"{key} {templ(value)}" in labels, pair
        elif word == "COPY":
            *sources, dest = args.split()
            for src in sources:
                assert f"{templ(src)} {dest}" in files, src
        elif word == "RUN":
            assert re.sub(r"\s+", " ", args) in re.sub(r"\s*\\\n\s*", " ", post), args
    assert "export VERL_VERSION={{ VERL_VERSION }}" in post.splitlines()
    assert "useradd --create-home --uid 10001" in post
    assert "org.opencontainers.image.description GRPO" in "\n".join(labels)
    # the package's links stay links (Docker's COPY keeps them; Apptainer's %files would copy config/ in)
    for link in ("config", "profiles"):
        assert f"ln -s ../../../../{link} /opt/coolsampler/src/workflow/coolsampler/spec/shipped_files/{link}" in post
    # what the dockerignore keeps out of Docker's context is removed before install.sh installs the package
    for gone in ("testkit", "__pycache__", "'*.pyc'"):
        assert post.index(gone) < post.index("bash /opt/coolsampler/install.sh"), gone


def test_an_edited_dockerfile_makes_the_recipe_stale(tmp_path: Path) -> None:
    """The drift the hand-written recipe allowed: a pin changed in the Dockerfile alone. The check names
    the first differing line and the command that regenerates; after it the pin is in the recipe."""
    for f in (apptainer.DOCKERFILE, apptainer.DOCKERIGNORE, apptainer.RECIPE):
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / f, tmp_path / f)
    shutil.copytree(ROOT / "workflow/coolsampler", tmp_path / "workflow/coolsampler", symlinks=True)
    docker = tmp_path / apptainer.DOCKERFILE
    docker.write_text(docker.read_text().replace("TORCH_VERSION=2.11.0", "TORCH_VERSION=2.12.0"))
    why = stale(tmp_path)
    assert why and "first at line" in why and apptainer.REGENERATE in why
    assert apptainer.main(["--check", "--root", str(tmp_path)]) == 1
    assert apptainer.main(["--write", "--root", str(tmp_path)]) == 0
    assert stale(tmp_path) is None
    assert "export TORCH_VERSION=2.12.0" in section((tmp_path / apptainer.RECIPE).read_text(), "environment")


# ---------------------------------------------------------------------------------- the fixes


def small_repo(tmp_path: Path, dockerfile: str, ignore: str = "*\n!app/\n") -> Path:
    (tmp_path / "containers").mkdir(parents=True, exist_ok=True)
    (tmp_path / "app" / "sub").mkdir(parents=True, exist_ok=True)
    (tmp_path / "app" / "a.py").write_text("")
    if not (tmp_path / "app" / "cfg").is_symlink():
        (tmp_path / "app" / "cfg").symlink_to("../conf")  # out of the build context, as shipped_files/config
    (tmp_path / apptainer.DOCKERFILE).write_text(dockerfile)
    (tmp_path / apptainer.DOCKERIGNORE).write_text(ignore)
    return tmp_path


DIGEST = "sha256:" + "ab" * 32
SMALL = f"""# a comment spython would copy into %post
ARG BASE=example/base:v1@{DIGEST}
FROM ${{BASE}}
ARG VERSION
ENV PIN=1.0 \\
    WITH_ARG=${{VERSION}}
LABEL one="a b" two="x-${{VERSION}}"
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
COPY app /opt/app
COPY results/w-${{VERSION}}.whl /opt/wheels/
RUN bash -c 'echo "$PIN"' | cat
ENV USER=someone LOGNAME=someone
USER 1000:1000
WORKDIR /home/someone
ENTRYPOINT ["tini", "--"]
CMD ["python3", "-V"]
"""


def test_each_fix_on_a_small_dockerfile(tmp_path: Path) -> None:
    recipe = derive_recipe(small_repo(tmp_path, SMALL, "*\n!app/\n**/__pycache__\napp/sub\n"))
    assert re.search(rf"^From: example/base@{DIGEST}$", recipe, re.M), "tag dropped, digest kept"
    assert "Stage:" not in recipe and "%startscript" not in recipe
    assert section(recipe, "files") == ["app /opt/app", "results/w-{{ VERSION }}.whl /opt/wheels/"]
    assert section(recipe, "labels") == ["one a b", "two x-{{ VERSION }}"]
    assert section(recipe, "environment") == ["export PIN=1.0", "export WITH_ARG={{ VERSION }}"]
    assert re.search(r"^%post -c /bin/bash$", recipe, re.M)
    post = section(recipe, "post")
    assert post[:5] == [
        "set -e -o pipefail",
        "export VERSION={{ VERSION }}",
        "rm -rf /opt/app/cfg && ln -s ../conf /opt/app/cfg",
        "find /opt/app -name __pycache__ -prune -exec rm -rf {} +",
        "rm -rf /opt/app/sub",
    ]
    assert "export PIN=1.0" in post and "export WITH_ARG=${VERSION}" in post
    assert "export USER=someone" in post
    assert not [line for line in post if line.startswith(("#", "SHELL", "USER", "su ", "BASE="))], post
    assert section(recipe, "runscript") == [
        'if [ "$#" -eq 0 ]; then set -- python3 -V; fi',
        'exec tini -- "$@"',
    ]


def test_spython_alone_gets_these_wrong() -> None:
    """Why the fixes exist: spython 0.3.14's own conversion of the project's Dockerfile. If a spython release
    fixes one of these, this test says so and the fix can go."""
    from spython.main.parse.parsers import DockerParser
    from spython.main.parse.writers import SingularityWriter

    with apptainer._quiet_spython():
        raw = SingularityWriter(DockerParser(str(ROOT / apptainer.DOCKERFILE)).recipe).convert()
    assert re.search(r"^From: \S+:v0\.24\.0@sha256:", raw, re.M)  # tag and digest: refused by Apptainer
    assert "su - " in raw  # USER, and the ENV USER=..., turned into su
    assert re.search(r"^VLLM_VERSION=0\.24\.0$", raw, re.M)  # not exported to install.sh
    assert re.search(r"^SHELL \[", raw, re.M)  # a Docker instruction run as a command
    assert 'org.opencontainers.image.title="coolsampler"' in raw  # Docker's label form
    assert 'exec  /bin/bash "$@"' in raw  # the arguments handed to bash as a script
    assert "${VERL_VERSION}" in "\n".join(section(raw, "files"))  # no build argument
    assert "testkit" not in raw  # the dockerignore is not read


@pytest.mark.parametrize(
    "dockerfile, error",
    [
        (f"ARG B=x/y:v1@{DIGEST}\nFROM ${{B}}\nRUN echo ${{B}}\n", "ARG B has a default and is used outside FROM"),
        (f"FROM x/y@{DIGEST} AS one\nFROM x/z@{DIGEST}\nCOPY --from=one /a /a\n", "COPY --from is not converted"),
        (f"FROM x/y@{DIGEST} AS one\nRUN true\nFROM x/z@{DIGEST} AS two\nRUN true\n", "2 stages"),
        (f"FROM x/y@{DIGEST}\nCMD python3 -V\n", "only the exec form"),
        (f'FROM x/y@{DIGEST}\nSHELL ["/bin/bash"]\n', "ending in -c"),
        (f"FROM x/y@{DIGEST}\nONBUILD RUN true\n", "ONBUILD is not converted"),
        (f"FROM x/y@{DIGEST}\nADD https://example.org/a.tar.gz /opt/\n", "ADD is not converted"),
        (f"FROM x/y@{DIGEST}\nHEALTHCHECK CMD true\n", "HEALTHCHECK is not converted"),
        (f"FROM x/y@{DIGEST}\nCOPY --chown=1:1 app /opt/app\n", "COPY --chown=1:1 is not converted"),
    ],
)
def test_what_is_not_converted_is_refused(tmp_path: Path, dockerfile: str, error: str) -> None:
    with pytest.raises(RecipeError, match=re.escape(error)):
        derive_recipe(small_repo(tmp_path, dockerfile))


def test_a_dockerignore_glob_inside_a_copied_directory_is_refused(tmp_path: Path) -> None:
    repo = small_repo(tmp_path, f"FROM x/y@{DIGEST}\nCOPY app /opt/app\n", "*\n!app/\napp/*.txt\n")
    with pytest.raises(RecipeError, match="a glob inside a copied directory"):
        derive_recipe(repo)


def test_the_recipes_shell_parts_run(tmp_path: Path) -> None:
    """%post is valid bash, its removals do what the dockerignore does on a copy of the package, and the
    runscript runs its arguments, else CMD (Docker's ENTRYPOINT [] / CMD ["/bin/bash"])."""
    recipe = (ROOT / apptainer.RECIPE).read_text().replace("{{ VERL_VERSION }}", "0.9.1+coolsampler.0")
    post = "\n".join(section(recipe, "post"))
    subprocess.run(["bash", "-n"], input=post, text=True, check=True)
    copy = tmp_path / "opt/coolsampler/src/workflow/coolsampler"
    shutil.copytree(ROOT / "workflow/coolsampler", copy)
    (copy / "worker" / "__pycache__").mkdir(exist_ok=True)
    (copy / "stray.pyc").write_bytes(b"")
    removals = [line for line in section(recipe, "post") if line.startswith(("find ", "rm -rf "))]
    script = "\n".join(line.replace("/opt/", f"{tmp_path}/opt/") for line in removals)
    subprocess.run(["bash", "-e", "-c", script], check=True)
    assert not (copy / "testkit").exists() and not list(copy.rglob("__pycache__")) and not list(copy.rglob("*.pyc"))
    assert (copy / "worker" / "rewards.py").is_file()
    runscript = "\n".join(section(recipe, "runscript"))
    ran = subprocess.run(["sh", "-c", runscript, "runscript", "echo", "a b"], capture_output=True, text=True)
    assert ran.stdout == "a b\n"
    ran = subprocess.run(["sh", "-c", runscript.replace("/bin/bash", "/bin/echo"), "runscript"], capture_output=True)
    assert ran.returncode == 0 and ran.stdout == b"\n"


# -------------------------------------------------------------------------------- the commands


def test_build_command_argv() -> None:
    assert build_command("containers/coolsampler.def", "/r/img.sif", {"VERL_VERSION": "0.9.1+c.1"}, fakeroot=True) == [
        "apptainer",
        "build",
        "--fakeroot",
        "--force",
        "--build-arg",
        "VERL_VERSION=0.9.1+c.1",
        "/r/img.sif",
        "containers/coolsampler.def",
    ]
    assert build_command("x.def", "y.sif", {}, fakeroot=False, force=False) == ["apptainer", "build", "y.sif", "x.def"]


def test_exec_prefix_argv(tmp_path: Path) -> None:
    """The training prefix of engine apptainer is this argv, whole."""
    work, data = (tmp_path / "w").resolve(), (tmp_path / "d").resolve()
    want = [
        "apptainer",
        "exec",
        "--nv",
        "--env",
        "PYTHONNOUSERSITE=1",
        "--env",
        "PYTHONPATH=",
        "--bind",
        str(work),
        "--bind",
        str(data),
        "--pwd",
        str(work),
        str(Path("results/build/coolsampler.sif").resolve()),
    ]
    assert exec_prefix("results/build/coolsampler.sif", workdir=work, binds=[data, work]) == want
    spec = ContainerSpec.from_config({"container": {"engine": "apptainer"}})
    assert training_prefix(spec, "sha256:" + "0" * 64, workdir=work, binds=[data]) == want


def fake_apptainer(tmp_path: Path) -> tuple[Path, Path]:
    """A stand-in for the binary at the subprocess boundary: records its argv and working directory, and
    writes the .sif it is asked to build."""
    bin_dir, log = tmp_path / "bin", tmp_path / "apptainer.calls"
    bin_dir.mkdir()
    fake = bin_dir / "apptainer"
    fake.write_text(
        f"#!{sys.executable}\nimport json, os, sys\n"
        f"open({str(log)!r}, 'a').write(json.dumps([os.getcwd(), sys.argv[1:]]) + '\\n')\n"
        "open(sys.argv[-2], 'wb').write(b'a sif')\n"
    )
    fake.chmod(0o755)
    return bin_dir, log


def image_repo(tmp_path: Path, version: str) -> Path:
    repo = tmp_path / "repo"
    for f in (apptainer.DOCKERFILE, apptainer.DOCKERIGNORE, apptainer.RECIPE):
        (repo / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / f, repo / f)
    shutil.copytree(ROOT / "workflow/coolsampler", repo / "workflow/coolsampler", symlinks=True)
    (repo / "results" / "build").mkdir(parents=True)
    (repo / "results" / "build" / f"verl-{version}-py3-none-any.whl").write_bytes(b"")
    return repo


def test_the_image_build_runs_this_argv_and_records_the_sif_digest(tmp_path: Path, monkeypatch) -> None:
    """build_image.py for engine apptainer, with a fake apptainer: the exact argv, run from the repository
    root (the recipe's %files are relative to it), the .sif's sha256 in image.digest."""
    version = "0.9.1+coolsampler.0123456789"
    repo = image_repo(tmp_path, version)
    bin_dir, log = fake_apptainer(tmp_path)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(build_image.os, "geteuid", lambda: 1000)
    monkeypatch.chdir(tmp_path)
    out = repo / "results" / "build" / "image.digest"
    digest = build_image.build("apptainer", "out/coolsampler.sif", version, out, root=repo)
    sif = tmp_path / "out" / "coolsampler.sif"
    assert digest == "sha256:" + hashlib.sha256(b"a sif").hexdigest() == out.read_text().strip()
    [(cwd, argv)] = [json.loads(line) for line in log.read_text().splitlines()]
    assert cwd == str(repo)
    assert argv == [
        "build",
        "--fakeroot",
        "--force",
        "--build-arg",
        f"VERL_VERSION={version}",
        str(sif),
        str(repo / "containers/coolsampler.def"),
    ]


def test_the_image_build_refuses_a_stale_recipe(tmp_path: Path, monkeypatch) -> None:
    """An edited Dockerfile without a regenerated recipe: nothing is built, the error says how to fix it."""
    version = "0.9.1+coolsampler.0123456789"
    repo = image_repo(tmp_path, version)
    (repo / apptainer.DOCKERFILE).write_text((repo / apptainer.DOCKERFILE).read_text() + "ENV EXTRA=1\n")
    bin_dir, log = fake_apptainer(tmp_path)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(build_image.ImageBuildError, match=re.escape(apptainer.REGENERATE)):
        build_image.build("apptainer", str(tmp_path / "x.sif"), version, tmp_path / "d", root=repo)
    assert not log.exists()
