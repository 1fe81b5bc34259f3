#!/usr/bin/env bash
# The install step of the coolsampler image, shared by containers/Dockerfile and
# containers/coolsampler.def so the two cannot drift: one script, one set of pins.
#
# Needs (from the image definition): VLLM_VERSION, TORCH_VERSION, TRANSFORMERS_VERSION,
# VERL_VERSION (the patched wheel's local version, build_verl.py --print-version), and the files
# /opt/coolsampler/wheels/verl-$VERL_VERSION-py3-none-any.whl, /opt/coolsampler/src (pyproject +
# workflow/coolsampler), /opt/coolsampler/image-lock.json and /opt/coolsampler/check_image.py.
#
# Two sets of constraints:
# * the GPU stack the base image ships (torch, vLLM, CUDA wheels, ...), frozen from the image itself:
#   verl[verl-core] and coolsampler have loose requirements, and without this pip may "upgrade" them
#   and the image would no longer be the vLLM build it is pinned to;
# * everything else, from containers/image-lock.json: one resolution by pip's resolver of the base
#   pins plus all this script installs (workflow/tools/lock_image.py; tests/train/test_containers.py
#   checks offline that it is complete and free of conflicts). So the image gets the versions that
#   were checked together, not whatever PyPI serves on the day of the build.
set -euo pipefail

: "${VLLM_VERSION:?}" "${TORCH_VERSION:?}" "${TRANSFORMERS_VERSION:?}"
: "${VERL_VERSION:?VERL_VERSION is required: python workflow/scripts/build_verl.py --print-version}"

PY=python3
WHEEL="/opt/coolsampler/wheels/verl-${VERL_VERSION}-py3-none-any.whl"
CONSTRAINTS=/opt/coolsampler/constraints.txt
LOCK=/opt/coolsampler/image-lock.json
LOCKED=/opt/coolsampler/locked.txt
# The base image's GPU stack: frozen from the image, never taken from the lock.
GPU_STACK='torch|torchvision|torchaudio|vllm|triton|xformers|flashinfer[a-z0-9_-]*|nvidia-[a-z0-9_-]+|cupy[a-z0-9_-]*|numpy'
export PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_BREAK_SYSTEM_PACKAGES=1

test -f "$WHEEL" || { echo "install.sh: $WHEEL missing (run: snakemake verl_wheel)" >&2; exit 1; }

version() { "$PY" -c "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))" "$1"; }
check() {  # name want: the installed version must be exactly the pinned one (local suffixes allowed)
  local have
  have="$(version "$1")"
  case "$have" in
    "$2" | "$2"+*) ;;
    *) echo "install.sh: $1 is $have, the image pins $2" >&2; exit 1 ;;
  esac
}

# The base image must be what the pins say, before anything is installed on top.
check vllm "$VLLM_VERSION"
check torch "$TORCH_VERSION"

"$PY" -m pip freeze | grep -iE "^(${GPU_STACK})==" > "$CONSTRAINTS"
echo "install.sh: frozen from the base image:"
cat "$CONSTRAINTS"

# The lock, less the GPU stack (frozen above) and verl (our wheel, installed by path).
"$PY" - "$LOCK" "$GPU_STACK" "$VLLM_VERSION" "$TORCH_VERSION" "$TRANSFORMERS_VERSION" > "$LOCKED" <<'PYEOF'
import json, re, sys
lock = json.load(open(sys.argv[1]))
want = dict(zip(("vllm", "torch", "transformers"), sys.argv[3:6]))
for name, version in want.items():
    if lock["packages"][name]["version"] != version:
        sys.exit(f"install.sh: the lock has {name} {lock['packages'][name]['version']}, the image pins {version}")
stack = re.compile(rf"^({sys.argv[2]})$", re.I)
for name, pkg in sorted(lock["packages"].items()):
    if not stack.match(name) and name != "verl":
        print(f"{name}=={pkg['version']}")
PYEOF
echo "install.sh: $(wc -l < "$LOCKED") packages pinned by the lock"

# verl: our patched wheel, then its verl-core dependencies, resolved against the frozen stack.
"$PY" -m pip install --no-deps "$WHEEL"
"$PY" -m pip install -c "$CONSTRAINTS" -c "$LOCKED" "${WHEEL}[verl-core]" "transformers==${TRANSFORMERS_VERSION}"
# coolsampler itself (+ Snakemake, so the whole pipeline can run inside the image on one GPU box).
"$PY" -m pip install -c "$CONSTRAINTS" -c "$LOCKED" "/opt/coolsampler/src[workflow]"

# Nothing replaced the GPU stack, and the verl that runs is the one the DAG built.
check vllm "$VLLM_VERSION"
check torch "$TORCH_VERSION"
check transformers "$TRANSFORMERS_VERSION"
test "$(version verl)" = "$VERL_VERSION" || { echo "install.sh: verl is $(version verl), want $VERL_VERSION" >&2; exit 1; }
"$PY" -m pip check || echo "install.sh: pip check reports the conflicts above (the image's own pins win)" >&2
# Everything a training step imports, and the learner's attention on a tiny Qwen2 (CPU).
"$PY" /opt/coolsampler/check_image.py
# The wheel stays (COOLSAMPLER_VERL_WHEELHOUSE): rule verl_wheel copies it instead of fetching verl from PyPI,
# so the pipeline runs inside the image offline, from a fresh clone (workflow/scripts/build_verl.py).
echo "install.sh: vllm $VLLM_VERSION, torch $TORCH_VERSION, transformers $TRANSFORMERS_VERSION, verl $VERL_VERSION"
