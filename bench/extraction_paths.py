"""Two ways of getting EAGLE-3 hidden states out of the real SGLang 0.5.23 on this CPU, and what
they would cost at Kimi-K2.5's size (docs/eagle3.md#the-sglang-backend says why extraction runs
in-process).

    .venv/bin/python bench/extraction_paths.py [--quick] [--final-pass]

One random-weight Llama in bf16 (hidden 512, 8 layers, vocabulary 1024 by default: a forward that
costs something on one core), and one seeded set of random prompts of 200 to 1000 tokens, run by:
- http: a real SGLang server in capture mode (`--enable-return-aux-hidden-states
  --speculative-algorithm EAGLE3 --return-aux-hidden-state-layer-ids 1 3 5`, radix cache and chunked
  prefill off), each prompt a `/generate` with `return_hidden_states: true` and one new token, sent
  by `--concurrency` client threads at once. Measured: prompt tokens/s whose states came back, the
  response bytes per token and per number, the server's CPU (all its processes) per token, and the
  client's CPU to parse the bodies (json.loads, timed afterwards on one thread) per million
  numbers. Such a server answers the aux states *instead of* the final state: the final state needs
  a second server (`--enable-return-hidden-states`) and a second forward; `--final-pass` measures it.
- in-process: `jobrunner.hidden_states.sglang_backend.SGLangBackend` (what `jobrunner extract
  --backend sglang` runs) in a child process with SGLang's interpreter, `extract` over the prompts
  in batches of `--batch`: aux and final states from one forward, torch tensors that are never
  serialized (4 x hidden x 2 bytes per token in bf16).
- transformers: `TransformersBackend` on the same batches, in this venv's Python, for reference.
Every path runs with one OpenMP thread (draftgen_dev.real_sglang's CPU_ENV), one at a time, after
one warm-up call on the first prompt. The projection scales the measured bytes per number and parse
cost per number to Kimi-K2.5 (hidden 7168, three aux layers) at 10,000 tokens/s per node.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
AUX_LAYERS = [1, 3, 5]  # of 8: below the last, which SGLang cannot capture (sglang_settings)
CAPTURE_ARGS = ("--enable-return-aux-hidden-states", "--speculative-algorithm", "EAGLE3",
                "--return-aux-hidden-state-layer-ids", *map(str, AUX_LAYERS))
# Every token answered whole and in one extend, as the in-process backend forces; no tokenizer is
# needed for input ids, and the model computes in bf16 as the backends do. The memory fraction the
# in-process backend is given too: SGLang's default one leaves this model no KV cache on the CPU
# ("--mem-fraction-static=-0.049").
HTTP_ARGS = ("--disable-radix-cache", "--chunked-prefill-size", "-1", "--skip-tokenizer-init", "--dtype", "bfloat16",
             "--mem-fraction-static", "0.5")
# The backend's own tests' CPU flags (tests/real_sglang/test_sglang_extraction.py), with a pool for 8 x 1000 tokens.
INPROC_SERVER_ARGS = ["--device", "cpu", "--attention-backend", "torch_native", "--max-total-tokens", "16384",
                      "--mem-fraction-static", "0.5"]
KIMI = {"hidden": 7168, "aux": 3, "tps": 10_000}


# ---- the model and the prompts -------------------------------------------------------------

def build_model(directory: Path, hidden: int, layers: int, vocab: int, seed: int = 0) -> Path:
    """A seeded random Llama in bf16 safetensors, no tokenizer (every path takes token ids)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    config = LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=3 * hidden,
                         num_hidden_layers=layers, num_attention_heads=hidden // 64, num_key_value_heads=2,
                         max_position_embeddings=2048, tie_word_embeddings=False,
                         pad_token_id=0, bos_token_id=1, eos_token_id=2)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    with torch.no_grad():  # RMSNorm weights off 1, as build_tiny_llama does
        for module in model.modules():
            if module.__class__.__name__.endswith("RMSNorm"):
                module.weight.uniform_(0.5, 1.5)
    model.to(torch.bfloat16).save_pretrained(directory, safe_serialization=True)
    return directory


def make_prompts(count: int, vocab: int, seed: int = 1) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(3, vocab) for _ in range(rng.randint(200, 1000))] for _ in range(count)]


def batches(prompts: list[list[int]], size: int) -> list[list[list[int]]]:
    return [prompts[i:i + size] for i in range(0, len(prompts), size)]


