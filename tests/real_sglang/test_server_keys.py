"""The server's keys on the real SGLang 0.5.23, started as a generation pod starts it (`--config` with
the run's keys, docs/security.md#the-servers-keys; the tier's second server, conftest's second_sglang): which route takes which key, held to the
simulator launched the same way; and a whole `jobrunner generate` run, cuts included, through them."""

from __future__ import annotations

import argparse
import asyncio
import json
import urllib.error
import urllib.request

import pytest

from draftgen_contracts import exit_codes, names
from draftgen_contracts.sglang_auth import ServerKeys
from jobrunner.generate.run import run_generate
from draftgen_simulator import cli as simulate_cli
from draftgen_simulator.server import run_in_thread
from tests.jobrunner.conftest import write_prompts
from tests.real_sglang.conftest import KEYS
from tests.real_sglang.test_jobrunner_on_real_sglang import config, records

GENERATE = {"input_ids": [1, 5, 7], "sampling_params": {"max_new_tokens": 2}}
# (method, route, body): probes and metrics, the routes generate calls, and an admin route it never does.
ROUTES = [("GET", "/health", None), ("GET", "/health_generate", None), ("GET", "/ready", None),
          ("GET", "/metrics", None), ("GET", "/ping", None), ("POST", "/generate", GENERATE),
          ("GET", "/server_info", None), ("GET", "/get_model_info", None), ("GET", "/v1/models", None),
          ("POST", "/abort_request", {"rid": "nobody"})]


@pytest.fixture(scope="module")
def keyed_servers(second_sglang, real_model, keys_file):
    parser = argparse.ArgumentParser()
    simulate_cli.add_arguments(parser)
    sim_config = simulate_cli.config_from_args(parser.parse_args(
        ["--config", str(keys_file), "--model-path", str(real_model), "--vocab-size", "512", "--port", "0"]))
    sim_url, sim = run_in_thread(sim_config)
    yield {"real": second_sglang.base_url, "simulator": sim_url}, second_sglang
    sim.stop()


def status(base_url: str, method: str, path: str, body, key: str | None) -> tuple[int, bytes]:
    request = urllib.request.Request(base_url + path, method=method,
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Content-Type": "application/json",
                                              **({"Authorization": f"Bearer {key}"} if key else {})})
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, b""
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_each_route_takes_the_key_the_real_server_takes_and_refuses_alike(keyed_servers):
    urls, _ = keyed_servers
    seen = {kind: {(method, path, held): status(url, method, path, body, key)
                   for method, path, body in ROUTES
                   for held, key in (("none", None), ("api", KEYS.api_key), ("admin", KEYS.admin_api_key))}
            for kind, url in urls.items()}
    assert seen["simulator"] == seen["real"]
    real = {k: v[0] for k, v in seen["real"].items()}
    # Measured on the real server: probes and metrics open; /abort_request takes only the admin key,
    # every other route (/ping too) only the API key; a refusal is 401 with SGLang's own body.
    assert {real[("GET", p, "none")] for p in ("/health", "/health_generate", "/ready", "/metrics")} == {200}
    assert (real[("POST", "/abort_request", "api")], real[("POST", "/abort_request", "admin")]) == (401, 200)
    assert (real[("GET", "/ping", "none")], real[("POST", "/generate", "admin")]) == (401, 401)
    assert seen["real"][("POST", "/generate", "none")] == (401, b'{"error":"Unauthorized"}')
    # And its start-up log prints both keys: pod-log access is key access (docs/security.md).
    log = keyed_servers[1].log_path.read_text(errors="replace")
    assert KEYS.api_key in log and KEYS.admin_api_key in log


def test_generate_runs_through_the_keys_cuts_included_and_never_writes_them(keyed_servers, real_model, tmp_path):
    _, server = keyed_servers
    prompts = write_prompts(tmp_path / "prompts.jsonl", 60)
    cfg = config(server, tmp_path, real_model, [{"name": "a", "path": prompts, "budget_tokens": 600,
                                                 "concurrency": 8}])
    assert asyncio.run(run_generate(cfg, keys=KEYS)) == exit_codes.OK, server.log_tail()
    kept = records(tmp_path, "a")
    assert sum(r["completion_tokens"] for r in kept) == 600 and any(r.get("cut_at_budget") for r in kept)
    written = "".join(p.read_text() for p in (tmp_path / "out").rglob("*") if p.is_file())
    assert KEYS.api_key not in written and KEYS.admin_api_key not in written
    [session] = json.loads((tmp_path / "out" / "generate" / names.provenance_file_name(0)).read_text())["sessions"]
    # The real server answers both keys in clear in /server_info (api_key, admin_api_key, launch_command).
    assert session["server"]["api_key"] == session["server"]["admin_api_key"] == "<redacted>"
    assert "<redacted>" in session["server"]["launch_command"]


def test_without_the_admin_key_a_server_not_ours_is_met_by_complete_responses_and_stops_the_dropped_ones(
        keyed_servers, real_model, tmp_path):
    """spec.server.endpoint with the API key alone, on the real server: /abort_request refuses it, so the
    run turns cutting off (the simulator's behaviour is held here); the requests in flight at the budget
    are dropped by closing their connections, which the real server notices and stops within its wait
    loop's 4 s (docs/sglang.md#client-disconnects): its running requests fall to none."""
    import re
    import time

    _, server = keyed_servers
    prompts = write_prompts(tmp_path / "prompts.jsonl", 60)
    cfg = config(server, tmp_path, real_model, [{"name": "a", "path": prompts, "budget_tokens": 600,
                                                 "concurrency": 8}]).model_copy(update={"served_model_name": "m"})
    assert asyncio.run(run_generate(cfg, keys=ServerKeys(api_key=KEYS.api_key))) == exit_codes.OK, server.log_tail()
    kept = records(tmp_path, "a")
    assert sum(r["completion_tokens"] for r in kept) >= 600 and not any(r.get("cut_at_budget") for r in kept)

    def running() -> float:
        _, body = server.get("/metrics")
        found = re.findall(rb"^sglang:num_running_reqs\{[^}]*\} ([0-9.e+]+)$", body, re.M)
        assert found, "no sglang:num_running_reqs in /metrics"
        return sum(float(v) for v in found)
    deadline = time.monotonic() + 15
    while running() > 0 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert running() == 0, server.log_tail()
