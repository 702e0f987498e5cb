"""Root pytest configuration: the slow tier (soak and torture runs) is opt-in; the tests that share
a costly fixture are grouped, so that with pytest-xdist (`make test`) one worker starts it, once."""

import os
import time

import pytest


def pytest_addoption(parser):
    parser.addoption("--slow", action="store_true", default=os.environ.get("DRAFTGEN_SLOW") == "1",
                     help="also run tests marked slow (soak and torture runs); `make test SLOW=1`")


REAL_SGLANG_TIER = "tests/real_sglang/"  # its package-scoped server (tests/real_sglang/conftest.py)


def shared_fixture_group(item) -> str:
    """The tests a test must run beside, in one worker, so that the costly fixture they share starts
    once: the real SGLang server (its package's), else the test's module (its module-scoped fixtures:
    a quickstart run, a trainer's packages, a chart release). The control plane is one for the whole
    run, shared by the workers (tests/conftest.py), so its tests need no group of their own, but
    those that hold it alone are one group."""
    if item.nodeid.startswith(REAL_SGLANG_TIER):
        return "real-sglang"
    if item.get_closest_marker("cluster_alone"):  # one after the other on one worker: see hand_out_order
        return "cluster-alone"
    return item.nodeid.split("::", 1)[0]


# First: pytest-xdist's worker (3.8) turns the xdist_group marks into nodeid suffixes in this same hook,
# and as a plugin registered after this conftest it runs first unless this one says so (measured: the
# groups were ignored, and both workers started the control plane and the real servers).
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    # The units (groups) in the order xdist hands them out (`make test` passes --no-loadscope-reorder):
    # each group's tests stay together, so its fixtures start once.
    first = {}
    for item in items:
        group = shared_fixture_group(item)
        first[group] = min(first.get(group, 4), hand_out_order(item))
    items.sort(key=lambda item: first[shared_fixture_group(item)])
    for item in items:
        item.add_marker(pytest.mark.xdist_group(shared_fixture_group(item)))
    if config.getoption("--slow"):
        return
    skip = pytest.mark.skip(reason="slow tier: run with `make test SLOW=1`")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


# Whole pipelines that need no control plane (the trainers on their exports, `draftgen run`): long
# units a worker can run while the modules that hold the control plane alone keep the others out.
OFF_THE_CONTROL_PLANE = ("tests/trainers/", "tests/local_run/")


def hand_out_order(item) -> int:
    """Which units go first: the modules that hold the control plane alone, one unit, at the start; the
    real servers' tier; the long pipelines off the control plane, which the third worker runs while
    the first holds the control plane alone (measured: it waited 150 s for its turn when it took a
    control-plane module instead); the modules on the control plane; then the many short ones, which
    even out the workers' ends. The order keeps the tail short and no worker waiting (docs/testing.md)."""
    if item.get_closest_marker("cluster_alone"):
        return 0
    if item.nodeid.startswith(REAL_SGLANG_TIER):
        return 1
    if item.nodeid.startswith(OFF_THE_CONTROL_PLANE) and "cluster" not in getattr(item, "fixturenames", ()):
        return 2
    if "cluster" in getattr(item, "fixturenames", ()):
        return 3
    return 4


SESSION_STARTED = time.time()


def pytest_sessionfinish(session):
    """The run's one control plane is stopped by the process that ran no test of its own (xdist's
    controller), or by the only one, once every test has ended (tests/conftest.py)."""
    if not hasattr(session.config, "workerinput"):
        from tests.conftest import stop_control_plane
        stop_control_plane(session)


def pytest_terminal_summary(terminalreporter):
    """The last lines of the containers that failed on a failed session's control plane (tests/conftest.py
    keeps them with its logs; the workers' own output is not shown): CI's output is all one sees."""
    from tests.conftest import FAILED_CONTAINERS, LOGS_ON_FAILURE

    for said in sorted(LOGS_ON_FAILURE.glob(f"*/{FAILED_CONTAINERS}")):
        if said.stat().st_mtime >= SESSION_STARTED and said.read_text().strip():
            terminalreporter.section(f"containers that failed on the control plane ({said.parent.name})")
            terminalreporter.write_line(said.read_text())
