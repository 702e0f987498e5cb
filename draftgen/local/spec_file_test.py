import pytest

from draftgen.local.spec_file import SpecError, dataset_generation, local_spec, parse_object
from draftgen_contracts import names
from draftgen_dev.builders import example_manifest


def test_a_bad_field_is_named_as_in_the_yaml():
    obj = example_manifest()
    obj["spec"]["datasets"][1]["budgetTokens"] = 0
    obj["spec"]["merge"]["evalFraktion"] = 0.1
    with pytest.raises(SpecError) as e:
        parse_object(obj)
    assert "spec.datasets[1].budgetTokens: Input should be greater than or equal to 1" in str(e.value)
    assert "spec.merge.evalFraktion: Extra inputs are not permitted" in str(e.value)


def test_the_admission_rules_are_checked_here_too_naming_the_field():
    obj = example_manifest()
    obj["spec"]["datasets"][0]["promptClass"] = "medium"
    obj["spec"]["server"]["shmSize"] = "lots"
    with pytest.raises(SpecError) as e:
        parse_object(obj)
    assert "spec.datasets: datasets[].promptClass must name one of promptClasses" in str(e.value)
    assert "spec.server.shmSize: server.shmSize must be a Kubernetes quantity" in str(e.value)


@pytest.mark.parametrize("name", [None, "", "Has_Upper", "a/b", "n" * (names.MAX_NAME_LENGTH + 1)])
def test_metadata_name_must_be_a_dns_name(name):
    obj = example_manifest()
    obj["metadata"]["name"] = name
    with pytest.raises(SpecError, match="metadata.name"):
        parse_object(obj)


def test_the_dataset_generation_is_picked_among_other_documents():
    pvc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"}}
    assert dataset_generation([pvc, example_manifest(), None])["kind"] == names.KIND
    with pytest.raises(SpecError, match="expected one DatasetGeneration object, found 0"):
        dataset_generation([pvc])
    with pytest.raises(SpecError, match="found 2"):
        dataset_generation([example_manifest(), example_manifest()])
    with pytest.raises(SpecError, match="apiVersion"):
        dataset_generation([{**example_manifest(), "apiVersion": "draftgen.io/v1"}])


def test_server_replicas_are_ignored_locally():
    spec = parse_object(example_manifest())[1]
    assert spec.server.replicas == 2 and local_spec(spec).server.replicas == 1
