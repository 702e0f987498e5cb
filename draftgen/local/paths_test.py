from pathlib import Path

import pytest

from draftgen import plan
from draftgen.local.paths import JOBRUNNER, extract_placement, local_argv, local_path, pod_mounts
from draftgen.local.spec_file import parse_object
from draftgen_dev.builders import example_manifest

SPEC = parse_object(example_manifest())[1]


@pytest.mark.parametrize("pod_path, local", [
    ("/data/prompts/a.jsonl", "/d/prompts/a.jsonl"),
    ("/data/models/tiny", "/m/tiny"),  # the longest mount first
    ("/data", "/d"),
    ("/database/x", "/database/x"),  # a prefix of a name is not a mount
    ("/opt/prompts.jsonl", "/opt/prompts.jsonl"),  # in the image: as it is
])
def test_pod_paths_map_to_the_local_folders(pod_path, local):
    assert local_path(pod_path, {"/data": Path("/d"), "/data/models": Path("/m")}) == local


def test_the_operators_merge_and_extract_commands_run_here_with_local_paths():
    mounts = pod_mounts(SPEC, Path("/d"), Path("/m"))
    merge = local_argv(plan.merge_command("qs", SPEC), mounts)
    assert merge[:len(JOBRUNNER) + 1] == [*JOBRUNNER, "merge"]
    assert merge[merge.index("--output-root") + 1] == "/d/qs"
    assert merge[merge.index("--corpus-dir") + 1] == "/d/qs/corpus"
    extract = local_argv(plan.extract_command("qs", SPEC), mounts)
    assert extract[extract.index("--model") + 1] == "/m/tiny"
    with pytest.raises(ValueError, match="not a jobrunner command"):
        local_argv(["python3", "-m", "sglang.launch_server"], mounts)


def test_extraction_runs_on_the_device_asked_for_not_the_pods_placement():
    assert extract_placement("cpu") == ["--device", "cpu"]
    assert extract_placement("auto") == ["--device-map", "auto"]
    argv = plan.extract_command("qs", SPEC, placement=extract_placement("cuda:1"))
    assert "--device-map" not in argv and argv[argv.index("--device") + 1] == "cuda:1"
