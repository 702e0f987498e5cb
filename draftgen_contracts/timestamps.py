"""The one timestamp format of status fields, conditions and events (RFC 3339, UTC, seconds)."""

from __future__ import annotations

import datetime as dt

FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def utc_now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime(FORMAT)


def iso_after(timestamp: str, seconds: float) -> str:
    """The timestamp `seconds` after `timestamp`, in the same format."""
    return (dt.datetime.strptime(timestamp, FORMAT) + dt.timedelta(seconds=seconds)).strftime(FORMAT)


def iso_of(unix_seconds: float) -> str:
    """A writer's wall-clock time (Unix seconds, as reports carry it) in the same format."""
    return dt.datetime.fromtimestamp(unix_seconds, dt.timezone.utc).strftime(FORMAT)
