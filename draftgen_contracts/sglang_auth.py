"""Who may call which SGLang route: SGLang 0.5.23's rules, restated for the simulator and the client
(docs/security.md#the-servers-keys).

SGLang (`python/sglang/srt/utils/auth.py` `decide_request_auth`, 0.5.23) gives each route a level:
- `/health*`, `/ready*`, `/metrics*` (by prefix) and OPTIONS: always open, so probes and Prometheus
  need no key;
- admin routes (`@auth_level(AuthLevel.ADMIN_OPTIONAL)` in `srt/entrypoints/http_server.py`: among
  them `/abort_request`, `/pause_generation`, `/continue_generation`, `/flush_cache`,
  `/update_weights_from_disk`, `/set_internal_state`): with an admin key set, only the admin key
  opens them (the API key does not); with only an API key, the API key; with neither, anyone;
- every other route (`/generate`, `/v1/*`, `/server_info`, `/get_model_info`, `/ping`): with an API
  key set, the API key only (not the admin key); otherwise anyone, also when only an admin key is set.
A refusal is 401 `{"error": "Unauthorized"}` (403 `{"error": "Forbidden"}` for routes that force an
admin key when none is set; the simulator serves none of those).
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field

OPEN_PREFIXES = ("/health", "/ready", "/metrics")
# The admin routes among those the simulator serves or draftgen calls.
ADMIN_ROUTES = frozenset({"/abort_request", "/pause_generation", "/continue_generation", "/flush_cache",
                          "/update_weights_from_disk", "/set_internal_state"})
UNAUTHORIZED_STATUS = 401
UNAUTHORIZED_BODY = {"error": "Unauthorized"}


# How the generation pod's `jobrunner generate` gets the keys: variables from the run's Secret.
API_KEY_ENV = "DRAFTGEN_SERVER_API_KEY"
ADMIN_API_KEY_ENV = "DRAFTGEN_SERVER_ADMIN_API_KEY"


@dataclass(frozen=True)
class ServerKeys:
    """The keys a client holds for one server; never printed (repr hides them)."""

    api_key: str | None = field(default=None, repr=False)
    admin_api_key: str | None = field(default=None, repr=False)

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> ServerKeys:
        return cls(environ.get(API_KEY_ENV) or None, environ.get(ADMIN_API_KEY_ENV) or None)

    def values(self) -> list[str]:
        return [k for k in (self.api_key, self.admin_api_key) if k]


def bearer(key: str | None) -> dict[str, str]:
    """The header that carries a key (none without one)."""
    return {"Authorization": f"Bearer {key}"} if key else {}


def key_for(path: str, api_key: str | None, admin_key: str | None) -> str | None:
    """The key a client sends to `path` of a server started with these keys."""
    if path in ADMIN_ROUTES:
        return admin_key or api_key
    return api_key


def allowed(method: str, path: str, authorization: str | None, api_key: str | None, admin_key: str | None) -> bool:
    """Whether SGLang 0.5.23 lets this request through."""
    if method == "OPTIONS" or path.startswith(OPEN_PREFIXES):
        return True
    needed = key_for(path, api_key, admin_key)
    if not needed:
        return True
    scheme, _, token = (authorization or "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(token.encode(), needed.encode())
