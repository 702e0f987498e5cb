"""`jobrunner simulate`: a simulator of SGLang's native HTTP server, for tests, demos and benchmarks.

It follows the contract written in docs/sglang.md (sglang 0.5.23): `POST /generate` (input_ids or
text, single or batch, streaming SSE with cumulative events), `POST /abort_request` (prefix-matching
rids, `abort_all`), `GET /ready`, `/health`, `/health_generate`, `/v1/models`, `/server_info` (and
`/get_server_info`), `/model_info` (and `/get_model_info`), `/metrics`. What it refuses, it refuses
as SGLang does: a body's types first as SGLang's HTTP layer coerces them (`http_layer`), then the
request's schema and sampling params through draftgen_contracts.sglang_protocol, the prompt's room in
the context through `admission`. tests/sglang/test_validator_contract.py checks it against SGLang's
own request validator, loaded from the published wheel; tests/real_sglang's differential test
against the real server (docs/sglang.md#where-the-simulator-differs).

    config     SimConfig, fault rates, statistics
    profiles   response-length distributions
    responses  pure decisions: rates, lengths, token ids, faults, response bodies
    http_layer what SGLang's HTTP layer refuses before its request schema
    admission  a /generate body -> its items, or SGLang's refusal
    scheduler  the requests' lifecycle on an injected clock: queue, run, finish, abort
    server     the aiohttp app around the scheduler, and a thread to run it from sync code
    cli        the command line (a drop-in for `python -m sglang.launch_server` in a pod)
"""
