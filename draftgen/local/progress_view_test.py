import io

import pytest

from draftgen.api import DatasetStatus, Estimate
from draftgen.local.progress_view import ProgressView, format_duration, progress_rows, title
from draftgen_contracts.states import DatasetState


def test_progress_rows_show_percent_rate_and_eta_while_generating():
    rows = progress_rows([
        DatasetStatus(name="a", budget_tokens=1000, tokens=250, state=DatasetState.GENERATING, tokens_per_second=50.0),
        DatasetStatus(name="b", budget_tokens=1000, tokens=1020, state=DatasetState.BUDGET_MET),
        DatasetStatus(name="c", budget_tokens=1000, tokens=0, state=DatasetState.GENERATING),
    ])
    assert rows[0] == ("a", "250", "1,000", "25.0", "Generating", "50", "15s")
    assert rows[1] == ("b", "1,020", "1,000", "102.0", "BudgetMet", "-", "-")
    assert rows[2][-1] == "-"  # no rate yet: no ETA


@pytest.mark.parametrize("seconds,text", [(None, "-"), (0.4, "0s"), (59, "59s"), (61, "1m01s"), (3725, "1h02m")])
def test_durations(seconds, text):
    assert format_duration(seconds) == text


def test_the_live_table_and_the_plain_lines_show_the_same_rows():
    statuses = [DatasetStatus(name="chat", budget_tokens=2000, tokens=500, state=DatasetState.GENERATING, tokens_per_second=100.0)]
    live, plain = io.StringIO(), io.StringIO()
    with ProgressView(live, tty=True) as view:
        view.show(statuses)
    with ProgressView(plain, tty=False) as view:
        view.show(statuses, final=True)
        view.show(statuses, final=True)  # nothing moved: no second block
    for text in (live.getvalue(), plain.getvalue()):
        assert "generate: 25.0% of the budgets" in text
        assert all(cell in text for cell in ("chat", "500", "2,000", "25.0", "Generating", "100", "15s"))
    assert "│" in live.getvalue()  # rich's table
    assert plain.getvalue().count("of the budgets") == 1


def test_the_title_says_where_the_estimate_says_the_run_is_headed():
    statuses = [DatasetStatus(name="chat", budget_tokens=2000, tokens=500, state=DatasetState.GENERATING)]
    assert title(statuses) == "generate: 25.0% of the budgets"
    headed = Estimate(generation_ends="2026-12-01T00:02:00Z", corpus_tokens=140_000, hidden_state_size="72.9 MB")
    assert title(statuses, headed) == ("generate: 25.0% of the budgets; ends about 2026-12-01T00:02:00Z; "
                                       "corpus about 140,000 tokens; hidden states about 72.9 MB")
