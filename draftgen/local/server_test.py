from draftgen.local.paths import JOBRUNNER
from draftgen.local.server import simulator_argv
from draftgen.local.spec_file import parse_object
from draftgen_dev.builders import example_manifest


def test_the_simulator_gets_the_pods_server_flags_on_a_free_loopback_port():
    spec = parse_object(example_manifest())[1]
    argv = simulator_argv(spec, "/m/tiny")
    assert argv[:len(JOBRUNNER) + 1] == [*JOBRUNNER, "simulate"]
    assert argv[argv.index("--host") + 1] == "127.0.0.1" and argv[argv.index("--port") + 1] == "0"
    assert argv[argv.index("--model-path") + 1] == "/m/tiny"
    assert argv[argv.index("--context-length") + 1] == "2048"
    assert argv[-len(spec.server.args):] == spec.server.args  # the quickstart's own simulator flags


def test_a_real_servers_args_are_not_given_to_the_simulator():
    obj = example_manifest()
    obj["spec"]["server"].update(command=["python3", "-m", "sglang.launch_server"],
                                 args=["--mem-fraction-static", "0.88"])
    argv = simulator_argv(parse_object(obj)[1], "/m/tiny")
    assert "--mem-fraction-static" not in argv and argv[argv.index("--port") + 1] == "0"
