"""status.replicas[]: what the operator's fold writes, a replica reads back as its peers' reports."""

import json

from draftgen_contracts.progress import DatasetProgress, ProgressDocument
from draftgen_contracts.replica_status import ReplicaStatus, parse_replicas
from draftgen_contracts.states import DatasetState

REPORT = ProgressDocument(replica=1, replicas=2, updated_at=101.0, datasets={
    "chat": DatasetProgress(state=DatasetState.GENERATING, completion_tokens=5_100, budget_tokens=10_000,
                            settled=True, samples=40),
    "old": DatasetProgress(completion_tokens=3)})


def test_what_the_fold_writes_a_replica_reads_back():
    written = ReplicaStatus.of(1, REPORT, ["chat", "code"])  # "old" left the spec; "code" is not reported yet
    status = json.loads(json.dumps({"replicas": [written.model_dump(mode="json", by_alias=True)]}))
    [entry] = status["replicas"]
    assert entry["reportTime"] == 101.0 and entry["datasets"][0]["budgetTokens"] == 10_000  # the status's spelling
    [read] = parse_replicas(status)
    assert read == written and [d.name for d in read.datasets] == ["chat"]
    chat = read.datasets[0].as_progress()
    assert (chat.completion_tokens, chat.state, chat.settled, chat.budget_tokens) == (5_100, "Generating", True, 10_000)


def test_a_status_without_replicas_or_a_malformed_one_has_none():
    assert parse_replicas({}) == [] and parse_replicas({"replicas": [{"datasets": []}]}) == []
    assert parse_replicas({"replicas": [{"index": 0, "surprise": 1}]})[0].index == 0  # unknown fields are ignored
