"""`make demo`'s run in `make test`: the quickstart served by the real SGLang 0.5.23 in the generation
pods and extracted by the SGLang backend in the extraction pod, on the local control plane: the
extraction pod runs the server's command (its Python, minus the launcher) with jobrunner copied in by
an init container from draftgen's image, as in a cluster (docs/eagle3.md#the-extraction-pod)."""

from __future__ import annotations

import json

from draftgen_contracts import names
from draftgen_dev.demo import with_real_sglang
from jobrunner.shared.corpus import iter_corpus
from tests.scenarios import check_records_match_status


def test_the_quickstart_on_real_sglang_generates_and_extracts_with_sglang(run):
    # One replica and small budgets: a second CPU server would only slow both on two cores.
    r = run(extraction=True, budgets=(600, 400, 400))
    r.body = with_real_sglang(r.body)
    r.body["spec"]["server"]["replicas"] = 1
    r.apply()
    status = r.wait_phase("Succeeded", "Failed", timeout_s=420)
    assert status["phase"] == "Succeeded", status["conditions"]
    assert all(d["tokens"] == d["budgetTokens"] for d in status["datasets"]), status["datasets"]
    check_records_match_status(status, r.records())
    [pod] = r.pods("extract")
    assert [c.name for c in pod.spec.init_containers] == ["jobrunner-code"]
    [extract] = pod.spec.containers
    assert extract.image == r.body["spec"]["server"]["image"]  # the server's image, not draftgen's
    at = extract.command.index("jobrunner")
    assert extract.command[at - 1:at + 2] == ["-m", "jobrunner", "extract"]
    assert {"name": "PYTHONPATH", "value": names.CODE_MOUNT} in [{"name": e.name, "value": e.value} for e in extract.env]
    index = json.loads((r.data / "qs" / "hidden-states" / "index.json").read_text())
    assert index["complete"] and index["provenance"]["backend"] == "sglang"
    assert set(index["samples"]) == {s["sample_id"] for s in iter_corpus(r.data / "qs" / "corpus")}
    # Its progress went out from the SGLang image (no Kubernetes client there) into the status.
    assert status["extraction"]["finished"] and status["extraction"]["tokens"] == index["tokens"], status["extraction"]
    assert status["estimate"]["extractionRateBasis"] == "measured"
