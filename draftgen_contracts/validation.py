"""pydantic validation errors as the field paths a user wrote ("spec.datasets[0].budgetTokens")."""

from __future__ import annotations

from pydantic import ValidationError


def field_path(loc: tuple) -> str:
    """A pydantic error location as a YAML path: ("datasets", 0, "budgetTokens") -> datasets[0].budgetTokens."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def error_lines(e: ValidationError, prefix: str) -> list[str]:
    """One line per error: "<prefix>.<path>: <message>" (just the prefix at the top level)."""
    return [f"{prefix}.{field_path(err['loc'])}: {err['msg']}" if err["loc"] else f"{prefix}: {err['msg']}"
            for err in e.errors()]
