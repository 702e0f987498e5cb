"""The serving engine's backend: the target model loaded by SGLang's own `ModelRunner`, in this
process, with no scheduler and no server (docs/eagle3.md#the-sglang-backend).

Why in-process and not a server in capture mode: one forward gives the aux states and the final
state together (over HTTP a server returns one or the other), and the tensors never become JSON
numbers (bench/extraction_paths.py measures both paths). The model is built the way SGLang's own
scheduler-less harness builds it (`sglang/benchmark/one_batch.py` 0.5.23: `load_model`, whose
`extend` this backend follows with `CaptureHiddenMode.FULL`), so it is SGLang's checkpoint loader,
quantization, kernels and tensor parallelism that run, as in the generation pods.

Tensor parallelism: rank 0 runs in this process; ranks 1..TP-1 are child processes, each with its
own `ModelRunner`, that run the same forward on the same batch (the collectives make them wait for
one another). After the all-reduce every rank holds the whole residual stream, so rank 0's states
are the states.

Needs SGLang importable: the extraction pod runs jobrunner with the SGLang image's Python
(docs/eagle3.md#the-extraction-pod); tests run it with the real SGLang 0.5.23 on the CPU.
"""

from __future__ import annotations

import multiprocessing
from array import array

from jobrunner.hidden_states.backend import FINAL_STATES, SampleStates
from jobrunner.hidden_states.sglang_settings import capture_indices, capture_server_args, check_capture_layers


class RowsLost(RuntimeError):
    """SGLang answered fewer (or more) rows than a batch has tokens: never stored short."""


def server_args_from(argv: list[str]):
    import argparse

    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser(prog="sglang-capture")
    ServerArgs.add_cli_args(parser)
    args = ServerArgs.from_cli_args(parser.parse_args(argv))
    args.resolve_once()
    return args


def load_rank(server_args, port_args, tp_rank: int):
    """One rank's ModelRunner, loaded as SGLang's scheduler-less harness loads it
    (`sglang/benchmark/one_batch.py` `load_model`, 0.5.23) but without a tokenizer: extraction takes
    token ids, and a checkpoint need not carry one."""
    from sglang.benchmark import one_batch
    from sglang.srt.arg_groups.overrides import resolving_view
    from sglang.srt.configs.model_config import ModelConfig
    from sglang.srt.distributed import bootstrap
    from sglang.srt.entrypoints.engine import _set_envs_and_config
    from sglang.srt.model_executor.model_runner import ModelRunner
    from sglang.srt.runtime_context import SpawnRanks, get_device, get_model, publish, spawn_world_rank

    _set_envs_and_config(server_args)
    publish(server_args, role="scheduler",
            ranks=SpawnRanks(world_rank=spawn_world_rank(server_args, tp_rank=tp_rank, pp_rank=0), gpu_id=tp_rank))
    one_batch._init_process_global_configs()
    model_config = ModelConfig.from_server_args(server_args)
    bootstrap.init_parallel_runtime(server_args=server_args, device=get_device().device,
                                    dist_port=port_args.nccl_port)
    bootstrap.init_layer_runtime(model_config=model_config)
    runner = ModelRunner(model_config=model_config, mem_fraction_static=resolving_view(server_args).mem_fraction_static,
                         gpu_id=tp_rank, nccl_port=port_args.nccl_port, server_args=server_args)
    overlapped = get_model().is_startup_weight_load_overlap
    if overlapped:
        runner.start_startup_weight_load()
    runner.alloc_memory_pool()
    runner.init_attention_backends()
    runner.init_cuda_graphs()
    if overlapped:
        runner.finalize_startup_weight_load()
    return runner


def decoder_stack(model):
    """The module that holds the decoder layers, their capture indices and the final norm."""
    for module in model.modules():
        if hasattr(module, "layers_to_capture") and hasattr(module, "layers") and hasattr(module, "norm"):
            return module
    raise ValueError(f"{type(model).__name__}: SGLang's model has no decoder stack with `layers_to_capture` "
                     "(it does not support EAGLE-3 capture)")


class Capture:
    """One rank's model set to capture draftgen's layers, and its forward over a batch."""

    def __init__(self, runner, layers: list[int], final_state: str):
        import torch

        self._torch = torch
        self.runner = runner
        stack = decoder_stack(runner.model)
        stack.layers_to_capture = capture_indices(layers)  # whatever the model's own id convention
        self.pre_norm = None
        if final_state == "pre-norm":
            stack.norm.register_forward_hook(self._keep_pre_norm)

    def _keep_pre_norm(self, _module, inputs, output):
        # The final norm adds the last residual and normalises (SGLang's fused add-RMSNorm returns
        # the sum as its second output); the sum is the last decoder layer's output, pre-norm.
        self.pre_norm = output[1] if isinstance(output, tuple) else inputs[0]

    def forward(self, sequences: list[list[int]]):
        """(packed aux [T, K*H], final [T, H]) of the sequences, concatenated in order."""
        from sglang.benchmark.one_batch import TreeCacheNamespace
        from sglang.srt.managers.schedule_batch import Req, ScheduleBatch
        from sglang.srt.model_executor.forward_batch_info import CaptureHiddenMode, ForwardBatch
        from sglang.srt.runtime_context import get_schedule
        from sglang.srt.sampling.sampling_params import SamplingParams
        from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

        mr = self.runner
        reqs = []
        for i, ids in enumerate(sequences):
            req = Req(rid=str(i), origin_input_text="", origin_input_ids=array("q", ids),
                      sampling_params=SamplingParams(temperature=0, max_new_tokens=1))
            req.full_untruncated_fill_ids = req.origin_input_ids
            req.logprob_start_len = -1
            req.extend_end = len(ids)
            reqs.append(req)
        # No prefix cache: every token is computed and answered (sglang_settings says why).
        cache = TreeCacheNamespace(page_size=get_schedule().page_size, device=mr.device,
                                   token_to_kv_pool_allocator=mr.token_to_kv_pool_allocator)
        batch = ScheduleBatch.init_new(reqs=reqs, req_to_token_pool=mr.req_to_token_pool,
                                       token_to_kv_pool_allocator=mr.token_to_kv_pool_allocator, tree_cache=cache,
                                       model_config=mr.model_config, enable_overlap=False,
                                       spec_algorithm=SpeculativeAlgorithm.NONE)
        try:
            with self._torch.inference_mode():
                batch.prepare_for_extend()
                if batch.input_ids is None and getattr(batch, "prefill_input_ids_cpu", None) is not None:
                    batch.input_ids = batch.prefill_input_ids_cpu.to(batch.device)
                    batch.prefill_input_ids_cpu = None
                forward = ForwardBatch.init_new(batch, mr, capture_hidden_mode=CaptureHiddenMode.FULL,
                                                return_hidden_states_before_norm=False)
                out = mr.forward(forward).logits_output
                final = self.pre_norm if self.pre_norm is not None else out.last_hidden_states
                return out.hidden_states, final
        finally:
            self.pre_norm = None
            mr.req_to_token_pool.clear()
            mr.token_to_kv_pool_allocator.clear()

    def capacity(self) -> tuple[int, int]:
        """(tokens, requests) one forward can hold: the KV pool and the request pool."""
        return int(self.runner.max_total_num_tokens), int(self.runner.req_to_token_pool.size)


