# The two set-up commands are `make demo` and `make test`; everything else here serves them.
PY ?= python3
VENV := .venv
PYTHON := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: test demo demo-binaries demo-sglang cluster cluster-down binaries controllers sglang image lock bench

$(STAMP): pyproject.toml devtools/pyproject.toml
	test -x $(PYTHON) || $(PY) -m venv $(VENV)
	$(PYTHON) -m pip install -q --upgrade pip
	$(PYTHON) -m pip install -q -e '.[test]' -e devtools
	touch $(STAMP)

# What `make demo` needs of the venv: the product and the development tools, not the test extras; torch
# only where the extraction runs in it (SERVER=simulator: the transformers backend). With the real SGLang
# the extraction runs in SGLang's own venv, and unpacking a second torch cost a cold demo a minute.
# (SERVER: what serves the demo's generation pods, below; defined here, before the rule names it.)
SERVER ?= real
DEMO_STAMP := $(VENV)/.demo-$(SERVER)-stamp
$(DEMO_STAMP): pyproject.toml devtools/pyproject.toml
	test -x $(PYTHON) || $(PY) -m venv $(VENV)
	$(PYTHON) -m pip install -q -e '.$(if $(filter real,$(SERVER)),,[extract])' -e devtools
	touch $(DEMO_STAMP)

# Builds etcd, kube-apiserver, kube-controller-manager, kube-scheduler and KWOK from their Go
# modules once per machine (cached by version in ~/.cache/draftgen), then only checks the cache.
# The tests also run Kueue against it and check the chart's alerts with Prometheus's promtool:
# `controllers` builds both the same way (about 7 + 4 minutes cold; the demo needs neither).
binaries: $(STAMP)
	$(PYTHON) -m draftgen_dev.cluster.binaries > /dev/null

controllers: $(STAMP)
	$(PYTHON) -m draftgen_dev.cluster.binaries --controllers > /dev/null

# The real SGLang 0.5.23 for the real-server tests, in a venv of its own: installed once per machine
# (about 11 GB, 4-7 minutes), then only checked. Before pytest, so no test's time-out includes it.
sglang: $(STAMP)
	$(PYTHON) -m draftgen_dev.real_sglang.install > /dev/null

# draftgen's image from the Dockerfile, as the tests run it (docs/image.md): buildah and mmdebstrap
# installed from Debian's packages where missing, a Debian base made once, the image built once per
# content (about 5 minutes cold, nothing warm) and kept in ~/.cache/draftgen/containers.
image: $(STAMP)
	$(PYTHON) -m draftgen_dev.image > /dev/null

# Pins every dependency the image installs (requirements/*.lock) from pyproject.toml's ranges.
lock: $(STAMP)
	$(PYTHON) -m draftgen_dev.lock

# SLOW=1 adds the soak and torture tier; PYTEST_ARGS passes anything else to pytest. Three pytest
# workers share one control plane (tests/conftest.py); the tests that share a real server or a
# module's fixtures are one unit of one worker (conftest.py's groups), handed out in the root
# conftest's order. Three on two cores, because with two the CPU idled a quarter of the time in the
# tests' waits (15 min 5 s against 16 min 8 s, docs/testing.md).
TEST_WORKERS ?= 3
# Every process a test starts (pods, stages, operators, workers) reads the project's compiled modules
# instead of compiling them again, where the environment says not to write them
# (PYTHONDONTWRITEBYTECODE): about 0.3 s of CPU a process start, 4 s a worker's collection.
KEEP_BYTECODE := PYTHONDONTWRITEBYTECODE=
test: controllers sglang image
	$(KEEP_BYTECODE) $(PYTHON) -m pytest -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder $(if $(SLOW),--slow) $(PYTEST_ARGS)

# The generation pods are served by the real SGLang on the CPU (installed like `sglang` above);
# SERVER=simulator serves them with jobrunner's simulator instead (no SGLang install).
# On a fresh machine the venv, the Go builds (CPU) and the SGLang install (mostly download and
# unpacking) run side by side: the builders need only the standard library, so they start at once
# with the machine's Python instead of waiting for the venv.
DEVTOOLS_ALONE := PYTHONPATH=$(CURDIR)/devtools $(PY)
demo:
	$(MAKE) -j3 $(DEMO_STAMP) demo-binaries $(if $(filter real,$(SERVER)),demo-sglang)
	$(KEEP_BYTECODE) $(PYTHON) -m draftgen_dev.demo --server $(SERVER)

demo-binaries:
	$(DEVTOOLS_ALONE) -m draftgen_dev.cluster.binaries > /dev/null

demo-sglang:
	$(DEVTOOLS_ALONE) -m draftgen_dev.real_sglang.install > /dev/null

cluster: binaries
	@$(PYTHON) -m draftgen_dev.cluster up

cluster-down:
	@$(PYTHON) -m draftgen_dev.cluster down
