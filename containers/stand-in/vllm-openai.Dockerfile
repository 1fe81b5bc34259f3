# A stand-in for the pinned base of containers/Dockerfile (vllm/vllm-openai:v0.24.0), for building the
# training image where Docker Hub is out of reach: the same Python and GPU stack, from PyPI -- CPython
# 3.12, vllm==0.24.0 with the torch==2.11.0 it pins (CUDA wheels: the image builds and checks on a machine
# without GPUs, as the real base does). Not the real base: no digest can be carried over, and the vLLM
# image's own CUDA toolkit layers and entrypoint scripts are not here. Built by
# workflow/tools/docker_bases.py, which also builds DEBIAN_IMAGE locally (mmdebstrap, docker import) and
# puts a CPython 3.12 tree built against Debian 12's libraries (e.g. pyenv's) into the context as python/.
#
#   python workflow/tools/docker_bases.py gpu-stand-in --python-prefix ~/.pyenv/versions/3.12.1
#   docker build -f containers/Dockerfile --build-arg BASE_IMAGE=coolsampler-local/vllm-openai:v0.24.0 ...
ARG DEBIAN_IMAGE=coolsampler-local/debian:bookworm
FROM ${DEBIAN_IMAGE}

ARG VLLM_VERSION=0.24.0
ARG TORCH_VERSION=2.11.0

# the interpreter, relocated to /usr/local (its own run path names the tree it was built in: ldconfig
# finds libpython3.12 here instead)
COPY python/ /usr/local/
RUN ldconfig \
    && ln -sf python3.12 /usr/local/bin/python3 \
    && ln -sf pip3.12 /usr/local/bin/pip3 \
    && python3 -c "import ssl, sqlite3, ctypes, lzma, bz2, readline; print('python', __import__('sys').version)"

RUN PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    python3 -m pip install "vllm==${VLLM_VERSION}" "torch==${TORCH_VERSION}" \
    && python3 -c "import importlib.metadata as m; print('vllm', m.version('vllm'), 'torch', m.version('torch'))"

ENTRYPOINT ["vllm", "serve"]
