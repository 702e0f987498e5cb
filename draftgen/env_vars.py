"""Kubernetes `$(VAR)` expansion, as the kubelet applies it to a container's command, args and env
values (k8s.io/kubernetes third_party/forked/golang/expansion: a known var is replaced, an unknown
one kept as written, `$$` is a literal `$`)."""

from __future__ import annotations

import re

_VAR_REF = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)|\$\$")


def expand_vars(text: str, env: dict[str, str]) -> str:
    def repl(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1), m.group(0))
    return _VAR_REF.sub(repl, text)
