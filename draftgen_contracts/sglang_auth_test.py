import pytest

from draftgen_contracts.sglang_auth import allowed, bearer, key_for

API, ADMIN = "k-api", "k-admin"


@pytest.mark.parametrize("path", ["/health", "/health_generate", "/ready", "/metrics"])
def test_probes_and_metrics_are_open_whatever_the_keys(path):
    assert allowed("GET", path, None, API, ADMIN)


def test_with_both_keys_generate_takes_only_the_api_key_and_abort_only_the_admin_key():
    assert allowed("POST", "/generate", "Bearer k-api", API, ADMIN)
    assert not allowed("POST", "/generate", "Bearer k-admin", API, ADMIN)
    assert allowed("POST", "/abort_request", "Bearer k-admin", API, ADMIN)
    assert not allowed("POST", "/abort_request", "Bearer k-api", API, ADMIN)
    assert not allowed("GET", "/server_info", None, API, ADMIN) and not allowed("GET", "/ping", "k-api", API, ADMIN)


def test_an_admin_key_alone_leaves_generate_and_server_info_open_to_anyone():
    assert allowed("POST", "/generate", None, None, ADMIN) and allowed("GET", "/server_info", None, None, ADMIN)
    assert not allowed("POST", "/abort_request", None, None, ADMIN)


def test_an_api_key_alone_guards_the_admin_routes_too_and_no_key_opens_everything():
    assert allowed("POST", "/abort_request", "bearer k-api", API, None)  # the scheme in any case, as SGLang
    assert allowed("POST", "/abort_request", None, None, None)


def test_a_client_sends_the_key_each_route_takes():
    assert key_for("/abort_request", API, ADMIN) == ADMIN and key_for("/generate", API, ADMIN) == API
    assert key_for("/abort_request", API, None) == API and bearer(None) == {}
    assert bearer(API) == {"Authorization": "Bearer k-api"}
