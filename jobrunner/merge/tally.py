"""What the manifest says of each dataset: records in, skipped and why, duplicates, samples, lengths."""

from __future__ import annotations

from collections import Counter

from draftgen_contracts.length_stats import length_stats


class DatasetTally:
    def __init__(self) -> None:
        self.input_records = 0
        self.from_traces = 0  # input records that were existing traces (kind traces), not generated
        self.skipped: Counter = Counter()
        self.dropped_truncated = 0
        self.duplicates = 0
        self.samples = 0
        self.tokens = 0
        self.truncated_in_corpus = 0
        self.finish_reasons: Counter = Counter()
        self.prompt_lengths: Counter = Counter()
        self.response_lengths: Counter = Counter()
        self.total_lengths: Counter = Counter()

    def add_sample(self, prompt_len: int, response_len: int, truncated: bool, finish_reason: str) -> None:
        self.samples += 1
        self.tokens += prompt_len + response_len
        self.truncated_in_corpus += truncated
        self.finish_reasons[finish_reason] += 1
        self.prompt_lengths[prompt_len] += 1
        self.response_lengths[response_len] += 1
        self.total_lengths[prompt_len + response_len] += 1

    def to_json(self) -> dict:
        return {
            "input_records": self.input_records, "from_traces": self.from_traces, "skipped_by_reason": dict(sorted(self.skipped.items())),
            "dropped_truncated": self.dropped_truncated, "duplicates_removed": self.duplicates,
            "samples": self.samples, "tokens": self.tokens,
            "prompt_tokens": sum(l * c for l, c in self.prompt_lengths.items()),
            "response_tokens": sum(l * c for l, c in self.response_lengths.items()),
            "truncated_in_corpus": self.truncated_in_corpus,
            "finish_reasons": dict(sorted(self.finish_reasons.items())),
            "lengths": {"prompt": length_stats(self.prompt_lengths).to_json(),
                        "response": length_stats(self.response_lengths).to_json(),
                        "total": length_stats(self.total_lengths).to_json()},
        }
