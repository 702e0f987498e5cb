"""Root pytest configuration: the slow tier (soak and torture runs) is opt-in."""

import os

import pytest


def pytest_addoption(parser):
    parser.addoption("--slow", action="store_true", default=os.environ.get("DRAFTGEN_SLOW") == "1",
                     help="also run tests marked slow (soak and torture runs); `make test SLOW=1`")


def pytest_collection_modifyitems(config, items):
    # The tests on the local control plane last: once started it keeps about half a core busy (the
    # API server alone about 30 %), which the tests before it get back. The order is otherwise kept,
    # so the tests of a package or module stay together (their shared fixtures start once).
    items.sort(key=lambda item: "cluster" in getattr(item, "fixturenames", ()))
    if config.getoption("--slow"):
        return
    skip = pytest.mark.skip(reason="slow tier: run with `make test SLOW=1`")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
