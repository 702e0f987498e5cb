"""The Argo CD health check over its own test data, in Argo CD's layout (health_test.yaml), status and
message exactly."""

from __future__ import annotations

import pytest
import yaml

from draftgen_contracts.states import Phase
from tests.argocd.health import ARGO_CD_STATUSES, CHECK, argocd_health

CASES = yaml.safe_load((CHECK / "health_test.yaml").read_text())["tests"]


@pytest.mark.parametrize("case", CASES, ids=[c["inputPath"] for c in CASES])
def test_health_of(case):
    obj = yaml.safe_load((CHECK / case["inputPath"]).read_text())
    assert argocd_health(obj) == (case["healthStatus"]["status"], case["healthStatus"]["message"])


def test_every_phase_and_every_test_object_is_covered():
    used = {c["inputPath"] for c in CASES}
    assert used == {f"testdata/{p.name}" for p in (CHECK / "testdata").iterdir()}
    phases = {(yaml.safe_load((CHECK / p).read_text()).get("status") or {}).get("phase") for p in used}
    assert set(Phase) <= phases
    assert {c["healthStatus"]["status"] for c in CASES} <= set(ARGO_CD_STATUSES)
