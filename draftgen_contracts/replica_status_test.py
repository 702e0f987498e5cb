"""status.replicas[]: what the operator's fold writes of each replica's report."""

import json

from draftgen_contracts.progress import DatasetProgress, ProgressDocument
from draftgen_contracts.replica_status import ReplicaStatus
from draftgen_contracts.states import DatasetState

REPORT = ProgressDocument(replica=1, replicas=2, updated_at=101.0, datasets={
    "chat": DatasetProgress(state=DatasetState.GENERATING, completion_tokens=5_100, budget_tokens=10_000,
                            settled=True, samples=40),
    "old": DatasetProgress(completion_tokens=3)})


def test_what_the_fold_writes_of_a_report():
    written = ReplicaStatus.of(1, REPORT, ["chat", "code"])  # "old" left the spec; "code" is not reported yet
    [entry] = json.loads(json.dumps({"replicas": [written.model_dump(mode="json", by_alias=True)]}))["replicas"]
    assert entry["reportTime"] == 101.0 and [d["name"] for d in entry["datasets"]] == ["chat"]
    chat = entry["datasets"][0]  # the status's spelling
    assert (chat["tokens"], chat["state"], chat["settled"], chat["budgetTokens"]) == (5_100, "Generating", True, 10_000)
