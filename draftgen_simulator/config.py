"""The simulator's settings, injected faults and counters."""

from __future__ import annotations

from dataclasses import dataclass, field

from draftgen_simulator.profiles import get_profile

SIM_VERSION = "0.5.23-sim"  # the SGLang release whose contract it follows (docs/sglang.md)
FAULT_NAMES = ("http_500", "http_503", "reset", "timeout", "slow")


@dataclass
class FaultRates:
    """Probability per /generate HTTP request of each injected fault (drawn from the seed and rid)."""

    http_500: float = 0.0
    http_503: float = 0.0
    reset: float = 0.0  # connection closed after the body is read, no response
    timeout: float = 0.0  # no response until the client gives up
    slow: float = 0.0  # `slow_s` extra seconds before the request is queued
    slow_s: float = 2.0


@dataclass
class SimConfig:
    seed: int = 0
    profile: str = "chat"
    capacity_tps: float = 20_000.0  # server-wide tokens/s, shared by the running requests
    per_request_tps: float = 100.0  # tokens/s of one request when capacity is not the limit
    max_running_requests: int = 256
    max_queued_requests: int | None = None  # None: unbounded queue; else 503 when full
    context_len: int = 16_384
    startup_delay_s: float = 0.0  # port refuses connections this long
    warmup_s: float = 0.0  # then /ready and /health_generate answer 503 this long
    speedup: float = 1.0  # simulated seconds per real second
    tick_s: float = 0.01
    disconnect_poll_s: float = 4.0  # docs/sglang.md#client-disconnects
    # What an aborted non-streaming request answers: 200 with finish_reason abort, as SGLang answers
    # an abort by rid (docs/sglang.md#abort-by-rid-prefix); another status stands for the server's
    # own aborts that carry one (0.5.23: 503 retracted without a KV backup, 500 out of memory).
    abort_status: int = 200
    stream_interval_s: float = 0.05  # at most one SSE event per request this often (events are cumulative)
    eos_token_id: int = 2
    vocab_size: int = 32_000
    model_path: str = "draftgen/simulated-model"
    faults: FaultRates = field(default_factory=FaultRates)
    host: str = "127.0.0.1"
    port: int = 0
    # Keys as SGLang 0.5.23 enforces them (draftgen_contracts.sglang_auth); None: that key not set.
    api_key: str | None = None
    admin_api_key: str | None = None
    # A replica across nodes (draftgen_simulator/ranks.py): this process is rank `node_rank` of `nnodes`;
    # rank 0 listens for the others at `dist_init_addr`, which the others join within `join_timeout_s`.
    nnodes: int = 1
    node_rank: int = 0
    dist_init_addr: str | None = None
    join_timeout_s: float = 600.0
    lost_rank: str = "exit"  # what the leader does when a rank is lost: exit (gloo, measured) or hang (NCCL)

    def __post_init__(self) -> None:
        get_profile(self.profile)  # fail at construction on a bad profile name
        if self.capacity_tps <= 0 or self.per_request_tps <= 0 or self.speedup <= 0:
            raise ValueError("capacity_tps, per_request_tps and speedup must be > 0")
        if self.max_running_requests < 1:
            raise ValueError("max_running_requests must be >= 1")
        if not 0 <= self.node_rank < self.nnodes:
            raise ValueError(f"node rank {self.node_rank} must be in 0..{self.nnodes - 1}")
        if self.nnodes > 1 and not self.dist_init_addr:
            raise ValueError("--nnodes > 1 needs --dist-init-addr HOST:PORT")


@dataclass
class SimStats:
    requests: int = 0  # generate requests (a batch counts each item)
    completed: int = 0  # finished with stop or length
    aborted: int = 0
    rejected: int = 0  # answered 400
    tokens_generated_total: int = 0
    prompt_tokens_total: int = 0  # of the requests scheduled
    tokens_generated_after_abort: int = 0  # made after the client left or an abort was asked
    tokens_generated_by_aborted: int = 0  # all tokens of the requests that ended aborted: wasted work
    running: int = 0
    queued: int = 0
    max_running: int = 0
    faults: dict[str, int] = field(default_factory=lambda: {name: 0 for name in FAULT_NAMES})
    # By a request's top-level "sim_label" (SGLang ignores unknown top-level keys): what a benchmark
    # needs to charge every generated token, kept or thrown away, to the dataset that asked for it.
    tokens_by_label: dict[str, int] = field(default_factory=dict)
    aborted_tokens_by_label: dict[str, int] = field(default_factory=dict)
