"""A run created suspended (`spec.suspend: true`) gets its plan, the preflight's findings and the
estimate, with no generation started; set to false, it generates without checking again."""

from __future__ import annotations

import json

from draftgen_operator import cli
from jobrunner.shared.output import record_files

from .conftest import quickstart, write_spec


def test_a_suspended_run_stops_after_its_plan_and_resumes_without_rerunning_the_preflight(
        tmp_path, data_dir, model_dir, capsys):
    spec = quickstart(budget_tokens=400, extraction=False, suspend=True)
    path = write_spec(tmp_path / "plan.yaml", spec)
    assert cli.main(["run", str(path), "--data-dir", str(data_dir), "--model-dir", str(model_dir)]) == 0
    out = capsys.readouterr().out
    root = data_dir / "quickstart"
    assert "suspended: no GPU Job runs. The plan: 1,200 tokens to generate" in out, out[-2000:]
    state = json.loads((root / "local-run" / "state.json").read_text())
    assert state["status"]["phase"] == "Suspended" and state["status"]["preflight"]["datasets"]
    assert not list(record_files(root))  # nothing generated
    spec["spec"]["suspend"] = False
    write_spec(path, spec)
    assert cli.main(["run", str(path), "--data-dir", str(data_dir), "--model-dir", str(model_dir)]) == 0
    out = capsys.readouterr().out
    assert "preflight: done already (stored output), skipped" in out and list(record_files(root))
