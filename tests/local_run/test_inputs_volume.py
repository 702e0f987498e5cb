"""`draftgen run` with spec.inputs: the prompts on a volume of their own (a team's prompt library),
read where the pods would mount it, with nothing copied onto the output volume."""

from __future__ import annotations

from draftgen_operator import cli
from draftgen_contracts import exit_codes
from draftgen_dev.demo_assets import write_datasets
from jobrunner.shared.output import read_summary

from .conftest import quickstart, write_spec


def with_inputs(budget_tokens: int) -> dict:
    spec = quickstart(budget_tokens=budget_tokens, extraction=False)
    spec["spec"]["inputs"] = {"claimName": "prompt-library"}
    for d in spec["spec"]["datasets"]:
        d["path"] = "/inputs/team/" + d["path"].removeprefix("prompts/")
    return spec


def test_datasets_are_read_from_the_inputs_volume(tmp_path, model_dir, capsys):
    library, data = tmp_path / "library", tmp_path / "data"
    write_datasets(library / "team", rows_per_dataset=40)
    spec = write_spec(tmp_path / "inputs.yaml", with_inputs(300))
    assert cli.main(["run", str(spec), "--data-dir", str(data), "--model-dir", str(model_dir),
                     "--inputs-dir", str(library)]) == 0, capsys.readouterr().err
    for name in ("chat", "tools", "sharegpt"):
        assert read_summary(data / "quickstart", name, 0).completion_tokens >= 300
    assert not (data / "prompts").exists() and not (data / "team").exists()


def test_a_spec_with_inputs_and_no_folder_for_them_is_refused_naming_the_flag(tmp_path, model_dir, capsys):
    spec = write_spec(tmp_path / "inputs.yaml", with_inputs(300))
    assert cli.main(["run", str(spec), "--data-dir", str(tmp_path), "--model-dir", str(model_dir)]) == \
        exit_codes.BAD_CONFIG
    assert "--inputs-dir" in capsys.readouterr().err
