"""`jobrunner generate` against a server started with keys (the simulator enforces them as SGLang
0.5.23 does; tests/real_sglang/test_server_keys.py holds it to the real server): every call carries
the key its route takes, the keys never reach the output, and a wrong key fails the run at once
without skipping a row."""

from __future__ import annotations

import json

import pytest

from draftgen_contracts import exit_codes, names
from draftgen_contracts.sglang_auth import ServerKeys
from draftgen_contracts.sglang_protocol import KeysRefused
from jobrunner.generate.run import run_generate
from jobrunner.shared.output import read_summary
from tests.jobrunner.test_generate import config, records

KEYS = ServerKeys(api_key="api-0123456789", admin_api_key="admin-9876543210")


async def test_with_both_keys_the_run_cuts_at_the_budget_and_the_keys_never_reach_the_output(
        simulator, tmp_path, tokenizer_path, prompts_file):
    sim = simulator(profile="chat", speedup=50.0, api_key=KEYS.api_key, admin_api_key=KEYS.admin_api_key)
    cfg = config(sim, tmp_path, tokenizer_path, [{"name": "a", "path": prompts_file, "budget_tokens": 3000,
                                                 "concurrency": 20}])
    assert await run_generate(cfg, keys=KEYS) == exit_codes.OK
    kept = records(tmp_path, "a")
    assert sum(r["completion_tokens"] for r in kept) == 3000 and any(r.get("cut_at_budget") for r in kept)
    assert sim.stats.aborted > 0  # the cut's aborts went through: the admin route took the admin key
    written = "".join(p.read_text() for p in (tmp_path / "out").rglob("*") if p.is_file())
    assert KEYS.api_key not in written and KEYS.admin_api_key not in written
    [session] = json.loads((tmp_path / "out" / "generate" / names.provenance_file_name(0)).read_text())["sessions"]
    assert session["server"]["api_key"] == "<redacted>"  # the server answered it in clear


async def test_a_wrong_key_fails_the_run_before_any_row_and_skips_none(simulator, tmp_path, tokenizer_path,
                                                                       prompts_file):
    sim = simulator(api_key=KEYS.api_key, admin_api_key=KEYS.admin_api_key)
    cfg = config(sim, tmp_path, tokenizer_path, [{"name": "a", "path": prompts_file, "budget_tokens": 1000}])
    for held in (ServerKeys(), ServerKeys("wrong", KEYS.admin_api_key), ServerKeys(KEYS.api_key, "wrong")):
        with pytest.raises(KeysRefused, match="answered 401 Unauthorized: the server's keys are not"):
            await run_generate(cfg, keys=held)
    assert sim.stats.requests == 0 and not read_summary(tmp_path / "out", "a", 0).skipped_rows


async def test_a_server_that_is_not_ours_without_its_admin_key_is_aborted_by_disconnect_and_says_so(
        simulator, tmp_path, tokenizer_path, prompts_file):
    """spec.server.endpoint (served_model_name set) with the API key alone: the run goes on; nothing can be
    cut, so the budget is met as atBudget: abort meets it (complete responses), the requests in flight
    dropped by closing their connections; the report says why. A wrong admin key stays an error."""
    sim = simulator(profile="chat", speedup=10.0, api_key=KEYS.api_key, admin_api_key=KEYS.admin_api_key)
    cfg = config(sim, tmp_path, tokenizer_path, [{"name": "a", "path": prompts_file, "budget_tokens": 8000,
                                                 "concurrency": 20}]).model_copy(update={"served_model_name": "m"})
    assert await run_generate(cfg, keys=ServerKeys(api_key=KEYS.api_key)) == exit_codes.OK
    kept = records(tmp_path, "a")
    tokens = [r["completion_tokens"] for r in kept]
    assert sum(tokens) >= 8000 > sum(tokens[:-1]) and not any(r.get("cut_at_budget") for r in kept)
    # The requests in flight were dropped: their connections closed, no /abort_request sent (SGLang
    # stops such a request when its wait loop next wakes, every 4 s: what it made meanwhile is waste).
    assert sim.stats.requests > len(kept) and sim.stats.tokens_generated_after_abort > 0
    report = json.loads((tmp_path / "out" / "coordination" / "progress-r000.json").read_text())
    assert report["notices"] == ["cutting at the budget is off: the server refuses /abort_request without its "
                                 "admin key (name its Secret in server.endpoint.adminApiKey): requests in flight at "
                                 "a budget are dropped by closing their connections, as atBudget: abort, and SGLang "
                                 "stops them within about 4 s"]
    with pytest.raises(KeysRefused):
        await run_generate(cfg, keys=ServerKeys(KEYS.api_key, "wrong"))
