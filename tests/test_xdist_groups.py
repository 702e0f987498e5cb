"""The groups the root conftest gives tests reach pytest-xdist (`make test`'s two workers): without
them both workers would start the control plane and every real server."""

import os

import pytest


def test_under_make_tests_workers_a_test_carries_its_group(request):
    if not os.environ.get("PYTEST_XDIST_WORKER") or not request.config.getvalue("loadgroup"):
        pytest.skip("only under pytest-xdist with --dist loadgroup (make test)")
    assert request.node.nodeid.endswith("@tests/test_xdist_groups.py"), request.node.nodeid
