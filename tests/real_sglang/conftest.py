"""The real SGLang 0.5.23 on this machine's CPU (draftgen_dev.real_sglang), serving the demo's tiny
model: installed once per machine, started once for the tests of this tier that leave it as they
found it (a test that kills its server, or needs a second one, starts its own)."""

from __future__ import annotations

import shutil

import pytest

from draftgen_contracts.sglang_auth import ServerKeys
from draftgen_dev.demo_assets import build_model
from draftgen_dev.kimi_like import build_kimi_like
from draftgen_dev.real_sglang.server import HTTPEndpoint, RealSGLang
from draftgen_dev.tiny_model import VOCAB_SIZE
from draftgen_simulator.config import SimConfig
from draftgen_simulator.server import run_in_thread
from tests.conftest import LOGS_ON_FAILURE

# Room for the abort tests: more requests than this wait in SGLang's queue.
MAX_RUNNING = 8
# A queue that no jobrunner test fills (the quickstart holds the most in flight: 3 datasets x 20),
# and that the differential test fills on purpose to see the 503.
MAX_QUEUED = 64
CONTEXT_LEN = 2048  # the tiny model's max_position_embeddings
# The run's keys, as a generation pod's server reads them from --config (docs/security.md#the-servers-keys).
KEYS = ServerKeys(api_key="api-5b1f0c8e", admin_api_key="admin-77d2a9c4")
# SGLang's own switch for testing retraction (SGLANG_TEST_RETRACT, python/sglang/srt/environ.py):
# the scheduler retracts running requests every few decode steps as if the KV pool were full, and
# admits no prefill while more than NO_PREFILL_BS run, so the retracted ones wait in the queue.
RETRACTING = {"SGLANG_TEST_RETRACT": "1", "SGLANG_TEST_RETRACT_NO_PREFILL_BS": "2"}


@pytest.fixture(scope="session")
def real_model(tmp_path_factory):
    return build_model(tmp_path_factory.mktemp("real-model"))


# Package scope: stopped once this tier is done, so the tests after it have both cores.
@pytest.fixture(scope="package")
def real_sglang(request, real_model, tmp_path_factory):
    log = tmp_path_factory.mktemp("real-sglang") / "server.log"
    server = RealSGLang(real_model, log, "--enable-metrics", "--max-running-requests", str(MAX_RUNNING),
                        "--max-queued-requests", str(MAX_QUEUED)).start()
    yield server
    server.stop()
    if request.session.testsfailed:
        LOGS_ON_FAILURE.mkdir(exist_ok=True)
        shutil.copy(log, LOGS_ON_FAILURE / "real-sglang.log")


@pytest.fixture(scope="package")
def keys_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("keys") / "sglang-keys.yaml"
    path.write_text(f"api-key: {KEYS.api_key}\nadmin-api-key: {KEYS.admin_api_key}\n")
    return path


@pytest.fixture(scope="package")
def second_sglang(real_model, keys_file, tmp_path_factory):
    """The tier's second real server, one load for three uses: started as a generation pod starts it
    (the run's keys in --config, metrics on) and retracting requests as if its KV pool were full
    (RETRACTING). The second replica's server, the keyed server and the retracting one."""
    server = RealSGLang(real_model, tmp_path_factory.mktemp("second-sglang") / "server.log", "--config",
                        str(keys_file), "--enable-metrics", "--max-running-requests", str(MAX_RUNNING)).start(RETRACTING)
    yield server
    server.stop()


@pytest.fixture(scope="package")
def kimi_like(tmp_path_factory):
    """A models folder holding the model built like Kimi-K2.5 as `kimi-like/` (draftgen_dev.kimi_like)."""
    models = tmp_path_factory.mktemp("models")
    build_kimi_like(models / "kimi-like")
    return models


# Package scope, as real_sglang: its tests' order in the tier is pytest's (parametrized fixtures regroup
# the items), and a module-scoped server was seen started twice under xdist.
@pytest.fixture(scope="package")
def kimi_server(kimi_like, tmp_path_factory):
    """The real SGLang serving it with --trust-remote-code."""
    server = RealSGLang(kimi_like / "kimi-like", tmp_path_factory.mktemp("kimi-sglang") / "server.log",
                        "--trust-remote-code", "--context-length", "2048").start()
    yield server
    server.stop()


def like_the_real_server(model_dir) -> SimConfig:
    """The simulator set as the shared real server runs: the tiny model's context, vocabulary and
    EOS, the same running and queue limits, and about its decode speed on two cores."""
    return SimConfig(context_len=CONTEXT_LEN, vocab_size=VOCAB_SIZE, eos_token_id=2, per_request_tps=100.0,
                     max_running_requests=MAX_RUNNING, max_queued_requests=MAX_QUEUED, model_path=str(model_dir))


class SimulatedSGLang(HTTPEndpoint):
    """The simulator launched like the real server, behind RealSGLang's interface, so a test of this
    tier runs against both and the two are held to one behaviour."""

    def __init__(self, model_dir):
        _, self.handle = run_in_thread(like_the_real_server(model_dir))
        self.base_url = self.handle.base_url

    def alive(self) -> bool:
        return self.get("/health")[0] == 200

    def log_tail(self) -> str:
        return ""

    def stop(self) -> None:
        self.handle.stop()


@pytest.fixture(scope="package")
def simulated_sglang(real_model):
    server = SimulatedSGLang(real_model)
    yield server
    server.stop()


@pytest.fixture(params=["real", "simulator"])
def sglang(request):
    """The real server, then the simulator launched like it."""
    return request.getfixturevalue("real_sglang" if request.param == "real" else "simulated_sglang")
