#!/usr/bin/env bash
# The install step of the coolsampler image, shared by containers/Dockerfile and
# containers/coolsampler.def so the two cannot drift: one script, one set of pins.
#
# Needs (from the image definition): VLLM_VERSION, TORCH_VERSION, TRANSFORMERS_VERSION,
# VERL_VERSION (the patched wheel's local version, build_verl.py --print-version), and the files
# /opt/coolsampler/wheels/verl-$VERL_VERSION-py3-none-any.whl and /opt/coolsampler/src (pyproject +
# workflow/coolsampler).
#
# Why a constraints file: verl[verl-core] and coolsampler have loose requirements; without
# constraints pip may "upgrade" the image's torch/vLLM/CUDA wheels, and the image would no longer
# be the vLLM build it is pinned to. Every GPU-stack package the base image ships is frozen here.
set -euo pipefail

: "${VLLM_VERSION:?}" "${TORCH_VERSION:?}" "${TRANSFORMERS_VERSION:?}"
: "${VERL_VERSION:?VERL_VERSION is required: python workflow/scripts/build_verl.py --print-version}"

PY=python3
WHEEL="/opt/coolsampler/wheels/verl-${VERL_VERSION}-py3-none-any.whl"
CONSTRAINTS=/opt/coolsampler/constraints.txt
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

"$PY" -m pip freeze \
  | grep -iE '^(torch|torchvision|torchaudio|vllm|triton|xformers|flashinfer[a-z0-9_-]*|nvidia-[a-z0-9_-]+|cupy[a-z0-9_-]*|numpy)==' \
  > "$CONSTRAINTS"
echo "install.sh: frozen from the base image:"
cat "$CONSTRAINTS"

# verl: our patched wheel, then its verl-core dependencies, resolved against the frozen stack.
"$PY" -m pip install --no-deps "$WHEEL"
"$PY" -m pip install -c "$CONSTRAINTS" "${WHEEL}[verl-core]" "transformers==${TRANSFORMERS_VERSION}"
# coolsampler itself (+ Snakemake, so the whole pipeline can run inside the image on one GPU box).
"$PY" -m pip install -c "$CONSTRAINTS" "/opt/coolsampler/src[workflow]"

# Nothing replaced the GPU stack, and the verl that runs is the one the DAG built.
check vllm "$VLLM_VERSION"
check torch "$TORCH_VERSION"
check transformers "$TRANSFORMERS_VERSION"
test "$(version verl)" = "$VERL_VERSION" || { echo "install.sh: verl is $(version verl), want $VERL_VERSION" >&2; exit 1; }
"$PY" -m pip check || echo "install.sh: pip check reports the conflicts above (the image's own pins win)" >&2
"$PY" -c "import coolsampler.overrides, coolsampler.rewards"
rm -rf /opt/coolsampler/wheels
echo "install.sh: vllm $VLLM_VERSION, torch $TORCH_VERSION, transformers $TRANSFORMERS_VERSION, verl $VERL_VERSION"
