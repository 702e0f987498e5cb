import pytest

from draftgen_contracts import exit_codes
from jobrunner.generate.engine import exit_code


@pytest.mark.parametrize("states, transient_failures, shutdown, server_lost, code", [
    ({"a": "BudgetMet", "b": "Exhausted"}, 0, False, False, exit_codes.OK),
    ({"a": "Generating"}, 3, False, False, exit_codes.RETRY_LATER),  # rows to redo: the Job runs a new pod
    ({"a": "BudgetMet"}, 3, False, False, exit_codes.OK),  # the failed rows are not needed
    ({"a": "Generating"}, 0, True, False, exit_codes.OK),  # SIGTERM
    ({"a": "Generating"}, 20, False, True, exit_codes.RETRY_LATER),  # the server did not come back: resume later
    ({"a": "Generating"}, 20, True, True, exit_codes.OK),  # SIGTERM while it was lost
])
def test_the_exit_status_says_what_the_job_should_do(states, transient_failures, shutdown, server_lost, code):
    assert exit_code(states, transient_failures, shutdown, server_lost) == code
