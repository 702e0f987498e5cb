"""The CRD's own CEL rules evaluated in Python, for `draftgen run`: the text the API server runs is
the one definition of each rule (draftgen.admission), not a restatement of it.

The library is `common-expression-language` 0.10.0 (the Rust `cel` crate). bench/cel_libraries.py
measured it and `cel-python` 0.5.0 against the API server itself on the differential admission
test's specs (734 whose field types hold, 309 refused by a rule): both gave the API server's verdict
for all 18 spec rules on every spec; this one took 0.3-0.7 ms an evaluation, cel-python 1.1-7.9 ms
(and it cannot convert an integer beyond 64 bits, which the API server refuses by type first).

Kubernetes' CEL environment adds libraries a plain CEL runtime lacks (k8s.io/apiserver pkg/cel/library;
cel-go's extensions). The rules use two, given to the library here as Python functions, the only
place a rule's meaning is restated:
- `isQuantity` (Kubernetes' quantity library: apimachinery's ParseQuantity): QUANTITY;
- `string.split` (cel-go's strings extension): str.split.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import cel

# A Kubernetes quantity as isQuantity takes it (k8s.io/apimachinery pkg/api/resource quantity.go,
# parseQuantityString): a sign, a decimal number, then a binary or decimal SI suffix or an exponent;
# the number may be empty ("we stripped all numerator positions, always return 0"), so "Gi", "m", "."
# and "+" are quantities (0), while "" and "1e" are not (measured on kube-apiserver 1.36 by the
# differential admission test).
QUANTITY = re.compile(r"^(?=.)[+-]?\d*(\.\d*)?(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?\Z")


def is_quantity(text: str) -> bool:
    return bool(QUANTITY.match(text))


def split(text: str, separator: str) -> list[str]:
    return text.split(separator)


@functools.cache
def _program(rule: str) -> cel.Program:
    return cel.compile(rule)


def rule_checker(**variables: Any):
    """`holds(rule)` for rules over these variables (`self`, and `oldSelf` for a transition rule), as
    JSON values; an evaluation error is a refusal, as the API server refuses when a rule fails."""
    context = cel.Context()
    context.add_function("isQuantity", is_quantity)
    context.add_function("split", split)
    for name, value in variables.items():
        context.add_variable(name, value)

    def holds(rule: str) -> bool:
        try:
            return _program(rule).execute(context) is True
        except (KeyError, RuntimeError, TypeError, ValueError):
            return False
    return holds
