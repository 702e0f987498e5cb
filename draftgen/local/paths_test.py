from pathlib import Path

import pytest

from draftgen.local.paths import local_path


@pytest.mark.parametrize("pod_path, local", [
    ("/data/prompts/a.jsonl", "/d/prompts/a.jsonl"),
    ("/data/models/tiny", "/m/tiny"),  # the longest mount first
    ("/data", "/d"),
    ("/database/x", "/database/x"),  # a prefix of a name is not a mount
    ("/opt/prompts.jsonl", "/opt/prompts.jsonl"),  # in the image: as it is
])
def test_pod_paths_map_to_the_local_folders(pod_path, local):
    assert local_path(pod_path, {"/data": Path("/d"), "/data/models": Path("/m")}) == local
