"""`draftgen run` refuses what the API server refuses at admission, naming the same field, before it
starts anything (the same table as tests/operator/test_admission.py)."""

from __future__ import annotations

import pytest

from draftgen_operator import cli
from draftgen import admission, api
from draftgen.local.spec_file import parse_object
from tests.manifests import INVALID, VALID, with_absolute_dataset_paths

from .conftest import write_spec


@pytest.mark.parametrize("case", list(INVALID))
def test_invalid_manifest_is_refused_naming_the_field_and_nothing_starts(tmp_path, capsys, case):
    body, field = INVALID[case]
    spec = write_spec(tmp_path / "spec.yaml", body)
    assert cli.main(["run", str(spec)]) == 2
    err = capsys.readouterr().err
    assert field in err, err
    assert list(tmp_path.iterdir()) == [spec]


def test_absolute_dataset_paths_in_the_volumes_are_accepted():
    spec = api.DatasetGenerationSpec.model_validate(with_absolute_dataset_paths()["spec"])
    assert admission.spec_problems(spec) == []


def test_a_context_too_small_for_the_default_classes_is_refused_saying_what_to_set():
    body = INVALID["default classes beyond a small context"][0]
    problems = admission.spec_problems(api.DatasetGenerationSpec.model_validate(body["spec"]))
    assert len(problems) == 1 and problems[0].startswith("spec.promptClasses: ")
    assert "set promptClasses whose maxNewTokens fit, or a model.contextLength above 16384" in problems[0]


@pytest.mark.parametrize("case", list(VALID))
def test_manifests_the_api_server_admits_are_accepted(case):
    parse_object(VALID[case])
