"""What a CPU-only run needs on its volumes: a tiny real model (tokenizer with a chat template, and a
random Llama) and prompt datasets in the common shapes, with a few malformed rows among them.

Used by `make demo`, the quickstart example and the end-to-end tests; nothing is downloaded.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from draftgen_dev.tiny_model import build_tiny_llama, build_tiny_tokenizer

TOPICS = ["sorting a list", "the boiling point of water", "binary search", "a haiku about rain", "prime numbers",
          "HTTP status codes", "the Pythagorean theorem", "unit tests", "a packing list", "recursion"]
WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


MODEL_VOCAB_SIZE = 512  # >= the tiny tokenizer's; the simulator is told the same (examples/quickstart.yaml)


def build_model(directory: Path) -> Path:
    """A tokenizer and a tiny Llama in one folder, loadable with AutoTokenizer and AutoModelForCausalLM.
    The model's vocabulary covers every id the simulator may answer with (--vocab-size 512)."""
    build_tiny_tokenizer(directory)
    build_tiny_llama(directory, vocab_size=MODEL_VOCAB_SIZE)
    return directory


def _chat_rows(n: int, rng: random.Random) -> list[dict]:
    rows = []
    for i in range(n):
        topic = rng.choice(TOPICS)
        if i % 3 == 0:  # multi-turn: the final assistant turn is regenerated
            rows.append({"messages": [
                {"role": "system", "content": "You are a concise assistant."},
                {"role": "user", "content": f"Tell me about {topic}."},
                {"role": "assistant", "content": "Sure. What would you like to know?"},
                {"role": "user", "content": f"Explain {topic} in {i % 5 + 2} steps, for reader {i}."},
                {"role": "assistant", "content": "(the old answer, replaced by the model's own)"}]})
        else:
            rows.append({"messages": [{"role": "user", "content": f"Question {i}: explain {topic}."}]})
    return rows


def _tool_rows(n: int) -> list[dict]:
    cities = ["Paris", "Lagos", "Lima", "Osaka", "Oslo"]
    rows = []
    for i in range(n):
        city = cities[i % len(cities)]
        rows.append({"tools": [WEATHER_TOOL], "messages": [
            {"role": "user", "content": f"Should I take an umbrella in {city} on day {i} of my trip?"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"type": "function", "function": {"name": "get_weather", "arguments": {"city": city}}}]},
            {"role": "tool", "content": json.dumps({"city": city, "rain_mm": i % 7})}]})
    return rows


def write_datasets(directory: Path, rows_per_dataset: int = 400, seed: int = 0) -> dict[str, Path]:
    """chat.jsonl (OpenAI messages), tools.jsonl (tools and tool calls), sharegpt.parquet
    (conversations); the JSONL files carry three malformed rows each, to be skipped and counted."""
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    bad = ["{not json", json.dumps({"messages": [{"role": "assistant", "content": "no user turn"}]}),
           json.dumps({"messages": [{"role": "wizard", "content": "unknown role"}]})]
    paths = {}
    for name, rows in (("chat", _chat_rows(rows_per_dataset, rng)), ("tools", _tool_rows(rows_per_dataset))):
        path = directory / f"{name}.jsonl"
        lines = [json.dumps(r) for r in rows]
        for k, line in enumerate(bad):
            lines.insert(k, line)  # the first rows: every replica of every run reads one
        path.write_text("\n".join(lines) + "\n")
        paths[name] = path
    conversations = [[{"from": "human", "value": f"Write {rng.choice(TOPICS)} as a short poem, version {i}."}]
                     for i in range(rows_per_dataset)]
    table = pa.table({"conversations": conversations})  # list<struct<from, value>>, as on the Hub
    paths["sharegpt"] = directory / "sharegpt.parquet"
    pq.write_table(table, paths["sharegpt"], row_group_size=128)
    return paths


# What a preflight must refuse, made from the demo's assets (tests/jobrunner/test_preflight.py and the
# shared scenarios of both executors).
TEMPLATE_REFUSING_TOOL_CALLS = (
    "{% for m in messages %}{% if m.tool_calls %}{{ raise_exception('tool calls are not supported') }}"
    "{% endif %}{{ m.role }}: {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}")
UNUSABLE_ROWS = '{not json\n{"messages": [{"role": "assistant", "content": "x"}]}\n'


def model_with_template(model: Path, copy: Path, template: str | None) -> Path:
    """A copy of a model's folder with another chat template (None: none at all)."""
    import shutil

    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(model, copy)
    (copy / "chat_template.jinja").unlink(missing_ok=True)
    config = json.loads((copy / "tokenizer_config.json").read_text())
    config.pop("chat_template", None)
    if template is not None:
        config["chat_template"] = template
    (copy / "tokenizer_config.json").write_text(json.dumps(config))
    return copy


def write_traces(path: Path, n: int, tokenizer_path: str | Path) -> str:
    """n existing traces (a dataset of kind `traces`), each with its own response: message traces
    and token-id traces (rendered with the tokenizer's template, `prompt_len` marking the response)
    alternating."""
    from jobrunner.shared.datasets import Trace
    from jobrunner.shared.prompts import load_tokenizer, render_trace

    tokenizer = load_tokenizer(tokenizer_path)
    with open(path, "w") as f:
        for i in range(n):
            messages = [{"role": "user", "content": f"trace {i}: name a colour"},
                        {"role": "assistant", "content": f"colour number {i} is blue " * (1 + i % 4)}]
            if i % 2:
                prompt, response = render_trace(tokenizer, Trace(i, messages=messages), {})
                f.write(json.dumps({"input_ids": prompt + response, "prompt_len": len(prompt)}) + "\n")
            else:
                f.write(json.dumps({"messages": messages}) + "\n")
    return str(path)
