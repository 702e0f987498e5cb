"""The reference backend: a transformers causal LM, on the CPU (tests) or GPUs (`device_map`).

How states are taken. Forward hooks on the chosen decoder layers and on the final norm capture only
what is stored: `output_hidden_states=True` would keep all N+1 layers alive at once (61 x L x H for
Kimi-K2), and calling the base model (not the causal LM) skips the lm_head, whose logits would be the
largest tensor of all (L x 163K vocabulary). The norm hook sees both sides of the final norm: its
input is layer N-1's output (pre-norm, what speculators stores) and its output is transformers'
`hidden_states[-1]` / `last_hidden_state` (post-norm, what SpecForge stores).

Padding. Batches are padded on the right with an attention mask, and each sample's rows
[:length] are kept. Right padding makes a batched sample the same computation as the sample alone:
its tokens come first with the default position ids 0..L-1 (LlamaModel.forward builds
`arange(seq_len)` when none are given, transformers 5.24) and causal attention never lets them see
the padding. Left padding would shift every position by the pad count: harmless for RoPE attention,
which depends on position differences only (tests/corpus/test_extract_states.py pins this for
Llama), but not for models with absolute or offset-dependent position schemes; and the stripping
must then take the last L rows, not the first. tests/corpus compares batched with one-at-a-time
extraction.
"""

from __future__ import annotations

from jobrunner.hidden_states.backend import FINAL_STATES, SampleStates

# The model runs in the storage dtype; fp8 states are computed in bf16 and quantized as they are stored.
TORCH_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "fp8": "bfloat16"}


class TransformersBackend:
    def __init__(self, model_path: str, aux_layers: list[int] | None, final_state: str = "post-norm",
                 dtype: str = "bf16", device: str = "cpu", device_map: str | None = None,
                 attn_implementation: str | None = None, trust_remote_code: bool = False):
        import torch
        from transformers import AutoModelForCausalLM

        from jobrunner.hidden_states import selection

        if final_state not in FINAL_STATES:
            raise ValueError(f"final state {final_state!r}: expected one of {FINAL_STATES}")
        self.num_layers, self.hidden_size = model_dims(model_path)
        self.aux_layers = list(aux_layers) if aux_layers is not None else selection.default_aux_layers(self.num_layers)
        selection.check_aux_layers(self.aux_layers, self.num_layers)  # before the (possibly huge) weights load
        self.final_state = final_state
        self.dtype = dtype
        kwargs = {"dtype": getattr(torch, TORCH_DTYPES[dtype]), "trust_remote_code": trust_remote_code}
        if device_map:
            kwargs["device_map"] = device_map
        if attn_implementation:
            kwargs["attn_implementation"] = attn_implementation
        model = AutoModelForCausalLM.from_pretrained(model_path, **kwargs)
        if not device_map:
            model.to(device)
        model.eval()
        self._torch = torch
        self._base = decoder_stack(model)
        layers, self._norm = self._base.layers, self._base.norm
        self._input_device = self._base.get_input_embeddings().weight.device
        self._captured: dict = {}
        for slot, layer in enumerate(self.aux_layers):
            layers[layer].register_forward_hook(self._capture_aux(slot))
        self._norm.register_forward_hook(self._capture_final)

    def _capture_aux(self, slot: int):
        def hook(_module, _inputs, output):
            self._captured[slot] = output[0] if isinstance(output, tuple) else output
        return hook

    def _capture_final(self, _module, inputs, output):
        self._captured["final"] = inputs[0] if self.final_state == "pre-norm" else output

    def extract(self, sequences: list[list[int]]) -> list[SampleStates]:
        torch = self._torch
        longest = max(len(s) for s in sequences)
        ids = torch.zeros((len(sequences), longest), dtype=torch.long)
        mask = torch.zeros((len(sequences), longest), dtype=torch.long)
        for row, seq in enumerate(sequences):
            ids[row, : len(seq)] = torch.tensor(seq, dtype=torch.long)
            mask[row, : len(seq)] = 1
        self._captured.clear()
        with torch.inference_mode():
            self._base(input_ids=ids.to(self._input_device), attention_mask=mask.to(self._input_device), use_cache=False)
            aux = torch.stack([self._captured[slot].to(self._input_device) for slot in range(len(self.aux_layers))], dim=2)
            final = self._captured["final"]
            out = [SampleStates(aux=aux[row, : len(seq)].to("cpu", copy=True),
                                final=final[row, : len(seq)].to("cpu", copy=True))
                   for row, seq in enumerate(sequences)]
        self._captured.clear()
        return out


def decoder_stack(model):
    """The base model that holds the decoder layers and the final norm: the causal LM's own, or, in a
    multimodal wrapper (Kimi-K2.5's holds its language model beside a vision tower), the first module
    that has both. Calling it skips the lm_head (and any vision tower)."""
    base = model.base_model
    candidates = [base, *(m for m in model.modules() if m is not base)]
    found = next((m for m in candidates if hasattr(m, "layers") and hasattr(m, "norm")), None)
    if found is None:
        raise ValueError(f"{type(model).__name__}: no module with `.layers` and `.norm` (a decoder stack)")
    return found


def model_dims(model_path: str) -> tuple[int, int]:
    """(decoder layers, hidden size) from config.json alone (the text model's, where a wrapper nests it),
    so the estimate comes before the weights load and no code the folder ships runs for it."""
    from jobrunner.preflight.model_facts import model_facts
    from jobrunner.preflight.problem import PreflightProblem

    try:
        facts = model_facts(model_path)
    except PreflightProblem as e:
        raise ValueError(str(e)) from None
    return facts.num_layers, facts.hidden_size
