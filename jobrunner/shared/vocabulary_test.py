import numpy as np

from jobrunner.shared.vocabulary import TokenTally, draft_tokens, maps


def test_the_most_frequent_tokens_ties_by_the_lower_id():
    counts = {7: 5, 3: 5, 9: 1, 2: 9}
    assert draft_tokens(counts, 3) == [2, 3, 7]  # 3 and 7 tie at 5; 9 is out


def test_fewer_distinct_tokens_than_the_draft_fill_with_the_lowest_unused_ids():
    assert draft_tokens({5: 2, 1: 1}, 4) == [0, 1, 2, 5]


def test_d2t_is_an_offset_and_t2d_a_mask_over_the_target():
    d2t, t2d = maps({4: 3, 9: 2}, 2, 12)
    assert (d2t + np.arange(2)).tolist() == [4, 9] and d2t.dtype == np.int64
    assert np.flatnonzero(t2d).tolist() == [4, 9] and t2d.shape == (12,) and t2d.dtype == bool


def test_the_tally_counts_what_was_added_less_what_was_removed_across_flushes(monkeypatch):
    monkeypatch.setattr(TokenTally, "FLUSH", 4)
    tally = TokenTally()
    for ids in ([5, 1, 5], [2, 5], [900, 1]):
        tally.add(ids)
    tally.remove([5, 900])
    tally.add([-1, 1 << 40])  # malformed ids: not counted, and no array as long as their value
    assert tally.counts() == {1: 2, 2: 1, 5: 2}
    assert TokenTally().counts() == {}


def test_an_id_the_target_lacks_is_left_out_of_the_maps():
    d2t, t2d = maps({4: 3, 50: 9}, 2, 12)  # 50: an added token past the config's vocab_size
    assert (d2t + np.arange(2)).tolist() == [0, 4] and np.flatnonzero(t2d).tolist() == [0, 4]
