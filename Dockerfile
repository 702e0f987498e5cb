# One image for the operator and the pods' jobrunner (`draftgen` and `jobrunner` commands).
# GPU extraction needs a CUDA build of torch: build with --build-arg TORCH_EXTRA=extract on a CUDA base.
FROM python:3.11-slim
ARG TORCH_EXTRA=
WORKDIR /opt/draftgen
COPY pyproject.toml README.md ./
COPY draftgen_contracts ./draftgen_contracts
COPY draftgen ./draftgen
COPY jobrunner ./jobrunner
COPY operator ./operator
RUN pip install --no-cache-dir ".${TORCH_EXTRA:+[$TORCH_EXTRA]}" \
 && useradd --uid 65532 --no-create-home --shell /usr/sbin/nologin draftgen
USER 65532
ENV HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
ENTRYPOINT []
CMD ["draftgen", "operator"]