# ---- path A: a server in capture mode, over HTTP ---------------------------------------------


def generate(server, ids: list[int]) -> bytes:
    status, body = server.post("/generate", {"input_ids": ids, "return_hidden_states": True,
                                             "sampling_params": {"max_new_tokens": 1, "temperature": 0}})
    if status != 200:
        raise RuntimeError(f"/generate answered {status}: {body[:500]!r}")
    return body


def states_of(body: bytes) -> list:
    return json.loads(body)["meta_info"]["hidden_states"]


def shape_of(states: list) -> str:
    """The nesting of meta_info.hidden_states, e.g. [1][L][1536]: one entry per forward that
    returned states, each a list of rows."""
    return "[" + "][".join(str(len(x)) for x in (states, states[0], states[0][0])) + "]"


def run_http(work: Path, model: Path, prompts: list[list[int]], concurrency: int, mode_args: tuple[str, ...],
             name: str) -> dict:
    from draftgen_dev.real_sglang.server import RealSGLang

    server = RealSGLang(model, work / f"{name}.log", *mode_args, *HTTP_ARGS)
    try:
        started = time.monotonic()
        server.start()
        startup = time.monotonic() - started
        warm = states_of(generate(server, prompts[0]))
        shape = shape_of(warm)
        server_cpu, client_cpu, t0 = server.cpu_seconds(), time.process_time(), time.perf_counter()
        with ThreadPoolExecutor(concurrency) as pool:
            bodies = list(pool.map(lambda ids: generate(server, ids), prompts))
        wall = time.perf_counter() - t0
        server_cpu, client_cpu = server.cpu_seconds() - server_cpu, time.process_time() - client_cpu
    except Exception:
        print(f"{name} server log, tail:\n{short_lines(server.log_tail())}", file=sys.stderr)
        raise
    finally:
        server.stop()
    parse_s, numbers, rows, width = parse_cost(bodies, prompts)
    tokens = sum(map(len, prompts))
    size = sum(map(len, bodies))
    return {"path": name, "tokens": tokens, "seconds": wall, "tps": tokens / wall, "startup_s": startup,
            "shape": shape, "width": width, "rows": rows, "numbers": numbers, "bytes": size,
            "bytes_per_token": size / tokens, "bytes_per_number": size / numbers,
            "parse_s": parse_s, "parse_s_per_m": 1e6 * parse_s / numbers,
            "server_cpu_per_token": server_cpu / tokens, "client_recv_cpu": client_cpu,
            "cpu_per_wall": server_cpu / wall}


def parse_cost(bodies: list[bytes], prompts: list[list[int]]) -> tuple[float, int, int, int]:
    """json.loads of every body, timed alone on one thread (process CPU time, so a stray thread of
    this process would count too), and the rows and numbers the answers hold."""
    parse_s, numbers, rows, widths = 0.0, 0, 0, set()
    for body, ids in zip(bodies, prompts):
        t0 = time.process_time()
        answer = json.loads(body)
        parse_s += time.process_time() - t0
        states = answer["meta_info"]["hidden_states"]
        if len(states[0]) != len(ids):  # a prompt's rows short: its states did not all come back
            raise RuntimeError(f"{len(states[0])} rows for a {len(ids)}-token prompt (shape {shape_of(states)})")
        for forward in states:
            rows += len(forward)
            numbers += sum(map(len, forward))
            widths.update(map(len, forward))
    return parse_s, numbers, rows, max(widths)


# ---- paths B and C: a backend in its own process ---------------------------------------------

def run_backend(work: Path, kind: str, model: Path, prompts_path: Path, batch: int) -> dict:
    """One backend per process: SGLang's parallel runtime starts once per process, and each path
    gets a fresh one with one OpenMP thread."""
    from draftgen_dev.real_sglang.install import ensure_installed
    from draftgen_dev.real_sglang.server import CPU_ENV

    python = str(ensure_installed()) if kind == "sglang" else sys.executable
    command = [python, __file__, "--worker", kind, "--model", str(model), "--prompts-file", str(prompts_path),
               "--batch", str(batch)]
    started = time.monotonic()
    done = subprocess.run(command, env={**os.environ, **CPU_ENV, "PYTHONPATH": str(REPO)},
                          capture_output=True, text=True, timeout=900)
    (work / f"{kind}.log").write_text(done.stdout + done.stderr)
    result = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not result:
        raise RuntimeError(f"{kind} worker exited {done.returncode}:\n{short_lines(done.stderr[-4000:])}")
    return {**json.loads(result[-1][len("RESULT "):]), "process_s": time.monotonic() - started}


