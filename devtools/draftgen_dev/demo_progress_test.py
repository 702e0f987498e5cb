import io
from types import SimpleNamespace

from draftgen_dev.demo_progress import Progress, facts, quarter, tokens_line, what_changed


def pod(name, phase, node=None):
    return SimpleNamespace(metadata=SimpleNamespace(name=name), status=SimpleNamespace(phase=phase),
                           spec=SimpleNamespace(node_name=node))


def status(phase, chat, tools, state="Generating"):
    return {"phase": phase, "tokens": chat + tools, "budgetTokens": 2000,
            "datasets": [{"name": "chat", "tokens": chat, "budgetTokens": 1000, "state": state},
                         {"name": "tools", "tokens": tools, "budgetTokens": 1000, "state": "Generating"}]}


def test_what_changed_names_new_changed_and_gone_facts_and_nothing_else():
    before = facts(status("Generating", 10, 10), [pod("g0", "Pending"), pod("g1", "Running", "gpu-node-1")])
    now = facts(status("Generating", 900, 20, state="BudgetMet"), [pod("g0", "Running", "gpu-node-0")])
    assert what_changed(before, now) == ["dataset chat: Generating -> BudgetMet",
                                         "pod g0: Pending -> Running on gpu-node-0", "pod g1: gone"]
    assert what_changed(now, now) == []
    assert what_changed({}, {"phase": "Pending"}) == ["phase: Pending"]


def test_tokens_line_and_quarters():
    assert tokens_line({}) == ""
    assert tokens_line(status("Generating", 500, 0)) == "tokens 500/2,000 (25 %)   chat 500/1,000  tools 0/1,000"
    assert [quarter(status("Generating", c, 0)) for c in (0, 499, 500, 1000)] == [0, 0, 1, 2]
    assert quarter({"tokens": 5000, "budgetTokens": 2000}) == 4


def test_a_log_gets_a_line_per_change_and_per_quarter_never_the_same_block_again():
    out = io.StringIO()
    progress = Progress(out)
    for chat in range(0, 1001, 10):  # a hundred polls of a run that fills chat's budget
        progress.show(status("Generating", chat, 0, state="BudgetMet" if chat == 1000 else "Generating"),
                      [pod("g0", "Running", "gpu-node-0")])
    progress.close()
    lines = out.getvalue().splitlines()
    assert lines == ["  phase: Generating", "  dataset chat: Generating", "  dataset tools: Generating",
                     "  pod g0: Running on gpu-node-0", "  tokens 500/2,000 (25 %)   chat 500/1,000  tools 0/1,000",
                     "  dataset chat: Generating -> BudgetMet",
                     "  tokens 1,000/2,000 (50 %)   chat 1,000/1,000  tools 0/1,000"]


def test_a_terminal_gets_one_tokens_line_rewritten_in_place():
    out = io.StringIO()
    out.isatty = lambda: True
    progress = Progress(out)
    for chat in (0, 10, 20):
        progress.show(status("Generating", chat, 0), [])
    progress.close()
    text = out.getvalue()
    assert text.count("\n") == 4  # three facts said once, and the last tokens line ended
    assert text.count("\r\033[K  tokens ") == 3  # rewritten in place at each poll
