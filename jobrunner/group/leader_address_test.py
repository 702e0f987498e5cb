"""resolve-leader: rank 0 writes its own IP, the others the leader's, within a bound."""

import argparse

import pytest

from draftgen_contracts import exit_codes
from jobrunner.group import leader_address
from jobrunner.group.leader_address import rank_from_env, wait_resolved


def test_the_rank_is_the_completion_index():
    assert rank_from_env({"JOB_COMPLETION_INDEX": "3"}) == 3
    with pytest.raises(ValueError, match="not a pod of an Indexed Job"):
        rank_from_env({})


def test_a_name_that_never_resolves_fails_naming_it_after_the_bound():
    clock = iter(range(0, 100, 10)).__next__
    with pytest.raises(TimeoutError, match="run-gen-r000-0.run-ranks.invalid did not resolve in 15 s"):
        wait_resolved("run-gen-r000-0.run-ranks.invalid", 15, clock=clock, sleep=lambda _s: None)
    assert wait_resolved("localhost", 1) in ("127.0.0.1", "::1")


def run(tmp_path, monkeypatch, rank: str, leader: str = "localhost") -> tuple[int, str]:
    monkeypatch.setenv("JOB_COMPLETION_INDEX", rank)
    monkeypatch.setenv("POD_IP", "10.1.2.3")
    out = tmp_path / "leader"
    code = leader_address.main(argparse.Namespace(leader=leader, out=str(out), timeout=0))
    return code, out.read_text() if out.exists() else ""


def test_rank_0_writes_its_own_ip_and_the_others_the_leaders(tmp_path, monkeypatch):
    assert run(tmp_path, monkeypatch, "0", leader="never.invalid") == (exit_codes.OK, "10.1.2.3")
    assert run(tmp_path, monkeypatch, "1") == (exit_codes.OK, "127.0.0.1")
    (tmp_path / "leader").unlink()
    assert run(tmp_path, monkeypatch, "1", leader="never.invalid") == (exit_codes.FAILED, "")
