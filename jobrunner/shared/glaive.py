"""Glaive function-calling rows (glaiveai/glaive-function-calling-v2) as OpenAI messages and tools.

A row is {"system": "SYSTEM: <prompt> -\n{function}\n{function}...", "chat": "USER: ...\n\n\nASSISTANT:
<functioncall> {...} <|endoftext|>\n\n\nFUNCTION RESPONSE: {...}\n\n\nASSISTANT: ... <|endoftext|>"}.
Each function object in the system text becomes a tool {"type": "function", "function": {...}}, the
text before them the system turn; a `<functioncall>` an assistant turn's tool call, its `arguments`
parsed (the dataset writes them as a single-quoted JSON string, which is no JSON as a whole); a
FUNCTION RESPONSE a tool turn. A row that cannot be read this way faithfully is `unconvertible`.
"""

from __future__ import annotations

import json
import re
from typing import Any

from jobrunner.shared.row_error import RowError

_TURN = re.compile(r"(?:\A\s*|\n{2,})(USER|ASSISTANT|FUNCTION RESPONSE):[ \t]?")
_ROLES = {"USER": "user", "ASSISTANT": "assistant", "FUNCTION RESPONSE": "tool"}
_END = "<|endoftext|>"
_CALL = "<functioncall>"
# {"name": "f", "arguments": '{...}'}: the arguments a single-quoted string holding JSON.
_QUOTED_CALL = re.compile(r"""\A\s*\{\s*"name"\s*:\s*"([^"\\]+)"\s*,\s*"arguments"\s*:\s*'(.*)'\s*\}\s*\Z""", re.S)


def is_glaive(obj: dict) -> bool:
    return isinstance(obj.get("chat"), str) and obj.get("messages") is None and obj.get("conversations") is None


def glaive_conversation(obj: dict) -> tuple[list[dict], list[dict] | None]:
    """The row's messages (its system turn first when it has one) and its tools."""
    system, tools = _system_and_tools(obj.get("system") or "")
    turns = [{"role": "system", "content": system}] if system else []
    return turns + _chat_turns(obj["chat"]), tools or None


def _system_and_tools(text: Any) -> tuple[str, list[dict]]:
    if not isinstance(text, str):
        raise RowError("unconvertible", "glaive: system is not text")
    text = text.strip().removeprefix("SYSTEM:").strip()
    start = text.find("{")
    if start < 0:
        return text, []
    prompt, tools, decoder, at = text[:start].strip(), [], json.JSONDecoder(), start
    while at < len(text):
        try:
            function, at = decoder.raw_decode(text, at)
        except ValueError:
            raise RowError("unconvertible", f"glaive: a function in the system text does not parse at {at}") from None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise RowError("unconvertible", "glaive: a function in the system text has no name")
        tools.append({"type": "function", "function": function})
        at = len(text) - len(text[at:].lstrip())
    return prompt, tools


def _chat_turns(chat: str) -> list[dict]:
    parts = _TURN.split(chat)
    if parts[0].strip():
        raise RowError("unconvertible", f"glaive: text before the first turn: {parts[0][:80]!r}")
    turns = []
    for marker, text in zip(parts[1::2], parts[2::2]):
        text = text.strip().removesuffix(_END).strip()
        role = _ROLES[marker]
        turns.append(_assistant_turn(text) if role == "assistant" else {"role": role, "content": text})
    if not turns:
        raise RowError("empty", "glaive: no turns in chat")
    return turns


def _assistant_turn(text: str) -> dict:
    if _CALL not in text:
        return {"role": "assistant", "content": text}
    before, call = text.split(_CALL, 1)
    return {"role": "assistant", "content": before.strip() or None, "tool_calls": [_tool_call(call)]}


def _tool_call(text: str) -> dict:
    """A `<functioncall>`'s JSON: its arguments an object, a JSON string, or a single-quoted one."""
    try:
        call = json.loads(text)
        name, arguments = call["name"], call.get("arguments", {})
    except (ValueError, TypeError, KeyError):
        match = _QUOTED_CALL.match(text)
        if match is None:
            raise RowError("unconvertible", f"glaive: a function call does not parse: {text[:80]!r}") from None
        name, arguments = match[1], match[2].replace("\\'", "'")
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            raise RowError("unconvertible", f"glaive: the arguments of {name} do not parse") from None
    if not isinstance(name, str) or not isinstance(arguments, dict):
        raise RowError("unconvertible", "glaive: a function call needs a name and an object of arguments")
    return {"type": "function", "function": {"name": name, "arguments": arguments}}
