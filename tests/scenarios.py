"""What a DatasetGeneration goes through, as one table that both executors run: the operator on the
real control plane (tests/operator/test_scenarios.py) and `draftgen run` on this machine
(tests/local_run/test_scenarios.py). A bad spec is the other shared table (tests/manifests.py).

A driver does what a user does (apply, interrupt the controller, change the spec) and reads the
DatasetGeneration's status and events; the expectations below are about those alone, so both
executors must show the same phases, reasons and messages for the same story.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from draftgen_dev.demo_assets import TEMPLATE_REFUSING_TOOL_CALLS, UNUSABLE_ROWS, model_with_template


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

    def volumes(self) -> tuple[Path, Path]:
        """The data volume's folder and the models volume's (the quickstart's model is its `tiny/`)."""


@dataclass(frozen=True)
class Scenario:
    name: str
    change: Callable[[dict], None] | None = None  # to the spec before the first apply
    prepare: Callable[[Path, Path], None] | None = None  # writes files on the volumes (data, models) first
    restart: bool = False  # kill the controller once tokens flow, then start it again
    then: Callable[[dict], None] | None = None  # a spec change once it Succeeded
    phase: str = "Succeeded"
    reason: str = "Succeeded"
    message: tuple[str, ...] = ()  # in the Failed condition's message (Failed), or Ready's
    events: tuple[str, ...] = ("BudgetsMet", "Succeeded")
    budgets: tuple[int, ...] = field(default=(1500, 1000, 1000))
    exhausted: tuple[str, ...] = ()  # datasets that run out of rows before their budget


def _missing_prompts(spec: dict) -> None:
    spec["datasets"][0]["path"] = "prompts/missing.jsonl"


def _no_such_model(spec: dict) -> None:
    spec["model"]["path"] = "no-such-model"


def _raise_first_budget(spec: dict) -> None:
    spec["datasets"][0]["budgetTokens"] *= 3


def _model(path: str) -> Callable[[dict], None]:
    return lambda spec: spec["model"].update(path=path)


def _template(folder: str, template: str | None) -> Callable[[Path, Path], None]:
    return lambda data, models: model_with_template(models / "tiny", models / folder, template)


def _without_config(data: Path, models: Path) -> None:
    shutil.rmtree(models / "no-config", ignore_errors=True)
    shutil.copytree(models / "tiny", models / "no-config", ignore=shutil.ignore_patterns("config.json"))


def _unusable_prompts(data: Path, models: Path) -> None:
    (data / "prompts" / "unusable.jsonl").write_text(UNUSABLE_ROWS)


def _prompts_unusable(spec: dict) -> None:
    spec["datasets"][1]["path"] = "prompts/unusable.jsonl"


def _tools_out_of_reach(spec: dict) -> None:
    spec["datasets"][1]["budgetTokens"] = 10_000_000


SCENARIOS = [
    # It runs to the end first, checked there as a scenario of its own ("runs to the end"), then runs
    # again with one budget raised: one run proves both.
    Scenario("runs to the end, then a raised budget", then=_raise_first_budget,
             events=("BudgetsMet", "Reopened", "Succeeded")),
    # Both are found by the preflight, before any server starts or any GPU is asked for.
    Scenario("missing input", change=_missing_prompts, phase="Failed", reason="PreflightFailed",
             message=("missing.jsonl", "no such file"), events=("PreflightFailed",)),
    Scenario("failing stage", change=_no_such_model, phase="Failed", reason="PreflightFailed",
             message=("PodFailurePolicy", "no-such-model", "no such directory"), events=("PreflightFailed",)),
    Scenario("model folder without config.json", prepare=_without_config, change=_model("no-config"), phase="Failed",
             reason="PreflightFailed", message=("no-config/config.json", "not found"), events=("PreflightFailed",)),
    Scenario("tokenizer without a chat template", prepare=_template("no-template", None), change=_model("no-template"),
             phase="Failed", reason="PreflightFailed", message=("no-template", "no chat template"),
             events=("PreflightFailed",)),
    Scenario("template failing on tool calls", prepare=_template("no-tools", TEMPLATE_REFUSING_TOOL_CALLS),
             change=_model("no-tools"), phase="Failed", reason="PreflightFailed",
             message=("tools.jsonl: row 3: messages", "tool calls are not supported"), events=("PreflightFailed",)),
    Scenario("no usable row", prepare=_unusable_prompts, change=_prompts_unusable, phase="Failed",
             reason="PreflightFailed", message=("unusable.jsonl", "no usable row in 2 (bad_json 1, no_user_turn 1)"),
             events=("PreflightFailed",)),
    # A warning, not a failure: the run goes on and the dataset ends Exhausted.
    Scenario("budget out of reach", change=_tools_out_of_reach, exhausted=("tools",),
             events=("BudgetOutOfReach", "BudgetsMet", "Succeeded")),
    Scenario("resume after the controller died", restart=True, budgets=(4000, 2000, 2000)),
]


def play(scenario: Scenario, driver: Driver) -> None:
    """Run one scenario with one executor and check what the object says."""
    start(scenario, driver)
    if scenario.restart:
        driver.wait_for_tokens()
        driver.restart_controller()
    status = driver.wait_done()
    if scenario.then is not None:
        check(Scenario("runs to the end", budgets=scenario.budgets), status, driver)
        driver.apply(scenario.then)
        status = driver.wait_done()
    check(scenario, status, driver)


def start(scenario: Scenario, driver: Driver) -> None:
    """Its files on the volumes, then the object applied."""
    if scenario.prepare is not None:
        scenario.prepare(*driver.volumes())
    driver.apply(lambda spec: _set_budgets(spec, scenario.budgets, scenario.change))


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
        check_records_match_status(status, driver.records(), overshoot_bound(driver.applied_spec()),
                                   exhausted=scenario.exhausted)
    reach = conditions.get("BudgetsReachable")
    if scenario.exhausted:
        assert reach["status"] == "False" and reach["reason"] == "BudgetOutOfReach", reach
        assert all(f"{name}: its rows ran out at" in reach["message"] for name in scenario.exhausted), reach
    elif reach is not None and scenario.phase == "Succeeded":
        assert reach["status"] == "True", reach


def overshoot_bound(spec: dict) -> int:
    """What a dataset's kept tokens end within, over its budget (docs/budgets.md): cutting at the
    budget, nothing (every replica keeps exactly its share); aborting, or with existing traces
    (written whole: they cost no GPU time), less than one response per replica."""
    if spec.get("atBudget", "cut") == "cut" and all(d.get("kind", "prompts") == "prompts" for d in spec["datasets"]):
        return 1
    return spec["server"]["replicas"] * max(c["maxNewTokens"] for c in spec["promptClasses"])


def check_records_match_status(status: dict, records: list[dict], bound: int | None = None,
                               exhausted: tuple[str, ...] = ()) -> None:
    """No sample twice, every budget met (within `bound` tokens over it) but those of the datasets
    `exhausted` (which ran out of rows below it), and the status counting exactly what was written."""
    ids = [r["sample_id"] for r in records]
    assert len(ids) == len(set(ids)), "a sample was written twice"
    tokens: dict[str, int] = {}
    for r in records:
        assert r["completion_tokens"] == len(r["output_ids"])
        tokens[r["dataset"]] = tokens.get(r["dataset"], 0) + r["completion_tokens"]
    for d in status["datasets"]:
        if d["name"] in exhausted:
            assert d["state"] == "Exhausted" and 0 < d["tokens"] < d["budgetTokens"], d
        else:
            assert d["state"] == "BudgetMet" and d["tokens"] >= d["budgetTokens"], d
        assert bound is None or d["tokens"] - d["budgetTokens"] < bound, (d, bound)
        assert d["tokens"] == tokens.get(d["name"], 0), d
