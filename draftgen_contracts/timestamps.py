"""The one timestamp format of status fields, conditions and events (RFC 3339, UTC, seconds)."""

from __future__ import annotations

import datetime as dt


def utc_now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
