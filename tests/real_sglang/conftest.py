"""The real SGLang 0.5.23 on this machine's CPU (draftgen_dev.real_sglang), serving the demo's tiny
model: installed once per machine, started once for the tests of this tier that leave it as they
found it (a test that kills its server, or needs a second one, starts its own)."""

from __future__ import annotations

import re
import shutil

import pytest

from draftgen_dev.demo_assets import build_model
from draftgen_dev.real_sglang.server import RealSGLang
from tests.conftest import LOGS_ON_FAILURE

# Room for the abort tests: more requests than this wait in SGLang's queue.
MAX_RUNNING = 8
# A queue that no jobrunner test fills (the quickstart holds the most in flight: 3 datasets x 20),
# and that the differential test fills on purpose to see the 503.
MAX_QUEUED = 64


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


def generation_tokens(server: RealSGLang) -> float:
    """Every token the server has generated since it started, by its own count (/metrics)."""
    status, body = server.get("/metrics")
    assert status == 200, body
    found = re.search(rb"^sglang:generation_tokens_total\{[^}]*\} ([0-9.e+]+)$", body, re.M)
    assert found, body[:2000]
    return float(found.group(1))
