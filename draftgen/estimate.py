"""The run's estimate: the tokens it will generate, the corpus and hidden-state bytes extraction will
store, the GPU-hours of generation and extraction and the end of generation
(docs/preflight.md#the-estimate). Pure.

Before the first responses, a dataset's response length is the stated prior (the preflight's rows x
PRIOR_RESPONSE_FRACTION of their max new tokens) and the rate is spec.server.expectedTokensPerSecond
per replica; from MEASURED_AFTER_SAMPLES responses on, the dataset's own mean replaces the prior,
and once the replicas report a rate it replaces the expected one. Extraction likewise: its rate is
spec.extraction.expectedTokensPerSecond until the extraction pod reports the rate it measures.
"""

from __future__ import annotations

from draftgen_contracts import drafters
from draftgen_contracts.hidden_state_layout import bytes_per_token, export_bytes, human_bytes
from draftgen_contracts.preflight_report import PRIOR_RESPONSE_FRACTION, DatasetReport
from draftgen_contracts.states import DATASET_DONE, DatasetState
from draftgen_contracts.timestamps import iso_after

from .api import (Dataset, DatasetEstimate, DatasetGenerationSpec, DatasetStatus, Estimate, ExtractionStatus,
                  Preflight)

# Token ids as JSON text (the generation records, the corpus, the speculators-jsonl export): a
# 6-digit id of a 160K vocabulary, its separator and its mask entry; hf-parquet holds an int32 id and
# an int8 mask entry before compression. Upper estimates (the quickstart's 512-token vocabulary
# writes 9.4, 6.6 and 2.8): these are a few bytes a token against the states' kilobytes.
JSON_IDS_BYTES_PER_TOKEN = 11
CORPUS_EXPORT_BYTES_PER_TOKEN = {"hf-parquet": 5, "speculators-jsonl": JSON_IDS_BYTES_PER_TOKEN}
# The exports' write rate the estimate assumes (docs/preflight.md#the-estimate): between a network
# volume's few hundred MB/s and a local NVMe's GB/s; nothing measures it yet.
EXPORT_WRITE_BYTES_PER_SECOND = 500e6

# Fewer responses than this say more about which finish first (the short ones) than about the mean.
MEASURED_AFTER_SAMPLES = 20


def prior_response_tokens(spec: DatasetGenerationSpec, dataset: Dataset, found: DatasetReport | None) -> float:
    """The mean response length assumed before any response: the preflight's per-row prior, or without
    one, the prior share of the dataset's max new tokens (its own, its class's, else the classes' mean)."""
    if found is not None and found.usable_rows:
        return found.expected_response_tokens / found.usable_rows
    if dataset.max_new_tokens:
        return PRIOR_RESPONSE_FRACTION * dataset.max_new_tokens
    classes = [c for c in spec.prompt_classes if c.name == dataset.prompt_class] or spec.prompt_classes
    return PRIOR_RESPONSE_FRACTION * sum(c.max_new_tokens for c in classes) / len(classes)


def dataset_estimate(spec: DatasetGenerationSpec, dataset: Dataset, found: DatasetReport | None,
                     status: DatasetStatus | None) -> DatasetEstimate:
    """Where one dataset will end: its budget, unless its rows or its sample cap run out first."""
    tokens, samples = (status.tokens or 0, status.samples or 0) if status else (0, 0)
    done = status is not None and status.state in DATASET_DONE
    # A finished dataset's mean is final however few its responses.
    measured = samples >= MEASURED_AFTER_SAMPLES or (done and samples > 0)
    mean = tokens / samples if measured else prior_response_tokens(spec, dataset, found)
    rows = found.usable_rows if found is not None else None
    if done:
        end = tokens
    else:
        reach = [dataset.budget_tokens]
        if rows is not None:
            reach.append(int(rows * mean))
        if dataset.sample_cap is not None:
            reach.append(int(dataset.sample_cap * mean))
        end = max(tokens, min(reach))
    exhausted = status is not None and status.state == DatasetState.EXHAUSTED
    reachable = not exhausted and (rows is None or rows * mean >= dataset.budget_tokens
                                   or (status is not None and status.state == DatasetState.BUDGET_MET))
    return DatasetEstimate(name=dataset.name, response_tokens=end,
                           samples=max(samples, round(end / mean)) if mean else samples,
                           mean_response_tokens=round(mean, 1), length_basis="measured" if measured else "prior",
                           reachable=reachable)


def mean_prompt_tokens(found: DatasetReport | None) -> float:
    return found.prompt_tokens / found.usable_rows if found is not None and found.usable_rows else 0.0


