"""One generate process: its client, its coordinator, its signals and its exit status."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from pathlib import Path

from draftgen_contracts.sglang_auth import ServerKeys
from jobrunner.shared.config import GenerateConfig
from jobrunner.shared.coordination import Coordinator, FileCoordinator
from jobrunner.generate import metrics
from jobrunner.generate.engine import Engine
from jobrunner.preflight.model_facts import model_facts
from jobrunner.preflight.problem import PreflightProblem
from jobrunner.shared.prompts import load_tokenizer
from jobrunner.shared.recommended_sampling import with_recommended_sampling
from jobrunner.sglang.client import SGLangClient
from jobrunner.sglang.retry import RetryPolicy


def make_coordinator(config: GenerateConfig) -> Coordinator:
    if config.coordination.kind == "kubernetes":
        from jobrunner.shared.coordination_kube import KubeCoordinator

        c = config.coordination
        return KubeCoordinator(c.name, c.namespace, config.replica, config.replicas)
    return FileCoordinator(config.coordination_directory(), config.replica)


def vocab_size_of(config: GenerateConfig, tokenizer) -> int | None:
    """How many ids a prompt may use: the model's own embedding rows (config.json in the model folder
    the tokenizer comes from), else the tokenizer's ids (past them the server answers garbage); None
    when neither is known."""
    if config.tokenizer_path and (Path(config.tokenizer_path) / "config.json").is_file():
        try:
            return model_facts(config.tokenizer_path).vocab_size
        except PreflightProblem:
            pass  # preflight names what is wrong with it; here the tokenizer's count stands in
    return len(tokenizer) if tokenizer is not None else None


async def run_generate(config: GenerateConfig, coordinator: Coordinator | None = None,
                       metrics_address: str | None = None, keys: ServerKeys | None = None) -> int:
    """Run one generate process to completion; returns its exit status. With `metrics_address`
    (HOST:PORT) it serves its Prometheus metrics there (jobrunner.generate.metrics). `keys`: the
    server's, by default from the environment (the pod gets them from the run's Secret)."""
    config = with_recommended_sampling(config)  # what each dataset sends, and so what the provenance records
    tokenizer = load_tokenizer(config.tokenizer_path, config.trust_remote_code) if config.tokenizer_path else None
    retry = RetryPolicy(max_attempts=config.max_attempts)
    # No pool limit: the engine bounds the requests in flight (the classes, and the slots a finished
    # class lends, known only once the server says its context length), and a cut aborts every one
    # of them at once; an abort that waited for a connection would let its request run on.
    async with SGLangClient(config.server_url, request_timeout_s=config.request_timeout_s, retry=retry,
                            max_connections=0, vocab_size=vocab_size_of(config, tokenizer),
                            keys=keys or ServerKeys.from_env(os.environ)) as client:
        engine = Engine(config, client, coordinator or make_coordinator(config), tokenizer)
        if metrics_address:
            metrics.serve(metrics_address, config.run_id, lambda: engine.last_progress)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, engine.request_shutdown)
        try:
            return await engine.run()
        finally:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)


def configure_logging() -> None:
    logging.basicConfig(level=os.environ.get("JOBRUNNER_LOG", "INFO"),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