def worker(kind: str, model: str, prompts: list[list[int]], batch: int) -> dict:
    """In the child: load, warm up on the first prompt, then time extract over every batch."""
    import torch

    started = time.monotonic()
    if kind == "sglang":
        from jobrunner.hidden_states.sglang_backend import SGLangBackend

        backend = SGLangBackend(model, AUX_LAYERS, "post-norm", "bf16", server_args=INPROC_SERVER_ARGS)
    else:
        from jobrunner.hidden_states.transformers_backend import TransformersBackend

        backend = TransformersBackend(model, AUX_LAYERS, dtype="bf16")
    load_s = time.monotonic() - started
    backend.extract(prompts[:1])
    nbytes, t0, c0 = 0, time.perf_counter(), time.process_time()
    for part in batches(prompts, batch):
        for ids, states in zip(part, backend.extract(part)):
            want = (len(ids), len(AUX_LAYERS), backend.hidden_size)
            if tuple(states.aux.shape) != want or states.final.shape[0] != len(ids):
                raise RuntimeError(f"aux {tuple(states.aux.shape)}, final {tuple(states.final.shape)} "
                                   f"for a {len(ids)}-token prompt")
            nbytes += states.aux.nbytes + states.final.nbytes
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    tokens = sum(map(len, prompts))
    return {"path": kind, "tokens": tokens, "seconds": wall, "tps": tokens / wall, "startup_s": load_s,
            "dtype": str(states.aux.dtype).removeprefix("torch."), "bytes_per_token": nbytes / tokens,
            "cpu_per_wall": cpu / wall, "torch_threads": torch.get_num_threads()}


def short_lines(text: str, width: int = 300) -> str:
    """A log's lines cut to `width` (SGLang's server_args line alone is tens of kilobytes)."""
    return "\n".join(line if len(line) <= width else line[:width] + " ..." for line in text.splitlines())


# ---- the report ------------------------------------------------------------------------------

def show(args, http: dict, final: dict | None, inproc: dict, hf: dict, hidden: int) -> None:
    print(f"\nEAGLE-3 states from the real SGLang 0.5.23 on the CPU, one OpenMP thread per path: random Llama "
          f"hidden {hidden}, {args.layers} layers, bf16; aux layers {AUX_LAYERS}; {len(args.prompt_list)} prompts, "
          f"{http['tokens']} tokens (200-1000 each)")
    print(f"  http answer: meta_info.hidden_states {http['shape']} (forwards x prompt rows x numbers per row: "
          f"{http['width']} = {http['width'] // hidden} x hidden), the aux states only")
    print(f"  {'path':<34} {'tokens/s':>9} {'bytes/token':>12} {'bytes/number':>13} {'CPU/wall':>9} {'ready in':>9}")
    rows = [(f"http, {args.concurrency} clients (aux)", http),
            *([(f"http, {args.concurrency} clients (final pass)", final)] if final else []),
            (f"in-process sglang, batches of {args.batch}", inproc), (f"transformers, batches of {args.batch}", hf)]
    for label, r in rows:
        per_number = f"{r['bytes_per_number']:>13.2f}" if "bytes_per_number" in r else f"{'(' + r['dtype'] + ')':>13}"
        print(f"  {label:<34} {r['tps']:>9.0f} {r['bytes_per_token']:>12.0f} {per_number} {r['cpu_per_wall']:>9.2f} "
              f"{r['startup_s']:>8.0f}s")
    print(f"  http: JSON parse {http['parse_s_per_m']:.3f} client CPU s per million numbers ({http['parse_s']:.2f} s "
          f"for {http['numbers'] / 1e6:.1f} M numbers); server CPU {1e3 * http['server_cpu_per_token']:.3f} ms per "
          "token "
          f"(all its processes); receiving, client CPU {http['client_recv_cpu']:.2f} s")
    print(f"  in-process: {inproc['bytes_per_token']:.0f} bytes per token in memory (aux {len(AUX_LAYERS)} + final 1) "
          f"x {hidden} x 2, none serialized; torch threads {inproc['torch_threads']}")
    print(f"  ratios: in-process / http tokens/s {inproc['tps'] / http['tps']:.2f}; transformers / http "
          f"{hf['tps'] / http['tps']:.2f}; in-process / transformers {inproc['tps'] / hf['tps']:.2f}; http bytes per "
          f"token / in-process {http['bytes_per_token'] / inproc['bytes_per_token']:.1f} (for 3/4 of the states)")
    if final:
        print(f"  final pass answer: meta_info.hidden_states {final['shape']} ({final['width'] // hidden} x hidden); "
              f"aux + final over http (two forwards): {1 / (1 / http['tps'] + 1 / final['tps']):.0f} tokens/s, "
              f"{http['bytes_per_token'] + final['bytes_per_token']:.0f} bytes per token")
    # The server's CPU beyond the forward (scheduler loop, .tolist(), the pickled lists' two IPC hops,
    # orjson, HTTP): its CPU per token less the in-process path's, which runs the same forward on one
    # thread; a difference of two runs, so an estimate.
    inproc_cpu = inproc["cpu_per_wall"] / inproc["tps"]
    serving = (http["server_cpu_per_token"] - inproc_cpu) / http["width"]
    print(f"  http server CPU beyond the forward: {1e3 * (http['server_cpu_per_token'] - inproc_cpu):.3f} ms per token "
          f"({1e3 * http['server_cpu_per_token']:.3f} - in-process {1e3 * inproc_cpu:.3f}), "
          f"{1e9 * serving:.0f} ns per number")
    print("  (CPU/wall: the server's processes together for http, the worker process otherwise; ready in: server "
          "start, or backend load)")
    project(http, serving)


