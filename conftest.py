"""Root pytest configuration: the slow tier (soak and torture runs) is opt-in."""

import os

import pytest


def pytest_addoption(parser):
    parser.addoption("--slow", action="store_true", default=os.environ.get("DRAFTGEN_SLOW") == "1",
                     help="also run tests marked slow (soak and torture runs); `make test SLOW=1`")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--slow"):
        return
    skip = pytest.mark.skip(reason="slow tier: run with `make test SLOW=1`")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
