"""kstatus-style conditions: one entry per type, lastTransitionTime moving only when status moves."""

from __future__ import annotations

from .api import Condition


def set_condition(conditions: list[Condition], type_: str, status: bool, reason: str, message: str, now: str,
                  generation: int | None) -> list[Condition]:
    value = "True" if status else "False"
    old = next((c for c in conditions if c.type == type_), None)
    since = old.last_transition_time if old is not None and old.status == value else now
    new = Condition(type=type_, status=value, reason=reason, message=message, last_transition_time=since,
                    observed_generation=generation)
    return [c for c in conditions if c.type != type_] + [new] if old is None else \
        [new if c.type == type_ else c for c in conditions]


def condition(conditions: list[Condition], type_: str) -> Condition | None:
    return next((c for c in conditions if c.type == type_), None)
