from draftgen.observed import pod_state_from


def test_a_rank_pod_says_its_rank_its_node_and_what_its_failed_container_said():
    pod = {"metadata": {"name": "x-gen-r000-1-abcde", "labels": {"draftgen.io/replica": "0"},
                        "annotations": {"batch.kubernetes.io/job-completion-index": "1"}},
           "spec": {"nodeName": "gpu-node-1"},
           "status": {"initContainerStatuses": [{"name": "resolve-leader", "state": {"terminated": {
               "exitCode": 1, "message": "resolving\njobrunner resolve-leader: the group leader x did not resolve"}}}]}}
    state = pod_state_from(pod)
    assert (state.rank, state.node) == (1, "gpu-node-1")
    assert state.failure == "container resolve-leader exited 1: jobrunner resolve-leader: the group leader x did not resolve"


def test_a_single_node_replicas_pod_is_rank_0_and_a_clean_exit_is_no_failure():
    pod = {"metadata": {"name": "x-gen-r001-abcde", "labels": {"draftgen.io/replica": "1"}},
           "status": {"containerStatuses": [{"name": "generate", "state": {"terminated": {"exitCode": 0}}}]}}
    state = pod_state_from(pod)
    assert (state.replica, state.rank, state.failure, state.node) == (1, 0, "", "")
