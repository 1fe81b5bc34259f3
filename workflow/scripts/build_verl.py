#!/usr/bin/env python3
"""Build the patched verl wheel: the only way any environment of this project gets verl.

fetch verl==0.9.1 from PyPI -> check its sha256 -> unpack -> apply patches/verl/*.patch in order
(``patch -p1``) -> stamp a local version ``0.9.1+coolsampler.<patch-hash>`` -> repack with ``wheel``.

Standard library + pip + ``wheel`` + GNU patch only, so it runs before anything else is installed
(workflow/tools/setup_env.sh), as a Snakemake rule (``verl_wheel``) and in the container build.
A patch that does not apply stops the build naming the patch, the file, the hunk and the verl
version found.

An image keeps the wheel it was installed from and names its folder in ``COOLSAMPLER_VERL_WHEELHOUSE``:
a wheel there built from these very patches (its recorded patch list equal to patches/verl's names and
sha256) is copied instead of built, so the pipeline runs inside the image offline, from a fresh clone.

    python workflow/scripts/build_verl.py --out results/build [--patches patches/verl] [--wheel FILE]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

VERL_VERSION = "0.9.1"
VERL_WHEEL = f"verl-{VERL_VERSION}-py3-none-any.whl"
VERL_SHA256 = "db6e6f2a8d9d5808d9ec32d357a42319fdc6967df688ff9d9810050f49bfdd14"
WHEELHOUSE_ENV = "COOLSAMPLER_VERL_WHEELHOUSE"
PATCH_RECORD = "verl/coolsampler_patches.txt"


class BuildError(RuntimeError):
    pass


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def patch_hash(patches: list[Path]) -> str:
    h = hashlib.sha256()
    for p in patches:
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:10]


def local_version(patches: list[Path]) -> str:
    return f"{VERL_VERSION}+coolsampler.{patch_hash(patches)}"


def patch_record(patches: list[Path]) -> str:
    """What a built wheel records of the patches it was built from (one ``name sha256`` line each)."""
    return "".join(f"{p.name} {sha256(p)}\n" for p in patches)


def prebuilt(patches: list[Path], version: str) -> Path | None:
    """A wheel of this very patch set in the wheelhouse an image names (module doc), or None."""
    house = os.environ.get(WHEELHOUSE_ENV)
    wheel = Path(house) / f"verl-{version}-py3-none-any.whl" if house else None
    if wheel is None or not wheel.is_file():
        return None
    try:
        with zipfile.ZipFile(wheel) as z:
            recorded = z.read(PATCH_RECORD).decode()
    except (KeyError, zipfile.BadZipFile):
        return None
    return wheel if recorded == patch_record(patches) else None


def fetch_wheel(dest: Path, wheel: Path | None) -> Path:
    if wheel is None:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(dest), f"verl=={VERL_VERSION}"],
            check=True,
        )
        wheel = dest / VERL_WHEEL
    digest = sha256(wheel)
    if digest != VERL_SHA256:
        raise BuildError(f"{wheel}: sha256 {digest} is not that of the verl {VERL_VERSION} release ({VERL_SHA256})")
    return wheel


def found_version(tree: Path) -> str:
    v = tree / "verl" / "version" / "version"
    return v.read_text().strip() if v.exists() else "unknown"


def apply_patches(tree: Path, patches: list[Path], *, dry_run: bool = False) -> None:
    for p in patches:
        args = ["patch", "-p1", "--forward", "--batch", "--no-backup-if-mismatch", "-i", str(p.resolve())]
        if dry_run:
            args.append("--dry-run")
        res = subprocess.run(args, cwd=tree, capture_output=True, text=True)
        if res.returncode != 0:
            current = None
            failures = []
            for line in res.stdout.splitlines():
                m = re.match(r"(?:checking|patching) file (\S+)", line)
                if m:
                    current = m.group(1)
                elif "FAILED" in line or "can't find file" in line or "Reversed" in line:
                    failures.append(f"{current}: {line.strip()}")
            detail = "; ".join(failures) or res.stdout.strip().replace("\n", " | ")
            raise BuildError(
                f"patch {p.name} does not apply to the verl tree (verl version found: {found_version(tree)}, "
                f"expected {VERL_VERSION}): {detail}"
            )


def build(out: Path, patches_dir: Path, wheel: Path | None = None) -> Path:
    patches = sorted(patches_dir.glob("*.patch"))
    if not patches:
        raise BuildError(f"no patches in {patches_dir}")
    version = local_version(patches)
    out.mkdir(parents=True, exist_ok=True)
    kept = prebuilt(patches, version) if wheel is None else None
    if kept is not None:
        print(f"build_verl: {kept} was built from these patches; copied, not built", file=sys.stderr)
        shutil.copy2(kept, out / kept.name)
        return out / kept.name
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        src = fetch_wheel(tmp, wheel)
        tree = tmp / "tree"
        subprocess.run([sys.executable, "-m", "wheel", "unpack", "--dest", str(tmp), str(src)], check=True)
        (tmp / f"verl-{VERL_VERSION}").rename(tree)
        apply_patches(tree, patches)
        # Stamp the local version where verl and packaging read it.
        (tree / "verl" / "version" / "version").write_text(version + "\n")
        info = tree / f"verl-{VERL_VERSION}.dist-info"
        meta = info / "METADATA"
        meta.write_text(re.sub(r"(?m)^Version: .*$", f"Version: {version}", meta.read_text(), count=1))
        info.rename(tree / f"verl-{version}.dist-info")
        (tree / PATCH_RECORD).write_text(patch_record(patches))
        (tmp / "dist").mkdir()
        subprocess.run([sys.executable, "-m", "wheel", "pack", "--dest-dir", str(tmp / "dist"), str(tree)], check=True)
        built = next((tmp / "dist").glob("verl-*.whl"))
        target = out / built.name
        shutil.copy2(built, target)
    return target


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path("results/build"))
    ap.add_argument("--patches", type=Path, default=Path(__file__).resolve().parents[2] / "patches" / "verl")
    ap.add_argument("--wheel", type=Path, help="a local verl-0.9.1 wheel instead of downloading it")
    ap.add_argument("--print-version", action="store_true", help="print the local version and exit")
    args = ap.parse_args(argv)
    if args.print_version:
        print(local_version(sorted(args.patches.glob("*.patch"))))
        return 0
    try:
        print(build(args.out, args.patches, args.wheel))
    except BuildError as e:
        print(f"build_verl: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
