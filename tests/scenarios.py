"""What a DatasetGeneration goes through, as one table that both executors run: the operator on the
real control plane (tests/operator/test_scenarios.py) and `draftgen run` on this machine
(tests/local_run/test_scenarios.py). A bad spec is the other shared table (tests/manifests.py).

A driver does what a user does (apply, interrupt the controller, change the spec) and reads the
DatasetGeneration's status and events; the expectations below are about those alone, so both
executors must show the same phases, reasons and messages for the same story.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol


class Driver(Protocol):
    def apply(self, spec_change: Callable[[dict], None] | None = None) -> None:
        """Create the DatasetGeneration (the first time) or change its spec; the controller runs it."""

    def wait_for_tokens(self) -> None:
        """Until the status counts some generated tokens."""

    def restart_controller(self) -> None:
        """Kill the controller mid-run and start it again (the operator, or `draftgen run`)."""

    def wait_done(self) -> dict:
        """The status once the phase is Succeeded or Failed (camelCase, as `kubectl get -o yaml`)."""

    def events(self) -> list[str]:
        """The reasons of the events recorded for the object."""

    def records(self) -> list[dict]:
        """Every generation record written."""

    def applied_spec(self) -> dict:
        """The spec as last applied (camelCase)."""


@dataclass(frozen=True)
class Scenario:
    name: str
    change: Callable[[dict], None] | None = None  # to the spec before the first apply
    restart: bool = False  # kill the controller once tokens flow, then start it again
    then: Callable[[dict], None] | None = None  # a spec change once it Succeeded
    phase: str = "Succeeded"
    reason: str = "Succeeded"
    message: tuple[str, ...] = ()  # in the Failed condition's message (Failed), or Ready's
    events: tuple[str, ...] = ("BudgetsMet", "Succeeded")
    budgets: tuple[int, ...] = field(default=(1500, 1000, 1000))


def _missing_prompts(spec: dict) -> None:
    spec["datasets"][0]["path"] = "prompts/missing.jsonl"


def _no_such_model(spec: dict) -> None:
    spec["model"]["path"] = "no-such-model"


def _raise_first_budget(spec: dict) -> None:
    spec["datasets"][0]["budgetTokens"] *= 3


SCENARIOS = [
    Scenario("runs to the end"),
    # Both are found by the preflight, before any server starts or any GPU is asked for.
    Scenario("missing input", change=_missing_prompts, phase="Failed", reason="PreflightFailed",
             message=("missing.jsonl", "no such file"), events=("PreflightFailed",)),
    Scenario("failing stage", change=_no_such_model, phase="Failed", reason="PreflightFailed",
             message=("PodFailurePolicy", "no-such-model", "no such directory"), events=("PreflightFailed",)),
    Scenario("resume after the controller died", restart=True, budgets=(4000, 2000, 2000)),
    Scenario("raised budget", then=_raise_first_budget, events=("BudgetsMet", "Reopened", "Succeeded")),
]


def play(scenario: Scenario, driver: Driver) -> None:
    """Run one scenario with one executor and check what the object says."""
    driver.apply(lambda spec: _set_budgets(spec, scenario.budgets, scenario.change))
    if scenario.restart:
        driver.wait_for_tokens()
        driver.restart_controller()
    status = driver.wait_done()
    if scenario.then is not None:
        assert status["phase"] == "Succeeded", status["conditions"]
        driver.apply(scenario.then)
        status = driver.wait_done()
    check(scenario, status, driver)


def _set_budgets(spec: dict, budgets: tuple[int, ...], change: Callable[[dict], None] | None) -> None:
    for dataset, budget in zip(spec["datasets"], budgets):
        dataset["budgetTokens"] = budget
    if change is not None:
        change(spec)


def check(scenario: Scenario, status: dict, driver: Driver) -> None:
    conditions = {c["type"]: c for c in status["conditions"]}
    assert status["phase"] == scenario.phase, conditions
    shown = conditions["Failed" if scenario.phase == "Failed" else "Ready"]
    assert shown["status"] == "True" and shown["reason"] == scenario.reason, shown
    assert all(fragment in shown["message"] for fragment in scenario.message), shown["message"]
    assert set(scenario.events) <= set(driver.events()), driver.events()
    if scenario.phase == "Succeeded":
        check_records_match_status(status, driver.records(), overshoot_bound(driver.applied_spec()))


def overshoot_bound(spec: dict) -> int:
    """What a dataset's kept tokens end within, over its budget (docs/budgets.md): less than one
    response per replica."""
    return spec["server"]["replicas"] * max(c["maxNewTokens"] for c in spec["promptClasses"])


def check_records_match_status(status: dict, records: list[dict], bound: int | None = None) -> None:
    """No sample twice, every budget met (within `bound` tokens over it), and the status counting
    exactly what was written."""
    ids = [r["sample_id"] for r in records]
    assert len(ids) == len(set(ids)), "a sample was written twice"
    tokens: dict[str, int] = {}
    for r in records:
        assert r["completion_tokens"] == len(r["output_ids"])
        tokens[r["dataset"]] = tokens.get(r["dataset"], 0) + r["completion_tokens"]
    for d in status["datasets"]:
        assert d["state"] == "BudgetMet" and d["tokens"] >= d["budgetTokens"], d
        assert bound is None or d["tokens"] - d["budgetTokens"] < bound, (d, bound)
        assert d["tokens"] == tokens.get(d["name"], 0), d