def stored_tokens_per_sample(prompt: float, response: float, max_length: int, too_long: str) -> float:
    """Tokens extraction stores of a sample of mean length: cut at max_length, or none when skipped."""
    length = prompt + response
    return length if length <= max_length else (max_length if too_long == "truncate" else 0.0)


def run_rate(spec: DatasetGenerationSpec, datasets: list[DatasetStatus], previous: Estimate | None) -> tuple[float, str]:
    """Output tokens/s of all replicas: what the generating datasets measure now, else the last
    measurement, else the expected rate of the spec. Existing traces are written, not generated: their
    rate says nothing of the servers'."""
    traces = {d.name for d in spec.datasets if d.kind == "traces"}
    measured = sum(d.tokens_per_second for d in datasets if d.state == DatasetState.GENERATING and d.name not in traces)
    if measured > 0:
        return measured, "measured"
    if previous is not None and previous.rate_basis == "measured" and previous.tokens_per_second > 0:
        return previous.tokens_per_second, "measured"
    return spec.server.expected_tokens_per_second * spec.server.replicas, "expected"


def extraction_rate(spec: DatasetGenerationSpec, extraction: ExtractionStatus | None) -> tuple[float, str]:
    """Tokens/s of the extraction pod: what it measured on this hardware, model and backend, else
    what the spec expects (0 with extraction off)."""
    if not spec.extraction.enabled:
        return 0.0, "expected"
    if extraction is not None and extraction.tokens_per_second > 0:
        return extraction.tokens_per_second, "measured"
    return spec.extraction.expected_tokens_per_second, "expected"


def estimate(spec: DatasetGenerationSpec, preflight: Preflight | None, datasets: list[DatasetStatus],
             previous: Estimate | None, now: str, hidden_size: int | None = None,
             extraction: ExtractionStatus | None = None) -> Estimate:
    """The estimate as of `now` (RFC 3339). Without the model's hidden size (no preflight yet) none of
    hidden-state bytes is claimed."""
    found = {d.name: d for d in preflight.datasets} if preflight else {}
    status = {d.name: d for d in datasets}
    per_dataset = [dataset_estimate(spec, d, found.get(d.name), status.get(d.name)) for d in spec.datasets]
    prompts = stored = 0.0
    for d, e in zip(spec.datasets, per_dataset):
        prompt = mean_prompt_tokens(found.get(d.name))
        response = e.response_tokens / e.samples if e.samples else 0.0
        prompts += e.samples * prompt
        stored += e.samples * stored_tokens_per_sample(prompt, response, spec.extraction.max_length,
                                                       spec.extraction.too_long)
    response = sum(e.response_tokens for e in per_dataset)
    generated = [(d, e) for d, e in zip(spec.datasets, per_dataset) if d.kind != "traces"]  # traces cost no GPU
    # The model's layer count comes with its hidden size, from the preflight: no state bytes before.
    num_layers = preflight.model.num_layers if preflight and preflight.model else 0
    served = served_layers(spec, num_layers)
    aux = len(drafters.layers_to_store(spec.extraction.drafters, num_layers, spec.extraction.layers)) \
        if num_layers else 0
    states = int(stored * bytes_per_token(hidden_size, aux, spec.extraction.dtype)) \
        if spec.extraction.enabled and hidden_size else 0
    corpus_tokens = int(prompts) + sum(e.response_tokens for e in per_dataset)
    exports = exports_bytes(spec, corpus_tokens, stored, sum(e.samples for e in per_dataset), hidden_size, served)
    disk = 2 * corpus_tokens * JSON_IDS_BYTES_PER_TOKEN + states + exports  # records, corpus, states, exports
    rate, basis = run_rate(spec, datasets, previous)
    left = sum(max(0, e.response_tokens - ((status[e.name].tokens or 0) if e.name in status else 0)) for _, e in generated)
    to_generate = sum(e.response_tokens for _, e in generated)
    hours = left / rate / 3600
    ends = iso_after(now, hours * 3600) if basis == "measured" and left else None
    s = spec.server
    gpus = 0 if s.endpoint else s.replicas * s.nodes_per_replica * s.gpus_per_replica  # an endpoint: its owner's
    extraction_tps, extraction_basis = extraction_rate(spec, extraction)
    extraction_hours = stored / extraction_tps / 3600 if extraction_tps else 0.0
    # From the report's own time, not now: the end moves when a report comes (every 15 s), and the
    # status is not rewritten at every fold in between.
    extraction_ends = (iso_after(extraction.report_time, max(0, extraction.corpus_tokens - extraction.tokens)
                                 / extraction_tps)
                       if extraction_basis == "measured" and not extraction.finished and extraction.report_time
                       else None)
    return Estimate(
        response_tokens=response, generated_tokens=to_generate, prompt_tokens=int(prompts),
        corpus_tokens=int(prompts) + response,
        hidden_state_bytes=states, hidden_state_size=human_bytes(states) if states else "",
        export_bytes=exports, export_hours=round(exports / EXPORT_WRITE_BYTES_PER_SECOND / 3600, 2),
        disk_bytes=disk, disk_size=human_bytes(disk),
        tokens_per_second=round(rate, 1), rate_basis=basis, generation_hours=round(hours, 2), generation_ends=ends,
        gpu_hours=round(to_generate / rate / 3600 * gpus, 1), extraction_tokens_per_second=round(extraction_tps, 1),
        extraction_rate_basis=extraction_basis, extraction_hours=round(extraction_hours, 2),
        extraction_gpu_hours=round(extraction_hours * spec.extraction.gpus, 1), extraction_ends=extraction_ends,
        datasets=per_dataset,
        assumptions=assumptions(spec, preflight, hidden_size, aux, (rate, basis), (extraction_tps, extraction_basis)))


