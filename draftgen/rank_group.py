"""A replica across nodes (spec.server.nodesPerReplica > 1): how its generation Job differs from a
single-node replica's (docs/multi-node.md).

The Job is Indexed, one pod per node (completions = parallelism = nodes), the index being the rank;
the pods take `<job>-<rank>` as their hostname under the run's headless Service, where the other ranks
find the leader. Rank 0 runs the single-node replica's pod (the server, `jobrunner generate`); the
others run the same server as SGLang's worker ranks and `jobrunner rank`, which follows the group.
The leader's success ends the Job (successPolicy), and the Job controller stops the workers, which do
not end on their own. Any pod's failure fails the Job (backoffLimit 0, no disruption ignored): half a
group cannot serve, so the operator starts the whole group again (draftgen.policies.group_policy).
"""

from __future__ import annotations

from draftgen_contracts import names

from . import api

RANK_VOLUME = {"name": "rank", "emptyDir": {"sizeLimit": "1Mi"}}
RANK_MOUNT = {"name": "rank", "mountPath": names.RANK_MOUNT}
LEADER_PATH = f"{names.RANK_MOUNT}/{names.LEADER_FILE}"
# The server's command, kept as the user wrote it: a shell adds the rank's flags after it and its
# arguments ("$@" keeps each one whole), reading the leader's IP and the index when the container starts.
RANK_FLAGS = (f'exec "$@" --dist-init-addr "$(cat {LEADER_PATH})":{names.DIST_INIT_PORT} '
              f'--node-rank "${names.COMPLETION_INDEX_ENV}"')


def is_group(spec: api.DatasetGenerationSpec) -> bool:
    return spec.server.endpoint is None and spec.server.nodes_per_replica > 1


def leader_name(job_name: str, name: str) -> str:
    """Rank 0's DNS name, as the other ranks resolve it (the search path adds the namespace)."""
    return f"{job_name}-0.{names.ranks_service_name(name)}"


# How long a worker rank waits for its leader's name to resolve. The name resolves once the leader's pod
# has an IP (publishNotReadyAddresses), seconds after it is scheduled and well before its model loads:
# waiting the whole startup timeout (an hour for a large checkpoint) held a node's GPUs for nothing.
RESOLVE_LEADER_S = 300


def resolve_leader_timeout(startup_timeout_s: int) -> int:
    return min(startup_timeout_s, RESOLVE_LEADER_S)


def group_pod(pod_spec: dict, name: str, spec: api.DatasetGenerationSpec, job_name: str, runner_image: str) -> dict:
    """A single-node replica's pod spec as a rank's: the leader's address resolved first, the server
    started as its rank, the main container rank-aware."""
    server = next(c for c in pod_spec["initContainers"] if c["name"] == "sglang")
    server["command"] = ["sh", "-c", RANK_FLAGS, "sh", *server["command"]]
    server["args"] = [*server["args"], "--nnodes", str(spec.server.nodes_per_replica)]
    # A worker rank has no /ready, only a /health that answers 200 once it loaded; the leader's /health
    # answers 503 until it is ready (docs/multi-node.md).
    server["startupProbe"]["httpGet"]["path"] = "/health"
    server["volumeMounts"].append({**RANK_MOUNT, "readOnly": True})
    resolve = {
        "name": "resolve-leader", "image": runner_image,
        "command": ["jobrunner", "resolve-leader", "--leader", leader_name(job_name, name), "--out", LEADER_PATH,
                    "--timeout", str(resolve_leader_timeout(spec.server.startup_timeout_seconds))],
        "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}},
        "volumeMounts": [RANK_MOUNT], "terminationMessagePolicy": "FallbackToLogsOnError"}
    runner = next(c for c in pod_spec["containers"] if c["name"] == "generate")
    runner["command"] = ["jobrunner", "rank", "--leader-file", LEADER_PATH, "--dist-port", str(names.DIST_INIT_PORT),
                         "--", *runner["command"]]
    runner["volumeMounts"].append({**RANK_MOUNT, "readOnly": True})
    # What a rank said when it failed reaches the object: the operator quotes it when the group restarts.
    runner["terminationMessagePolicy"] = "FallbackToLogsOnError"
    pod_spec["initContainers"] = [resolve, *pod_spec["initContainers"]]
    pod_spec["volumes"].append(dict(RANK_VOLUME))
    pod_spec["subdomain"] = names.ranks_service_name(name)
    return pod_spec


def group_job(job: dict, nodes: int) -> dict:
    """The Job as an Indexed Job of `nodes` ranks that succeeds with its leader and fails with any rank."""
    spec = job["spec"]
    spec.update(completionMode="Indexed", completions=nodes, parallelism=nodes, backoffLimit=0,
                successPolicy={"rules": [{"succeededIndexes": "0"}]})
    spec["podFailurePolicy"]["rules"] = [r for r in spec["podFailurePolicy"]["rules"] if r["action"] == "FailJob"]
    return job


def ranks_service(name: str, labels: dict[str, str], selector: dict[str, str]) -> dict:
    """The headless Service the ranks find their leader under; it publishes pods before they are
    ready, since the workers join the leader while it loads."""
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": names.ranks_service_name(name), "labels": labels},
            "spec": {"clusterIP": "None", "publishNotReadyAddresses": True, "selector": selector}}
