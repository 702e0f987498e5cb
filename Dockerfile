# The one recipe for draftgen's images: the operator (`draftgen operator`) and every pod's `jobrunner`.
# docs/image.md says which images to build from it, what each holds and how to push them.
#
# Build arguments:
#   BASE         any image with Python 3.11 and its venv module: python:3.11-slim-bookworm by default,
#                a CUDA runtime image with python3-venv, or a mirror of either
#   TORCH        cuda: PyPI's torch (CUDA libraries included; it also runs on CPUs), for extraction
#                     with the default backend, transformers (about 7 GB)
#                cpu:  torch's CPU build from TORCH_INDEX, the same version (about 2 GB)
#                none: no torch (about 1 GB): the operator, or runs whose extraction.backend is sglang
#   TORCH_INDEX  the package index TORCH=cpu installs torch from (PyTorch's CPU wheel index)
#
# Every package comes from requirements/*.lock (`make lock`), so two builds a month apart hold the same code.
ARG BASE=python:3.11-slim-bookworm
FROM ${BASE}
ARG TORCH=cuda
ARG TORCH_INDEX=
ENV VIRTUAL_ENV=/opt/draftgen/venv PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
ENV PATH=/opt/draftgen/venv/bin:$PATH
WORKDIR /opt/draftgen
# Dependencies before the code: a change to the code rebuilds from here on only.
COPY requirements ./requirements
RUN python3 -m venv "$VIRTUAL_ENV" \
 && pip install --no-deps -r requirements/draftgen.lock \
 && case "$TORCH" in \
      cuda) pip install --no-deps -r requirements/torch.lock ;; \
      cpu) test -n "$TORCH_INDEX" || { echo "TORCH=cpu needs TORCH_INDEX (PyTorch's CPU wheel index)" >&2; exit 1; } \
           && grep -v -E '^(torch|triton|nvidia-|cuda-)' requirements/torch.lock > /tmp/cpu.lock \
           && pip install --no-deps -r /tmp/cpu.lock \
           && pip install --no-deps --index-url "$TORCH_INDEX" "$(grep '^torch==' requirements/torch.lock)" ;; \
      none) ;; \
      *) echo "TORCH must be cuda, cpu or none, not '$TORCH'" >&2; exit 1 ;; \
    esac
COPY pyproject.toml README.md ./src/
COPY draftgen_contracts ./src/draftgen_contracts
COPY draftgen_simulator ./src/draftgen_simulator
COPY draftgen ./src/draftgen
COPY jobrunner ./src/jobrunner
COPY draftgen_operator ./src/draftgen_operator
# No build isolation: the build backend is the locked one above, and nothing is fetched here.
RUN pip install --no-deps --no-build-isolation ./src \
 && pip check \
 && rm -rf ./src \
 && useradd --uid 65532 --user-group --no-create-home --shell /usr/sbin/nologin draftgen
USER 65532:65532
# HOME: the pods mount their one writable folder at /tmp (a read-only root everywhere else).
ENV HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 HOME=/tmp
ENTRYPOINT []
CMD ["draftgen", "operator"]