def served_layers(spec: DatasetGenerationSpec, num_layers: int) -> dict[str, list[int]]:
    """drafter -> the layers it reads (none while the layer count is unknown)."""
    return {d: drafters.drafter_layers(d, num_layers, spec.extraction.layers) if num_layers else []
            for d in spec.extraction.drafters}


def exports_bytes(spec: DatasetGenerationSpec, corpus_tokens: int, stored_tokens: float, samples: int,
                  hidden_size: int | None, served: dict[str, list[int]]) -> int:
    """What the corpus exports (merge.exports) and the state exports (extraction.exports, a layout per
    drafter each trains) write: the state exports only once the model's hidden size is known."""
    corpus = sum(CORPUS_EXPORT_BYTES_PER_TOKEN[kind] * corpus_tokens for kind in spec.merge.exports)
    if not (spec.extraction.enabled and hidden_size):
        return corpus
    return corpus + sum(export_bytes(kind, stored_tokens, samples, hidden_size,
                                     drafters.export_aux_count(kind, d, served[d]), spec.extraction.dtype)
                        for kind in spec.extraction.exports for d in drafters.exports_for(kind, list(served)))


def assumptions(spec: DatasetGenerationSpec, preflight: Preflight | None, hidden_size: int | None, aux: int,
                generation: tuple[float, str], extraction: tuple[float, str]) -> str:
    rate, basis = generation
    said = [f"{rate:,.0f} output tokens/s over {spec.server.replicas} replicas "
            f"({'measured' if basis == 'measured' else 'spec.server.expectedTokensPerSecond'})"]
    if not preflight:
        said.append("no preflight yet: response lengths from max new tokens, prompt tokens unknown")
    if spec.extraction.enabled:
        said.append(f"hidden size {hidden_size}, {aux} aux layers + final state, {spec.extraction.dtype}"
                    if hidden_size else "hidden size unknown until the preflight reads config.json")
        said.append(f"extraction at {extraction[0]:,.0f} tokens/s ("
                    f"{'measured' if extraction[1] == 'measured' else 'spec.extraction.expectedTokensPerSecond'})")
    said.append("before the merge's dedupe and truncation policy; server loading time excluded")
    return "; ".join(said)


def budgets_out_of_reach(spec: DatasetGenerationSpec, estimate: Estimate, preflight: Preflight | None,
                         datasets: list[DatasetStatus]) -> str | None:
    """What to warn of when a dataset's usable rows look too few for its budget, or ran out before it;
    None when every budget is in reach."""
    rows = {d.name: d.usable_rows for d in preflight.datasets} if preflight else {}
    status = {d.name: d for d in datasets}
    said = []
    for e in estimate.datasets:
        budget = spec.dataset(e.name).budget_tokens
        if e.name in status and status[e.name].state == DatasetState.EXHAUSTED:
            said.append(f"{e.name}: its rows ran out at {e.response_tokens:,} tokens of its {budget:,} (Exhausted)")
        elif not e.reachable:
            basis = f"measured over {status[e.name].samples:,} responses" if e.length_basis == "measured" else "prior"
            said.append(f"{e.name}: {rows.get(e.name, 0):,} usable rows x about {e.mean_response_tokens:,.0f} tokens "
                        f"({basis}) may give about {e.response_tokens:,} tokens of its {budget:,}: it will be "
                        f"Exhausted at about {e.response_tokens:,} tokens")
    return "; ".join(said) or None
