from dataclasses import replace

from draftgen.policies.group_policy import RESTART_LIMIT, groups_to_restart, is_restartable
from draftgen.reasons import Reason
from draftgen_contracts.states import Component
from draftgen_dev.builders import JobBuilder

FAILED = replace(JobBuilder("x-gen-r000", Component.GENERATE).failed("BackoffLimitExceeded").state(), replica=0)


def test_a_failed_group_restarts_unless_it_said_its_configuration_is_wrong_or_is_one_node():
    assert is_restartable(FAILED, nodes=2) and not is_restartable(FAILED, nodes=1)
    bad_config = replace(FAILED, failure_reason=Reason.POD_FAILURE_POLICY,
                         failure_message="Container generate for pod x failed with exit code 2 matching FailJob rule")
    assert not is_restartable(bad_config, nodes=2)
    assert not is_restartable(replace(FAILED, deleting=True), nodes=2)


def test_a_group_restarts_as_often_as_a_single_node_replicas_pod_is_retried():
    assert groups_to_restart([FAILED], 2, {0: RESTART_LIMIT - 1}) == [FAILED]
    assert groups_to_restart([FAILED], 2, {0: RESTART_LIMIT}) == []