def project(http: dict, serving_s_per_number: float) -> None:
    h, k, tps = KIMI["hidden"], KIMI["aux"], KIMI["tps"]
    print(f"\nprojection, Kimi-K2.5 (hidden {h}, {k} aux layers) at {tps:,} tokens/s per node, from the aux "
          "answers' bytes, parse cost and server CPU per number measured above")
    for label, numbers in ((f"http, aux only ({k} x {h})", k * h), (f"http, aux + final pass (+{h})", (k + 1) * h)):
        per_s = numbers * tps
        print(f"  {label:<32} {numbers:>6} numbers/token: JSON {per_s * http['bytes_per_number'] / 1e9:.2f} GB/s, "
              f"client parse {per_s * http['parse_s_per_m'] / 1e6:.1f} CPU s/s (cores, json.loads), "
              f"server beyond the forward ~{per_s * serving_s_per_number:.1f}")
    print(f"  {'in-process':<32} {(k + 1) * h:>6} bf16/token: {(k + 1) * h * 2 * tps / 1e9:.2f} GB/s device -> host, "
          "nothing parsed")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer prompts (a quarter)")
    parser.add_argument("--prompts", type=int, default=None, help="prompts per path (default 48, --quick 12)")
    parser.add_argument("--concurrency", type=int, default=8, help="http clients in flight")
    parser.add_argument("--batch", type=int, default=8, help="sequences per extract call")
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--vocab", type=int, default=1024)
    parser.add_argument("--final-pass", action="store_true",
                        help="also measure a second server that answers the final state")
    parser.add_argument("--keep", type=Path, help="keep the model, prompts and logs here")
    parser.add_argument("--worker", choices=("sglang", "transformers"), help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--prompts-file", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:  # the child of run_backend
        prompts = json.loads(Path(args.prompts_file).read_text())
        print("RESULT " + json.dumps(worker(args.worker, args.model, prompts, args.batch)), flush=True)
        return
    count = args.prompts or (12 if args.quick else 48)
    with tempfile.TemporaryDirectory(prefix="draftgen-extraction-paths-") as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        model = build_model(work / "model", args.hidden, args.layers, args.vocab)
        args.prompt_list = make_prompts(count, args.vocab)
        prompts_path = work / "prompts.json"
        prompts_path.write_text(json.dumps(args.prompt_list))
        http = run_http(work, model, args.prompt_list, args.concurrency, CAPTURE_ARGS, "http")
        final = (run_http(work, model, args.prompt_list, args.concurrency, ("--enable-return-hidden-states",),
                          "http-final") if args.final_pass else None)
        inproc = run_backend(work, "sglang", model, prompts_path, args.batch)
        hf = run_backend(work, "transformers", model, prompts_path, args.batch)
    show(args, http, final, inproc, hf, args.hidden)


if __name__ == "__main__":
    main()
