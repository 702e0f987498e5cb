"""Pure decisions of the SGLang extraction backend: which server flags load the target for capture,
which of the user's flags it refuses, which layer it captures for a draftgen layer number.

Capture mode without a draft model (SGLang 0.5.23): `--enable-return-aux-hidden-states
--speculative-algorithm EAGLE3 --return-aux-hidden-state-layer-ids ...` makes the model keep the
residual stream at the named layers and the logits processor return them with the post-norm final
state (`sglang/srt/layers/logits_processor.py`, `last_hidden_states`).

Two settings would lose rows without a word, so they are forced off: the radix cache (a prompt that
shares a cached prefix is computed, and answered, from its uncached suffix only) and chunked prefill
(a long prompt is run in chunks; the backend forwards every sample whole in one extend).

Layer numbers. draftgen's layer k is the output of decoder layer k (transformers'
`hidden_states[k+1]`). An SGLang model captures at index i the *input* of decoder layer i (its
`layers_to_capture`), so layer k is index k+1. What a model does with the ids it is given is not one
rule: Llama's `set_eagle3_layers_to_capture` adds 1 to every id, DeepSeek-V2/V3's (Kimi-K2's) adds 1
only when the first id is 1 and otherwise takes them as indices (`sglang/srt/models/deepseek_v2.py`,
0.5.23). So the backend sets the indices itself after the load (`capture_indices`), whatever the
model's own convention. The last layer (k = N-1) has no next layer to see its output as an input:
SGLang cannot capture it (`_check_aux_hidden_states` fails at the first forward); the backend
refuses it before the weights load.
"""

from __future__ import annotations

from draftgen_contracts import hidden_state_layout

# The model's compute dtype for each storage dtype (fp8 states are computed in bf16 and quantized as
# they are stored, as the transformers backend does).
SGLANG_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "fp8": "bfloat16"}

# On the CPU, SGLang 0.5.23 sizes the KV pool from a memory profile that can come out negative in a
# process that loads the model itself ("Loaded weights leave no GPU memory for the KV cache under
# --mem-fraction-static=-0.046", measured): a fraction is given when the flags give none.
CPU_MEM_FRACTION = "0.5"
# Flags of the generation server that have no meaning for an extraction that never serves: dropped.
# The hierarchical cache extends the radix cache, which extraction turns off.
SERVING_ONLY = {"--host": 1, "--port": 1, "--api-key": 1, "--admin-api-key": 1, "--enable-metrics": 0,
                "--sleep-on-idle": 0, "--max-queued-requests": 1, "--served-model-name": 1,
                "--enable-hierarchical-cache": 0}
# Flags the backend sets itself, or that would change what a forward returns: refused, with why.
REFUSED = {
    "--model-path": "the backend loads the spec's model",
    "--dtype": "the backend computes in the storage dtype's precision (extraction.dtype)",
    "--speculative-algorithm": "capture mode is set by the backend; no draft model runs during extraction",
    "--speculative-draft-model-path": "no draft model runs during extraction",
    "--return-aux-hidden-state-layer-ids": "the layers come from extraction.layers",
    "--enable-return-aux-hidden-states": "set by the backend",
    "--enable-return-hidden-states": "set by the backend",
    "--chunked-prefill-size": "chunked prefill returns only the last chunk's rows; the backend turns it off",
    "--pp-size": "the backend captures on one pipeline stage (tensor parallelism only)",
    "--dp-size": "one extraction process group per pod (tensor parallelism only)",
}


def check_capture_layers(layers: list[int], num_layers: int) -> None:
    """What SGLang cannot capture, refused before the weights load."""
    if num_layers - 1 in layers:
        raise ValueError(f"aux layer {num_layers - 1} is the model's last decoder layer: the sglang backend "
                         "captures a layer's output as the next layer's input, and the last one has none "
                         f"(use layers below {num_layers - 1}, or extraction.backend transformers)")


def capture_indices(layers: list[int]) -> list[int]:
    """The `layers_to_capture` index of each draftgen layer (the input of the next decoder layer)."""
    return [layer + 1 for layer in layers]


def on_the_cpu(args: list[str]) -> bool:
    return any(args[i:i + 2] == ["--device", "cpu"] for i in range(len(args))) or "--device=cpu" in args


def flag_name(arg: str) -> str:
    return arg.split("=", 1)[0].replace("_", "-")


def kept_server_args(args: list[str]) -> list[str]:
    """The generation server's own flags (parallelism, quantization, memory, kernels) without those
    that only serve; a flag that would change what extraction returns is refused."""
    kept, i = [], 0
    while i < len(args):
        arg = args[i]
        name = flag_name(arg)
        if name in REFUSED:
            raise ValueError(f"server flag {name} cannot be used with extraction.backend sglang: {REFUSED[name]}")
        width = 1 if "=" in arg or not arg.startswith("--") else 1 + _value_count(args, i)
        if name not in SERVING_ONLY:
            kept.extend(args[i:i + width])
        i += width
    return kept


def _value_count(args: list[str], i: int) -> int:
    """How many of the words after a flag are its values (up to the next flag)."""
    n = 0
    while i + 1 + n < len(args) and not args[i + 1 + n].startswith("--"):
        n += 1
    return n


def capture_server_args(model_path: str, layers: list[int], dtype: str, tp_size: int, server_args: list[str],
                        max_batch_size: int) -> list[str]:
    """`sglang.launch_server`'s flags for an in-process capture of `layers` and the final state."""
    if dtype not in hidden_state_layout.DTYPE_BYTES:
        raise ValueError(f"dtype {dtype!r}: expected one of {sorted(hidden_state_layout.DTYPE_BYTES)}")
    kept = kept_server_args(server_args)
    names = {flag_name(a) for a in kept if a.startswith("--")}
    sizing = []
    if "--max-running-requests" not in names:  # the request pool must hold a whole batch
        sizing += ["--max-running-requests", str(max_batch_size)]
    if on_the_cpu(kept) and "--mem-fraction-static" not in names:
        sizing += ["--mem-fraction-static", CPU_MEM_FRACTION]
    return ["--model-path", model_path, "--dtype", SGLANG_DTYPES[dtype], *kept,
            *(["--tp-size", str(tp_size)] if not names & {"--tp-size", "--tp", "--tensor-parallel-size"} else []),
            *sizing, "--disable-radix-cache", "--chunked-prefill-size", "-1",
            "--cuda-graph-backend-decode", "disabled",  # prefill only: no decode graphs to capture
            "--enable-return-aux-hidden-states", "--speculative-algorithm", "EAGLE3",
            "--return-aux-hidden-state-layer-ids", *map(str, layers)]
