"""The generation servers' keys: one pair per run, in a Secret the run owns
(docs/security.md#the-servers-keys).

Why both keys: with an admin key alone SGLang 0.5.23 leaves `/generate` and `/server_info` open to
anyone, and `/server_info` answers the admin key in clear; with both, every route but probes and
metrics takes a key, the admin routes (an `abort_all`, `/pause_generation`, weight updates) only the
admin key (draftgen_contracts.sglang_auth). The server reads them from the Secret mounted as a file,
with its own `--config`: the values are in neither the pod spec nor the process's arguments.

Keys a user sets in `spec.server.args` win: draftgen then mounts none and hands `jobrunner generate`
the user's values (they are in the spec in clear already).
"""

from __future__ import annotations

import secrets

from draftgen_contracts import names
from draftgen_contracts.sglang_auth import ADMIN_API_KEY_ENV, API_KEY_ENV, ServerKeys

KEY_FLAGS = {"--api-key": "api_key", "--admin-api-key": "admin_api_key"}
KEY_BYTES = 32  # of randomness per key (secrets.token_urlsafe: 43 characters)
# Every key starts with a letter: SGLang turns each line of its --config file into `--api-key VALUE`
# and parses that again (srt/utils/server_args_config_parser.py, 0.5.23), so a value that starts with
# "-" (one token_urlsafe in 64) is read as a flag: "argument --api-key: expected one argument", and
# the server exits. Seen once in `make test` (the real-SGLang pipeline on the control plane).
KEY_PREFIX = "k"


def user_keys(server_args: list[str]) -> ServerKeys | None:
    """The keys `spec.server.args` set itself (`--api-key K` or `--api-key=K`), or None when it sets none."""
    found: dict[str, str] = {}
    for i, arg in enumerate(server_args):
        flag, eq, value = arg.partition("=")
        if flag in KEY_FLAGS:
            found[KEY_FLAGS[flag]] = value if eq else (server_args[i + 1] if i + 1 < len(server_args) else "")
    return ServerKeys(**found) if found else None


def fresh_keys() -> ServerKeys:
    return ServerKeys(KEY_PREFIX + secrets.token_urlsafe(KEY_BYTES), KEY_PREFIX + secrets.token_urlsafe(KEY_BYTES))


def keys_secret(name: str, labels: dict[str, str]) -> dict:
    """The run's Secret without its values: whoever creates it fills them (`filled`), once."""
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": names.keys_secret_name(name), "labels": labels}}


def filled(secret: dict, keys: ServerKeys) -> dict:
    """The Secret with its keys: each alone for `jobrunner generate`, and both as SGLang's config file."""
    return {**secret, "stringData": {
        names.API_KEY_SECRET_KEY: keys.api_key, names.ADMIN_API_KEY_SECRET_KEY: keys.admin_api_key,
        names.KEYS_CONFIG_FILE: f"api-key: {keys.api_key}\nadmin-api-key: {keys.admin_api_key}\n"}}


def server_key_args(server_args: list[str]) -> list[str]:
    """What the server's command gets to read the run's keys (nothing when the user set their own)."""
    return [] if user_keys(server_args) else ["--config", f"{names.KEYS_MOUNT}/{names.KEYS_CONFIG_FILE}"]


def client_key_env(name: str, server_args: list[str]) -> list[dict]:
    """`jobrunner generate`'s variables for the keys: from the run's Secret, or the user's own values."""
    mine = user_keys(server_args)
    if mine:
        return [{"name": env, "value": value} for env, value in
                ((API_KEY_ENV, mine.api_key), (ADMIN_API_KEY_ENV, mine.admin_api_key)) if value]
    secret = names.keys_secret_name(name)
    return [{"name": env, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}
            for env, key in ((API_KEY_ENV, names.API_KEY_SECRET_KEY), (ADMIN_API_KEY_ENV, names.ADMIN_API_KEY_SECRET_KEY))]


def keys_volume(name: str) -> dict:
    """The Secret's config file alone, for the server container (read-only)."""
    return {"name": "server-keys", "secret": {"secretName": names.keys_secret_name(name), "defaultMode": 0o444,
                                               "items": [{"key": names.KEYS_CONFIG_FILE,
                                                          "path": names.KEYS_CONFIG_FILE}]}}


def endpoint_key_env(endpoint) -> list[dict]:
    """`jobrunner generate`'s variables for a server that already runs: from the Secrets its spec names."""
    return [{"name": env, "valueFrom": {"secretKeyRef": ref.manifest()}}
            for env, ref in ((API_KEY_ENV, endpoint.api_key), (ADMIN_API_KEY_ENV, endpoint.admin_api_key)) if ref]
