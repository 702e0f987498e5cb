import pytest

from draftgen_contracts import drafters


def test_eagle3_and_dflash_defaults_are_the_trainers_own_for_a_36_layer_target():
    assert drafters.drafter_layers("eagle3", 36) == [1, 17, 32]
    # speculators' converter documents [2, 10, 18, 26, 34] in its numbering (one more than ours).
    assert drafters.drafter_layers("dflash", 36) == [1, 9, 17, 25, 33]
    assert drafters.drafter_layers("mtp", 36) == []


def test_one_forward_stores_the_union_in_layer_order():
    assert drafters.layers_to_store(["eagle3", "dflash", "mtp"], 8) == [1, 2, 3, 4, 5]
    assert drafters.layers_to_store(["dflash", "eagle3"], 61) == [1, 15, 29, 30, 44, 57, 58]


def test_an_explicit_list_replaces_every_default_but_mtps():
    assert drafters.layers_to_store(["eagle3", "dflash"], 36, [3, 7]) == [3, 7]
    assert drafters.drafter_layers("mtp", 36, [3, 7]) == []


def test_each_trainer_exports_only_the_drafters_it_trains_into_its_own_folder():
    assert drafters.exports_for("specforge", ["eagle3", "dflash", "mtp"]) == ["eagle3", "dflash"]
    assert drafters.exports_for("speculators", ["mtp"]) == ["mtp"]
    assert drafters.export_folder("specforge", "eagle3") == "specforge"
    assert drafters.export_folder("speculators", "dflash") == "speculators-dflash"
    assert drafters.export_aux_count("speculators", "mtp", []) == 1  # the final state, repeated
    assert drafters.export_aux_count("specforge", "dflash", drafters.dflash_layers(36)) == 5


@pytest.mark.parametrize("chosen, explicit, words", [
    ([], None, "at least one"), (["medusa"], None, "expected some of"), (["mtp"], None, "final state alone")])
def test_problems_are_said(chosen, explicit, words):
    assert words in drafters.problem(chosen, explicit)


def test_mtp_with_another_drafter_or_explicit_layers_is_fine():
    assert drafters.problem(["mtp", "eagle3"], None) is None and drafters.problem(["mtp"], [5]) is None
