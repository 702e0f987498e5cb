from draftgen import server_keys


def test_no_fresh_key_starts_with_a_dash_which_sglangs_config_file_would_read_as_a_flag():
    keys = [k for _ in range(2000) for k in server_keys.fresh_keys().values()]
    assert len(set(keys)) == len(keys) and not any(k.startswith("-") for k in keys)
    assert all(len(k) == 44 for k in keys)  # 32 random bytes as 43 characters, and the letter before
