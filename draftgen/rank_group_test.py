"""A replica across nodes as its generation Job: the shape the Job controller and the ranks need."""

import subprocess

from draftgen import plan, rank_group
from draftgen_contracts import names
from draftgen_dev.builders import SpecBuilder

SPEC = (SpecBuilder("run").server(nodesPerReplica=2, gpusPerReplica=8, tensorParallelSize=16,
                                  command=["python3", "-m", "sglang.launch_server"], args=["--mem-fraction-static", "0.8"])
        .dataset("a").spec())
SETTINGS = plan.OperatorSettings()
CONFIG = plan.config_object("run", "ns", SPEC, SETTINGS)


def group_job():
    return plan.generation_job("run", SPEC, 1, SETTINGS, CONFIG)


def containers(job):
    pod = job["spec"]["template"]["spec"]
    return {c["name"]: c for c in [*pod["initContainers"], *pod["containers"]]}


def test_a_replica_across_nodes_is_an_indexed_job_that_succeeds_with_its_leader_and_fails_with_any_rank():
    spec = group_job()["spec"]
    assert (spec["completionMode"], spec["completions"], spec["parallelism"]) == ("Indexed", 2, 2)
    assert spec["successPolicy"] == {"rules": [{"succeededIndexes": "0"}]} and spec["backoffLimit"] == 0
    assert all(rule["action"] == "FailJob" for rule in spec["podFailurePolicy"]["rules"])
    assert spec["template"]["spec"]["subdomain"] == "run-ranks"


def test_each_rank_resolves_the_leader_before_its_server_starts_and_runs_the_rank_aware_main_container():
    pod = group_job()["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["initContainers"]] == ["resolve-leader", "sglang"]
    resolve = containers(group_job())["resolve-leader"]
    assert resolve["command"][:4] == ["jobrunner", "resolve-leader", "--leader", "run-gen-r001-0.run-ranks"]
    assert resolve["securityContext"] == plan.RUNNER_SECURITY_CONTEXT  # hardened as draftgen's own
    main = containers(group_job())["generate"]["command"]
    assert main[:2] == ["jobrunner", "rank"] and main[main.index("--") + 1:][:2] == ["jobrunner", "generate"]
    server = containers(group_job())["sglang"]
    assert server["startupProbe"]["httpGet"]["path"] == "/health" and "--nnodes" in server["args"]
    assert {"name": "rank", "emptyDir": {"sizeLimit": "1Mi"}} in pod["volumes"]


def test_the_servers_command_stays_the_users_with_the_ranks_flags_after_its_arguments(tmp_path):
    """The wrapped command run by a real shell, with printf standing in for the server."""
    server = containers(group_job())["sglang"]
    leader = tmp_path / "leader"
    leader.write_text("10.0.0.7")
    script = server["command"][2].replace(rank_group.LEADER_PATH, str(leader))
    argv = [*server["command"][:2], script, "sh", "printf", "%s\\n", *server["args"]]
    out = subprocess.run(argv, env={names.COMPLETION_INDEX_ENV: "1", "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, check=True).stdout.splitlines()
    assert server["command"][4:] == ["python3", "-m", "sglang.launch_server"]
    assert out[:2] == ["--model-path", "/models/m"] and "--mem-fraction-static" in out
    assert out[-6:] == ["--nnodes", "2", "--dist-init-addr", f"10.0.0.7:{names.DIST_INIT_PORT}", "--node-rank", "1"]


def test_one_node_replicas_keep_their_single_pod_job():
    single = plan.generation_job("run", SpecBuilder("run").dataset("a").spec(), 0, SETTINGS, CONFIG)["spec"]
    assert "completionMode" not in single and "subdomain" not in single["template"]["spec"]
    assert plan.ranks_service("run", SpecBuilder("run").dataset("a").spec()) is None


def test_the_ranks_service_is_headless_publishes_loading_pods_and_the_ranks_may_reach_each_other():
    service = plan.ranks_service("run", SPEC)
    assert service["spec"] == {"clusterIP": "None", "publishNotReadyAddresses": True,
                               "selector": plan.labels("run", "generate")}
    rules = plan.generation_network_policy("run", SPEC, SETTINGS)["spec"]["ingress"]
    assert {"from": [{"podSelector": {"matchLabels": plan.labels("run", "generate")}}]} in rules
