"""What must come out the same wherever it is computed: the operator after a restart, a second
operator replica, `draftgen run` after an interruption and the merge on another node each compute
these again in a process of their own. A check inside one process cannot see a value that depends on
the process (Python's per-process string hashing, set order, a clock, a random draw), so each value is
computed in two interpreters with different hash seeds and compared.

- the children a reconcile decides (the generate config's ConfigMap and its name, every Job, the
  setup objects): a different config name or Job spec replaces the run's Jobs;
- the local runner's spec digest: a different one starts a new generation of the run;
- the output folder's lock name: a different one lets a second run write into the folder;
- the merge's shuffle key and train/eval split: a different one moves samples between splits
  when a merge is run again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import REPO

PROBE = r"""
import json, sys
from draftgen import plan
from draftgen.api import DatasetGenerationStatus
from draftgen.local.state import spec_digest
from draftgen.observed import World
from draftgen.reconcile import decide
from draftgen_contracts import names
from draftgen_contracts.states import Stage
from draftgen_dev.builders import SpecBuilder
from jobrunner.merge import decisions
from array import array

spec = (SpecBuilder("run").replicas(3).dataset("code", budget=5000).dataset("math", budget=7000, sampleCap=40)
        .extraction(True).spec())
world = World(jobs={}, reports={}, existing=frozenset(), output_owner="run")
first = decide("run", "ns", 1, spec, DatasetGenerationStatus(), world, plan.OperatorSettings(), "2026-12-01T00:00:00Z")
generating = decide("run", "ns", 1, spec, DatasetGenerationStatus(stage=Stage.GENERATING), world,
                    plan.OperatorSettings(), "2026-12-01T00:00:00Z")
ids = [names.sample_id("code", row) for row in range(200)]
print(json.dumps({
    "children": first.create + generating.create,
    "status": generating.status.model_dump(mode="json", by_alias=True),
    "spec_digest": spec_digest(spec),
    "output_lock": names.output_lock_name(spec.output.claim_name, plan.output_root("run", spec)),
    "shuffle_keys": [decisions.content_key(array("i", [1, 2, row]), array("i", [row, 5]), 7).hex() for row in range(50)],
    "eval_split": [decisions.is_eval(sample_id, 7, 0.3) for sample_id in ids],
}, sort_keys=True))
"""


def computed_in_a_fresh_interpreter(hash_seed: int) -> dict:
    env = {**os.environ, "PYTHONHASHSEED": str(hash_seed)}
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_decided_children_digests_and_merge_keys_are_the_same_in_every_process():
    one, other = computed_in_a_fresh_interpreter(1), computed_in_a_fresh_interpreter(2)
    assert one.keys() == other.keys()
    for what in one:
        assert one[what] == other[what], f"{what} differs between two processes"
    kinds = {child["kind"] for child in one["children"]}
    assert {"ConfigMap", "Job"} <= kinds, kinds  # the probe decided the children worth comparing
    assert sum(child["kind"] == "Job" for child in one["children"]) >= 3  # the preflight and the replicas
