from pathlib import Path

from draftgen import plan
from draftgen.local.executor import SETTINGS
from draftgen.local.paths import JOBRUNNER, pod_mounts
from draftgen.local.pod_process import pod_process, server_sidecar
from draftgen.local.server import stand_in_argv
from draftgen.local.spec_file import parse_object
from draftgen_dev.builders import example_manifest


def option(argv, flag):
    return argv[argv.index(flag) + 1]


def test_the_quickstarts_simulator_is_the_pods_sidecar_as_given_on_a_free_loopback_port():
    spec = parse_object(example_manifest())[1]
    job = plan.generation_job("qs", spec, 0, SETTINGS, plan.config_object("qs", "local", spec, SETTINGS))
    sidecar = pod_process(job, pod_mounts(spec, Path("/d"), Path("/m")), Path("/v"), server_sidecar(job))
    argv = sidecar.with_option("--port", "0").argv  # what GenerationServer.start runs
    assert argv[:len(JOBRUNNER) + 1] == [*JOBRUNNER, "simulate"]
    assert option(argv, "--host") == "127.0.0.1" and option(argv, "--port") == "0" and argv.count("--port") == 1
    assert option(argv, "--model-path") == str(Path("/m") / spec.model.path)
    assert option(argv, "--context-length") == "2048"
    assert all(a in argv for a in spec.server.args)  # the quickstart's own simulator flags


def test_a_real_servers_args_are_not_given_to_the_simulator_standing_in_for_it():
    obj = example_manifest()
    obj["spec"]["server"].update(command=["python3", "-m", "sglang.launch_server"],
                                 args=["--mem-fraction-static", "0.88"])
    argv = stand_in_argv(parse_object(obj)[1], "/m/tiny")
    assert "--mem-fraction-static" not in argv and option(argv, "--port") == "0"
    assert argv[:len(JOBRUNNER) + 1] == [*JOBRUNNER, "simulate"]
