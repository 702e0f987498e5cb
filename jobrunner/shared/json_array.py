"""A JSON array file's elements, one at a time, in bounded memory (docs/security.md#hostile-inputs).

The file is never parsed whole: a scanner finds where each element ends (brackets counted outside
strings, escapes followed) reading the file in chunks, and holds an element's bytes only up to a
limit; an element longer than that is read past and given as its length. The element's bytes are
then decoded on their own, like a line of JSON Lines.

An array that breaks off (the file cut short) ends with its unfinished element as text that does not
parse; text after the array's closing bracket comes out as one more element that does not parse.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import BinaryIO

# Outside strings: what opens or closes a value, ends an element, or starts a string; inside an
# element a comma ends nothing (a list of token ids is not looked at number by number).
_STRUCTURE = re.compile(rb'[\[\]{},"]')
_NESTED = re.compile(rb'[\[\]{}"]')
# Inside a string: its end, or an escape (whose next byte is never its end).
_IN_STRING = re.compile(rb'["\\]')
_SPACE = b" \t\r\n"


class ArrayRefused(ValueError):
    """The file does not start with a JSON array."""


class _Element:
    """One element's bytes so far, held up to `limit` (beyond it only counted)."""

    def __init__(self, limit: int):
        self.limit = limit
        self.parts: list[bytes] = []
        self.length = 0

    def add(self, data: bytes) -> None:
        if self.length + len(data) <= self.limit:
            self.parts.append(data)
        else:
            self.parts = []
        self.length += len(data)

    def take(self) -> bytes | int:
        """The element's bytes, or its length when it was longer than the limit."""
        data = b"".join(self.parts) if self.length <= self.limit else self.length
        self.parts, self.length = [], 0
        return data


class _Scanner:
    """Where each element of the array ends, one chunk at a time. A chunk's bytes go to the element
    in at most a few slices (never one per token: a deeply nested element is millions of tokens)."""

    def __init__(self, limit: int):
        self.element = _Element(limit)
        self.depth = 1  # 1 inside the array, more inside an element
        self.in_string = False
        self.escaped = False  # a chunk ended on a backslash inside a string
        self.closed = False  # the array's `]` was seen: what follows is text after it

    def feed(self, chunk: bytes) -> Iterator[bytes | int]:
        position = mark = 0  # mark: where the bytes not yet given to the element start
        while position < len(chunk) and not self.closed:
            if self.escaped:  # the escaped byte, whatever it is
                position, self.escaped = position + 1, False
                continue
            pattern = _IN_STRING if self.in_string else _STRUCTURE if self.depth == 1 else _NESTED
            match = pattern.search(chunk, position)
            if match is None:
                break
            at, token = match.start(), chunk[match.start():match.end()]
            position = at + 1
            if self.in_string:
                self.escaped, self.in_string = token == b"\\", token == b"\\"
            elif self.depth == 1 and token in (b",", b"]"):
                self.element.add(chunk[mark:at])
                yield from self.finish()
                mark, self.closed = position, token == b"]"
            else:
                self.in_string = token == b'"'
                self.depth += 1 if token in b"[{" else -1 if token in b"]}" else 0
        self.element.add(chunk[mark:])

    def finish(self) -> Iterator[bytes | int]:
        """The element so far, unless it is only white space (the end of `[]`, or of a file)."""
        data = self.element.take()
        if not isinstance(data, bytes) or data.strip(_SPACE):
            yield data


def array_elements(f: BinaryIO, limit: int, chunk: int = 1 << 20) -> Iterator[bytes | int]:
    """Each element of the JSON array in `f` as its bytes, or as its length when over `limit` bytes
    (read past in chunks, never held whole); ArrayRefused when `f` holds no array."""
    head = f.read(max(chunk, 4096)).removeprefix(b"\xef\xbb\xbf").lstrip(_SPACE)  # what sniff_format looks at
    if not head.startswith(b"["):
        raise ArrayRefused("not a JSON array: it does not start with [")
    scanner = _Scanner(limit)
    yield from scanner.feed(head[1:])
    while data := f.read(chunk):
        yield from scanner.feed(data)
    yield from scanner.finish()
