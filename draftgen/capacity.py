"""The capacity estimate written to status before any GPU is taken."""

from __future__ import annotations

from draftgen_contracts.hidden_state_layout import bytes_per_token

from .api import Capacity, DatasetGenerationSpec

# Decode throughput of one 8-GPU replica for a ~1T-parameter MoE at the reference concurrency; a
# planning number, stated in the status so nobody mistakes it for a measurement.
DEFAULT_TOKENS_PER_SECOND_PER_REPLICA = 2500.0
DEFAULT_HIDDEN_SIZE = 7168  # Kimi-K2 / DeepSeek-V3


def estimate(spec: DatasetGenerationSpec, hidden_size: int = DEFAULT_HIDDEN_SIZE,
             tokens_per_second_per_replica: float = DEFAULT_TOKENS_PER_SECOND_PER_REPLICA) -> Capacity:
    tokens = sum(d.budget_tokens for d in spec.datasets)
    replicas = spec.server.replicas
    generation_hours = tokens / (tokens_per_second_per_replica * replicas) / 3600
    aux = len(spec.extraction.layers) if spec.extraction.layers else 3
    hidden_state_bytes = tokens * bytes_per_token(hidden_size, aux, spec.extraction.dtype) \
        if spec.extraction.enabled else 0
    return Capacity(
        tokens=tokens, hidden_state_bytes=hidden_state_bytes,
        gpu_hours=round(generation_hours * replicas * spec.server.gpus_per_replica, 1),
        assumptions=(f"{tokens_per_second_per_replica:.0f} output tokens/s per replica; hidden size {hidden_size}, "
                     f"{aux} aux layers + final state; response tokens only (prompts add to extraction)"))
