"""What streaming `/generate` costs the real SGLang 0.5.23 (CPU, the demo's tiny model), against the
non-streamed requests draftgen sends: the question of issue 24 item 2, whether exact running counts
from streamed events are worth more than the decode clock that infers them.

    .venv/bin/python bench/streaming_cost.py [--concurrency 20] [--prompts 60] [--output-len 512]

One server (one OpenMP thread, draftgen_dev.real_sglang), and SGLang's own client,
`python -m sglang.benchmark.serving --backend sglang` (random ids, every response `--output-len`
tokens, EOS ignored), run once per variant against it:
- plain: `--disable-stream`, one answer per request (what draftgen sends);
- every token: `stream: true` at the server's default `--stream-interval 1`, cumulative events
  (each carries all of `output_ids` so far);
- every 50: `sampling_params.stream_interval` 50, the interval SGLang forces on non-streamed
  requests too (`SGLANG_FORCE_STREAM_INTERVAL`, sglang/srt/environ.py);
- every token, deltas: the same as every token against a server started with
  `--incremental-streaming-output` (events carry only the new ids);
- plain again, on the first server after the others: the noise between two runs of one variant.
Printed per variant: the server's output tokens/s and its ratio to plain; the CPU seconds per 1,000
output tokens of the server's processes (scheduler, detokenizer, tokenizer manager) and of the
client, which on a GPU node is what the scheduler's Python loop and the pod's client spend.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import tempfile
from pathlib import Path

from draftgen_dev.demo_assets import build_model
from draftgen_dev.real_sglang.install import ensure_installed
from draftgen_dev.real_sglang.server import RealSGLang

SERVER_ARGS = ("--max-running-requests", "32", "--max-total-tokens", "32768")
# name, server flags, sampling params beyond the length (None: not streamed)
VARIANTS = (("plain", (), None),
            ("every token", (), {}),
            ("every 50", (), {"stream_interval": 50}),
            ("plain, again", (), None),  # the noise between runs of one variant
            ("every token, deltas", ("--incremental-streaming-output",), {}))


def client_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def serve(server: RealSGLang, model: Path, work: Path, name: str, stream: dict | None, args) -> dict:
    result = work / f"{name.replace(' ', '-').replace(',', '')}.jsonl"
    command = [str(ensure_installed()), "-m", "sglang.benchmark.serving", "--backend", "sglang",
               "--base-url", server.base_url, "--dataset-name", "random-ids", "--tokenizer", str(model),
               "--random-input-len", "60", "--random-output-len", str(args.output_len),
               "--random-range-ratio", "1.0", "--num-prompts", str(args.prompts),
               "--max-concurrency", str(args.concurrency), "--seed", "1", "--output-file", str(result)]
    if stream is None:
        command.append("--disable-stream")
    else:  # the whole sampling_params, since the client's own would be replaced by the extra body
        params = {"temperature": 0.0, "max_new_tokens": args.output_len, "ignore_eos": True, **stream}
        command += ["--extra-request-body", json.dumps({"sampling_params": params})]
    server_before, client_before = server.cpu_seconds(), client_cpu()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=open(work / f"{result.stem}.log", "wb"))
    server_cpu, used = server.cpu_seconds() - server_before, client_cpu() - client_before
    measured = json.loads(result.read_text().splitlines()[-1])
    tokens = measured["total_output_tokens"]
    return {"variant": name, "tps": measured["output_throughput"], "tokens": tokens,
            "server_cpu": 1000 * server_cpu / tokens, "client_cpu": 1000 * used / tokens}


def run(args) -> list[dict]:
    results = []
    with tempfile.TemporaryDirectory(prefix="draftgen-streaming-") as tmp:
        work = Path(tmp)
        model = build_model(work / "model")
        for flags in dict.fromkeys(v[1] for v in VARIANTS):  # one server per set of flags
            server = RealSGLang(model, work / f"sglang{'-'.join(flags)}.log", *SERVER_ARGS, *flags).start()
            try:
                results += [serve(server, model, work, name, stream, args)
                            for name, f, stream in VARIANTS if f == flags]
            finally:
                server.stop()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", type=int, default=20, help="requests in flight (the real bench's 16 + 4)")
    parser.add_argument("--prompts", type=int, default=60, help="requests per variant")
    parser.add_argument("--output-len", type=int, default=512, help="tokens per response")
    args = parser.parse_args()
    results = run(args)
    plain = results[0]["tps"]
    print(f"\nreal SGLang 0.5.23, one server, {args.concurrency} in flight, {args.prompts} responses of "
          f"{args.output_len} tokens per variant (sglang.benchmark.serving)")
    print(f"  {'variant':<22} {'tokens/s':>9} {'/ plain':>8} {'server CPU s/1K':>16} {'client CPU s/1K':>16}")
    for r in results:
        print(f"  {r['variant']:<22} {r['tps']:>9.1f} {r['tps'] / plain:>8.3f} {r['server_cpu']:>16.4f} "
              f"{r['client_cpu']:>16.4f}")


if __name__ == "__main__":
    main()
