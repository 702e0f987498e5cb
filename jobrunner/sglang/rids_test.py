import itertools

from jobrunner.sglang.rids import make_rid, retry_rid


def test_rids_are_fixed_width_so_none_is_a_prefix_of_another():
    rids = {make_rid(run, f"ds/{row:09d}", attempt)
            for run, row, attempt in itertools.product(["run-a", "run-b"], range(300), range(3))}
    rids |= {retry_rid(r, k) for r in list(rids)[:100] for k in (1, 2)}
    assert len({len(r) for r in rids}) == 1
    ordered = sorted(rids)
    # in sorted order a prefix would sit right before a string it prefixes
    assert not any(b.startswith(a) for a, b in zip(ordered, ordered[1:]))
    assert make_rid("run-a", "ds/000000001", 0) == make_rid("run-a", "ds/000000001", 0)
    assert make_rid("run-a", "ds/000000001", 0) != make_rid("run-a", "ds/000000001", 1)
