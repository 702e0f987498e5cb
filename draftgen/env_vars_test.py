from draftgen.env_vars import expand_vars


def test_known_vars_are_replaced_unknown_ones_kept_and_a_doubled_dollar_is_one():
    env = {"A": "1", "B": "two"}
    assert expand_vars("$(A)-$(B)-$(C)-$$(A)", env) == "1-two-$(C)-$(A)"
    assert expand_vars("http://$(POD_IP):30000", {"POD_IP": "10.0.0.7"}) == "http://10.0.0.7:30000"
