"""`draftgen run examples/quickstart.yaml --server-url URL` against the real SGLang, as
docs/local-run.md tells a user with a server of their own: the whole pipeline, every budget exact
(`atBudget: cut`), the server's version in the provenance, the corpus and the hidden states complete."""

from __future__ import annotations

import json

from draftgen_operator import cli
from draftgen_contracts import names
from jobrunner.shared.corpus import iter_corpus
from jobrunner.shared.output import iter_records, read_summary, record_files
from draftgen_dev.demo_assets import write_datasets
from draftgen_dev.real_sglang.install import SGLANG_VERSION as REAL_SGLANG_VERSION
from tests.local_run.conftest import quickstart, write_spec

BUDGET = 400


def test_the_quickstart_on_the_real_server_ends_every_budget_exact(real_sglang, real_model, tmp_path, capsys):
    models = tmp_path / "models"
    models.mkdir()
    (models / "tiny").symlink_to(real_model)  # the quickstart's spec.model.path, the server's model
    data = tmp_path / "data"
    write_datasets(data / "prompts", rows_per_dataset=60)
    spec = write_spec(tmp_path / "quickstart.yaml", quickstart(budget_tokens=BUDGET, server_args=[]))
    code = cli.main(["run", str(spec), "--data-dir", str(data), "--model-dir", str(models),
                     "--server-url", real_sglang.base_url])
    out = capsys.readouterr().out
    assert code == 0, out[-4000:] + real_sglang.log_tail()
    root = data / "quickstart"
    datasets = {d["name"] for d in quickstart()["spec"]["datasets"]}
    records = [r for p in record_files(root) for r in iter_records(p)]
    assert {r["dataset"] for r in records} == datasets
    for name in datasets:
        mine = [r for r in records if r["dataset"] == name]
        assert sum(r["completion_tokens"] for r in mine) == BUDGET == read_summary(root, name, 0).completion_tokens
        assert all(r["completion_tokens"] == len(r["output_ids"]) for r in mine)
    assert len({r["sample_id"] for r in records}) == len(records)
    [session] = json.loads((root / "generate" / names.provenance_file_name(0)).read_text())["sessions"]
    assert session["server_version"] == REAL_SGLANG_VERSION  # the samples say which server made them
    corpus_ids = {r["sample_id"] for r in iter_corpus(root / "corpus")}
    index = json.loads((root / "hidden-states" / "index.json").read_text())
    assert index["complete"] and set(index["samples"]) == corpus_ids
    print(f"{len(records)} samples, {len(corpus_ids)} in the corpus")