def rank_main(server_args, port_args, tp_rank: int, layers: list[int], final_state: str, conn) -> None:
    """A child rank: load, then run every batch rank 0 sends, until it sends None."""
    capture = Capture(load_rank(server_args, port_args, tp_rank), layers, final_state)
    conn.send("loaded")
    while (sequences := conn.recv()) is not None:
        capture.forward(sequences)
        conn.send("done")


class SGLangBackend:
    def __init__(self, model_path: str, aux_layers: list[int] | None, final_state: str = "post-norm",
                 dtype: str = "bf16", *, tp_size: int = 1, server_args: list[str] = (), max_batch_size: int = 64):
        from sglang.srt.server_args import PortArgs

        from jobrunner.hidden_states import selection
        from jobrunner.hidden_states.transformers_backend import model_dims

        if final_state not in FINAL_STATES:
            raise ValueError(f"final state {final_state!r}: expected one of {FINAL_STATES}")
        self.num_layers, self.hidden_size = model_dims(model_path)
        self.aux_layers = list(aux_layers) if aux_layers is not None else selection.default_aux_layers(self.num_layers)
        selection.check_aux_layers(self.aux_layers, self.num_layers)
        check_capture_layers(self.aux_layers, self.num_layers)
        self.dtype = dtype
        args = server_args_from(capture_server_args(model_path, self.aux_layers, dtype, tp_size, list(server_args),
                                                    max_batch_size))
        port_args = PortArgs.init_new(args)
        self._ranks = [self._start_rank(args, port_args, rank, final_state) for rank in range(1, args.tp_size)]
        self._capture = Capture(load_rank(args, port_args, 0), self.aux_layers, final_state)
        for conn, _ in self._ranks:
            if conn.recv() != "loaded":
                raise RuntimeError("a tensor-parallel rank failed to load")

    def _start_rank(self, args, port_args, rank: int, final_state: str):
        context = multiprocessing.get_context("spawn")
        ours, theirs = context.Pipe()
        proc = context.Process(target=rank_main, args=(args, port_args, rank, self.aux_layers, final_state, theirs),
                               daemon=True, name=f"sglang-tp{rank}")
        proc.start()
        return ours, proc

    def extract(self, sequences: list[list[int]]) -> list[SampleStates]:
        out: list[SampleStates] = []
        for part in self._fitting(sequences):
            out.extend(self._extract_part(part))
        return out

    def _fitting(self, sequences: list[list[int]]) -> list[list[list[int]]]:
        """The batch in parts that each fit SGLang's pools (a batch the plan made for padded
        transformers forwards may hold more than the KV pool)."""
        max_tokens, max_requests = self._capture.capacity()
        parts, part, tokens = [], [], 0
        for seq in sequences:
            if len(seq) > max_tokens:
                raise ValueError(f"a {len(seq)}-token sample exceeds SGLang's KV pool of {max_tokens} tokens: "
                                 "lower extraction.maxLength or give the server more memory")
            if part and (tokens + len(seq) > max_tokens or len(part) == max_requests):
                parts.append(part)
                part, tokens = [], 0
            part.append(seq)
            tokens += len(seq)
        return [*parts, part] if part else parts

    def _extract_part(self, sequences: list[list[int]]) -> list[SampleStates]:
        for conn, _ in self._ranks:
            conn.send(sequences)
        aux, final = self._capture.forward(sequences)
        for conn, _ in self._ranks:
            conn.recv()
        total = sum(len(s) for s in sequences)
        if aux.shape[0] != total or final.shape[0] != total:
            raise RowsLost(f"SGLang answered {aux.shape[0]} aux and {final.shape[0]} final rows for {total} tokens")
        aux = aux.reshape(total, len(self.aux_layers), self.hidden_size)
        states, start = [], 0
        for seq in sequences:
            end = start + len(seq)
            states.append(SampleStates(aux=aux[start:end].to("cpu", copy=True),
                                       final=final[start:end].to("cpu", copy=True)))
            start = end
        return states

    def close(self) -> None:
        for conn, proc in self._ranks:
            conn.send(None)
            proc.join(timeout=30)
        self._ranks = []
