"""`jobrunner simulate`: serve the simulator until SIGTERM/SIGINT, printing its URL first.

It takes `sglang.launch_server`'s own spellings for the flags a generation pod passes, so it drops
into the pod's sidecar as it is (docs/sglang.md#launch-flags).
"""

from __future__ import annotations

import argparse
from pathlib import Path
import asyncio
import signal

from draftgen_contracts import exit_codes
from draftgen_simulator.config import FAULT_NAMES, FaultRates, SimConfig
from draftgen_simulator.ranks import follow
from draftgen_simulator.server import Simulator


def add_arguments(parser: argparse.ArgumentParser) -> None:
    d = SimConfig()
    parser.add_argument("--host", default=d.host)
    parser.add_argument("--port", type=int, default=30000)
    parser.add_argument("--seed", type=int, default=d.seed)
    parser.add_argument("--profile", default=d.profile, help="function_calling, code, math, chat, swe or fixed:N")
    parser.add_argument("--capacity-tps", type=float, default=d.capacity_tps)
    parser.add_argument("--per-request-tps", type=float, default=d.per_request_tps)
    parser.add_argument("--max-running", type=int, default=d.max_running_requests)
    parser.add_argument("--max-queued", type=int, default=None)
    parser.add_argument("--context-len", "--context-length", dest="context_len", type=int, default=d.context_len)
    parser.add_argument("--tp-size", "--tensor-parallel-size", type=int, default=1, help="accepted and ignored")
    parser.add_argument("--trust-remote-code", action="store_true", help="accepted and ignored")
    parser.add_argument("--startup-delay", type=float, default=d.startup_delay_s)
    parser.add_argument("--warmup", type=float, default=d.warmup_s)
    parser.add_argument("--speedup", type=float, default=d.speedup)
    parser.add_argument("--disconnect-poll", type=float, default=d.disconnect_poll_s)
    parser.add_argument("--eos-token-id", type=int, default=d.eos_token_id)
    parser.add_argument("--vocab-size", type=int, default=d.vocab_size)
    parser.add_argument("--model-path", default=d.model_path)
    for name in FAULT_NAMES:
        parser.add_argument(f"--fault-rate-{name.replace('http_', '').replace('_', '-')}", dest=f"fault_{name}",
                            type=float, default=0.0, help=f"probability of a {name} fault per request")
    parser.add_argument("--slow-s", type=float, default=FaultRates().slow_s)
    parser.add_argument("--api-key", help="as SGLang: every route but probes and metrics needs it")
    parser.add_argument("--admin-api-key", help="as SGLang: the admin routes (/abort_request) need it")
    parser.add_argument("--config", help="a YAML file of api-key and admin-api-key, as SGLang's --config "
                        "reads them (the command line wins)")
    parser.add_argument("--nnodes", type=int, default=d.nnodes, help="as SGLang: nodes of the replica")
    parser.add_argument("--node-rank", type=int, default=d.node_rank, help="as SGLang: this node's rank")
    parser.add_argument("--dist-init-addr", default=None, help="as SGLang: HOST:PORT of rank 0's rendezvous")
    parser.add_argument("--join-timeout", type=float, default=d.join_timeout_s,
                        help="how long a rank > 0 tries to reach rank 0 before it exits")
    parser.add_argument("--lost-rank", choices=["exit", "hang"], default=d.lost_rank,
                        help="the leader when a rank is lost: killed within seconds (the real SGLang over gloo) or "
                        "stalled, /health failing (NCCL on GPUs)")
    parser.add_argument("--abort-status", type=int, default=d.abort_status,
                        help="HTTP status of an aborted request: 200 (finish_reason abort), or 400/500 like some versions")


CONFIG_KEYS = ("api_key", "admin_api_key")  # what draftgen passes in a --config file


def keys_from_config(path: str | None) -> dict[str, str]:
    """The keys a --config YAML file sets (SGLang takes any spelling of a flag's name as a key)."""
    if not path:
        return {}
    import yaml

    found = yaml.safe_load(Path(path).read_text()) or {}
    if not isinstance(found, dict):
        raise ValueError(f"--config {path}: expected a mapping of options")
    keys = {str(k).replace("-", "_"): v for k, v in found.items()}
    other = sorted(set(keys) - set(CONFIG_KEYS))
    if other:
        raise ValueError(f"--config {path}: the simulator takes only {', '.join(CONFIG_KEYS)} there, not {other}")
    return {k: str(v) for k, v in keys.items()}


def config_from_args(args: argparse.Namespace) -> SimConfig:
    faults = FaultRates(**{name: getattr(args, f"fault_{name}") for name in FAULT_NAMES}, slow_s=args.slow_s)
    keys = {**keys_from_config(args.config), **{k: getattr(args, k) for k in CONFIG_KEYS if getattr(args, k)}}
    return SimConfig(**keys,
        seed=args.seed, profile=args.profile, capacity_tps=args.capacity_tps, per_request_tps=args.per_request_tps,
        max_running_requests=args.max_running, max_queued_requests=args.max_queued, context_len=args.context_len,
        startup_delay_s=args.startup_delay, warmup_s=args.warmup, speedup=args.speedup,
        disconnect_poll_s=args.disconnect_poll, eos_token_id=args.eos_token_id, vocab_size=args.vocab_size,
        model_path=args.model_path, faults=faults, host=args.host, port=args.port, abort_status=args.abort_status,
        nnodes=args.nnodes, node_rank=args.node_rank, dist_init_addr=args.dist_init_addr,
        join_timeout_s=args.join_timeout, lost_rank=args.lost_rank,
    )


async def serve(config: SimConfig) -> None:
    sim = Simulator(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(await sim.start(), flush=True)
    await stop.wait()
    await sim.stop()


def main(args: argparse.Namespace) -> int:
    try:
        config = config_from_args(args)
    except ValueError as exc:
        print(f"jobrunner simulate: {exc}")
        return exit_codes.BAD_CONFIG
    if config.node_rank > 0:  # a follower rank: no API, SGLang's dummy health, the group's end
        return asyncio.run(follow(config.host, config.port, config.dist_init_addr, config.join_timeout_s))
    asyncio.run(serve(config))
    return exit_codes.OK
