from draftgen.local.output_owner import claim, owner_of


def test_the_first_claim_wins_and_a_second_changes_nothing(tmp_path):
    root = tmp_path / "run"
    assert owner_of(root) is None
    claim(root, "first")
    claim(root, "second")
    assert owner_of(root) == "first"
