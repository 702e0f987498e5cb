"""Whether a server that already runs (spec.server.endpoint) serves the model the spec names: its
`/v1/models` (SGLang answers its `--served-model-name`, by default its `--model-path`) against the
name the spec expects, before any row is sent. A server of another model would take every prompt
and answer it: the corpus would train a drafter for the wrong target."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

from draftgen_contracts.sglang_auth import ServerKeys, bearer

from .problem import PreflightProblem

REACH_TIMEOUT_S = 60.0  # a server restarting behind its Service answers within this, or is said to be down
POLL_S = 2.0


def serves(served: list[str], wanted: str) -> bool:
    """A served name matches the wanted one whole, or by its last path component (a --model-path)."""
    return any(name == wanted or name.rstrip("/").rsplit("/", 1)[-1] == wanted for name in served)


def served_models(url: str, keys: ServerKeys, timeout_s: float = REACH_TIMEOUT_S) -> list[str]:
    """The ids of GET {url}/v1/models; PreflightProblem when the server cannot be reached in time or
    refuses the key."""
    deadline, last = time.monotonic() + timeout_s, ""
    request = urllib.request.Request(url.rstrip("/") + "/v1/models", headers=bearer(keys.api_key))
    while True:
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                return [str(card.get("id")) for card in json.load(answer).get("data", [])]
        except urllib.error.HTTPError as e:
            if e.code in (401, 403):
                raise PreflightProblem(f"{url}/v1/models", f"answered {e.code}: the server takes an API key; name "
                                       "its Secret in server.endpoint.apiKey") from e
            last = f"answered {e.code}"
        except (OSError, ValueError) as e:
            last = f"{type(e).__name__}: {e}"
        if time.monotonic() >= deadline:
            raise PreflightProblem(f"{url}/v1/models", f"no answer in {timeout_s:.0f} s (last: {last})")
        time.sleep(POLL_S)


def check_served_model(url: str, wanted: str, keys: ServerKeys) -> None:
    served = served_models(url, keys)
    if not serves(served, wanted):
        raise PreflightProblem(f"{url}/v1/models", f"the server serves {served}, not {wanted!r} (spec.model.path, or "
                               "server.endpoint.servedModelName): a corpus from another model trains the wrong drafter")
