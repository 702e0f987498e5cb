import pytest

from jobrunner.preflight.served_model import serves


@pytest.mark.parametrize("served, wanted, ok", [
    (["/models/kimi-k2.5"], "kimi-k2.5", True), (["kimi-k2.5"], "kimi-k2.5", True),
    (["/models/kimi-k2.5/"], "kimi-k2.5", True), (["/models/kimi-k2"], "kimi-k2.5", False), ([], "x", False)])
def test_a_served_name_matches_whole_or_by_its_last_path_component(served, wanted, ok):
    assert serves(served, wanted) is ok
