"""What `make demo` shows while its run goes: a line for each change a user would look up (the
phase, a dataset's state, a pod's phase and node, a pod gone), and the tokens as one line that
updates in place on a terminal; in a log, where nothing updates in place, a tokens line at each
quarter of the budget. Never the whole block again each second."""

from __future__ import annotations

from typing import TextIO

CLEAR_LINE = "\r\033[K"


def facts(status: dict, pods: list) -> dict[str, str]:
    """What the demo says changes of, each under a name of its own."""
    said = {"phase": status.get("phase") or "Pending"}
    for dataset in status.get("datasets") or []:
        said[f"dataset {dataset['name']}"] = dataset.get("state") or "-"
    for pod in pods:
        where = f" on {pod.spec.node_name}" if pod.spec.node_name else ""
        said[f"pod {pod.metadata.name}"] = f"{pod.status.phase}{where}"
    return said


def what_changed(before: dict[str, str], now: dict[str, str]) -> list[str]:
    """One line per fact that is new or changed, and per pod that is gone, in the order of `now`."""
    lines = [f"{name}: {value}" if name not in before else f"{name}: {before[name]} -> {value}"
             for name, value in now.items() if before.get(name) != value]
    return lines + [f"{name}: gone" for name in before if name not in now and name.startswith("pod ")]


def tokens_line(status: dict) -> str:
    datasets = status.get("datasets") or []
    if not datasets:
        return ""
    done, wanted = status.get("tokens") or 0, status.get("budgetTokens") or 0
    each = "  ".join(f"{d['name']} {d.get('tokens') or 0:,d}/{d['budgetTokens']:,d}" for d in datasets)
    share = f" ({100 * done / wanted:.0f} %)" if wanted else ""
    return f"tokens {done:,d}/{wanted:,d}{share}   {each}"


def quarter(status: dict) -> int:
    """Which quarter of the whole budget the tokens are in (0-4)."""
    wanted = status.get("budgetTokens") or 0
    return min(4, 4 * (status.get("tokens") or 0) // wanted) if wanted else 0


class Progress:
    def __init__(self, out: TextIO):
        self.out, self.in_place = out, out.isatty()
        self.said: dict[str, str] = {}
        self.tokens, self.quarter, self.printed = "", 0, ""

    def show(self, status: dict, pods: list) -> None:
        now = facts(status, pods)
        changed, self.said = what_changed(self.said, now), now
        tokens = tokens_line(status)
        if self.in_place:
            for line in changed:
                self.out.write(f"{CLEAR_LINE}  {line}\n")
            if tokens and (changed or tokens != self.tokens):
                self.out.write(f"{CLEAR_LINE}  {tokens}")
        else:
            for line in changed:
                self.out.write(f"  {line}\n")
            if tokens and quarter(status) > self.quarter:
                self.quarter, self.printed = quarter(status), tokens
                self.out.write(f"  {tokens}\n")
        self.tokens = tokens
        self.out.flush()

    def close(self) -> None:
        """The tokens as they ended, on a line of their own (on a terminal, the line shown ends)."""
        if self.in_place and self.tokens:
            self.out.write("\n")
        elif self.tokens != self.printed:
            self.out.write(f"  {self.tokens}\n")
        self.out.flush()
