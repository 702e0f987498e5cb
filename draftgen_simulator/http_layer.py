"""What SGLang's HTTP layer refuses before its request schema sees a /generate body.

FastAPI validates the body as the dataclass `GenerateReqInput` (srt/managers/io_struct.py) with
pydantic in lax mode, and answers a failure in the error-object shape with `type` "Bad Request".
Lax mode coerces: "true", "yes", 1 pass as a bool and "3" or 3.0 as an int, and only then does the
stricter request schema (docs/sglang.md#the-request-validator) refuse them in the flat shape. A
value lax mode cannot coerce (a number for a string, "maybe" for a bool, 1.5 for an int) never
reaches the schema. Measured on the real server by tests/real_sglang/probes.py `top_level_types`.
"""

from __future__ import annotations

from typing import Any

from draftgen_contracts.sglang_protocol import REQUEST_FIELD_KINDS, every

# pydantic's lax str -> bool table (pydantic-core `bool` validator).
BOOL_STRINGS = frozenset({"0", "off", "f", "false", "n", "no", "1", "on", "t", "true", "y", "yes"})


def coerces_to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return True
    if isinstance(value, (int, float)):
        return value in (0, 1)
    return isinstance(value, str) and value.strip().lower() in BOOL_STRINGS


def coerces_to_int(value: Any) -> bool:
    if isinstance(value, int):
        return True
    if isinstance(value, float):
        return value.is_integer()
    if isinstance(value, str):
        try:
            int(value.strip())
            return True
        except ValueError:
            return False
    return False


LAX_CHECKS = {
    "str": lambda v: isinstance(v, str),
    "str_or_str_list": lambda v: isinstance(v, str) or every(v, lambda x: isinstance(x, str)),
    "bool": coerces_to_bool,
    "bool_or_bool_list": lambda v: coerces_to_bool(v) or every(v, coerces_to_bool),
    "int": coerces_to_int,
    "uint": coerces_to_int,
    "int_or_int_list": lambda v: coerces_to_int(v) or every(v, coerces_to_int),
    "str_dict": lambda v: isinstance(v, dict) and all(isinstance(x, str) for x in v.values()),
}


def http_layer_problem(body: dict[str, Any]) -> str | None:
    """The first field of a /generate body that FastAPI's lax validation refuses, None if none."""
    for key, kind in REQUEST_FIELD_KINDS.items():
        value = body.get(key)
        if value is not None and not LAX_CHECKS[kind](value):
            return f"1 validation error: ('body', '{key}'): Input should be a valid {kind.replace('_', ' ')}"
    params = body.get("sampling_params")
    if params is not None and not isinstance(params, dict) and not every(params, lambda p: isinstance(p, dict)):
        return "1 validation error: ('body', 'sampling_params'): Input should be a valid dictionary or list"
    return None
