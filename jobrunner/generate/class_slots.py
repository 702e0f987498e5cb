"""Whether a prompt may take a slot of its class: the class's own concurrency, or memory that a
class with nothing left to send lends it. Pure.

A class's concurrency bounds its requests' KV cache: long prompts run fewer at a time because each
may hold a whole context. When no dataset of this process may still send prompts of a class, its
free slots are memory nobody will use, and at the end of a run they are most of the server: the
bench's SWE prompts (the long class, 32 in flight) were made alone for the last tenth of the run with
the 150 short slots empty. So a class may go past its concurrency while the worst-case KV of
everything in flight, each request at its class's longest sequence, stays within what the table
allows when every class is full: no more memory is ever asked of the server than the table's own
worst case.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from draftgen_contracts.prompt_classes import PromptClass


def footprint(cls: PromptClass, context_length: int) -> int:
    """The longest sequence a request of the class may hold: its longest prompt and response."""
    return min(context_length, (cls.max_prompt_tokens or context_length) + cls.max_new_tokens)


def may_take_slot(cls: PromptClass, classes: Mapping[str, PromptClass], in_flight: Mapping[str, int],
                  idle_classes: Collection[str], context_length: int) -> bool:
    """Whether one more request of `cls` may be sent: under its concurrency, or past it on the memory
    of `idle_classes` (classes no dataset may still send to) while the worst case stays within the
    table's (the sum over classes of concurrency x footprint)."""
    if in_flight.get(cls.name, 0) < cls.concurrency:
        return True
    if any(c.name not in idle_classes and in_flight.get(c.name, 0) < c.concurrency
           for c in classes.values() if c.name != cls.name):
        return False  # a class that may still send has free slots of its own: nothing is lent yet
    allowed = sum(c.concurrency * footprint(c, context_length) for c in classes.values())
    used = sum(in_flight.get(c.name, 0) * footprint(c, context_length) for c in classes.values())
    return used + footprint(cls, context_length) <= allowed
