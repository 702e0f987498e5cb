"""The backend's own checks, with a stand-in for SGLang's forward (the real one: tests/real_sglang)."""

import pytest
import torch

from jobrunner.hidden_states.sglang_backend import RowsLost, SGLangBackend

HIDDEN, LAYERS = 4, [1, 2]


class Forward:
    """SGLang's answer: packed aux [T, K*H] and final [T, H], `short_by` rows short."""

    def __init__(self, capacity=(16, 3), short_by=0):
        self.batches, self._capacity, self.short_by = [], capacity, short_by

    def capacity(self):
        return self._capacity

    def forward(self, sequences):
        self.batches.append(sequences)
        rows = sum(len(s) for s in sequences) - self.short_by
        ids = torch.tensor([t for s in sequences for t in s][:rows], dtype=torch.float32)
        return ids[:, None].repeat(1, len(LAYERS) * HIDDEN), ids[:, None].repeat(1, HIDDEN)


def backend(forward: Forward) -> SGLangBackend:
    made = object.__new__(SGLangBackend)
    made.aux_layers, made.hidden_size, made._ranks, made._capture = LAYERS, HIDDEN, [], forward
    return made


def test_a_batch_is_split_where_sglangs_pools_end_and_each_sample_gets_its_own_rows():
    forward = Forward(capacity=(16, 3))
    states = backend(forward).extract([[1] * 5, [2] * 6, [3] * 7, [4], [5], [6], [7]])
    assert [len(b) for b in forward.batches] == [2, 3, 2]  # 5+6 tokens; then 7+1+1 (3 requests); then 2
    assert [s.aux.shape for s in states] == [(n, 2, HIDDEN) for n in (5, 6, 7, 1, 1, 1, 1)]
    assert all(bool((s.final == s.aux[:, 0, :]).all()) and s.final[0, 0].item() == i + 1 for i, s in enumerate(states))


def test_an_answer_short_of_rows_is_refused_never_stored_short():
    with pytest.raises(RowsLost, match="answered 8 aux and 8 final rows for 9 tokens"):
        backend(Forward(short_by=1)).extract([[1] * 4, [2] * 5])


def test_a_sample_longer_than_the_kv_pool_is_refused_with_what_to_change():
    with pytest.raises(ValueError, match="a 17-token sample exceeds SGLang's KV pool of 16 tokens"):
        backend(Forward()).extract([[1] * 17])
