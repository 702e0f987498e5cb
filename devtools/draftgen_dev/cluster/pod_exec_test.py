import sys

import os

from draftgen_dev.cluster.pod_exec import hidden_folders, in_root, mount_order, runs_from


def test_a_volume_over_the_checkout_hides_it_and_the_environment_inside_it_comes_back_with_it():
    needed = ["/tmp/clone", "/tmp/clone/.venv", "/usr"]
    assert hidden_folders(["/tmp"], needed) == ["/tmp/clone"]


def test_a_volume_elsewhere_or_at_the_folder_itself_hides_nothing_it_must_bring_back():
    # A volume mounted exactly at a needed folder is what the pod asked for: it is not undone.
    assert hidden_folders(["/data", "/tmp/clone"], ["/tmp/clone", "/tmp/clonex"]) == []
    assert hidden_folders(["/tm"], ["/tmp/clone"]) == []


def test_folders_under_two_volumes_come_back_once_each():
    assert hidden_folders(["/tmp", "/work"], ["/tmp/a", "/work/b/.venv", "/work/b"]) == ["/tmp/a", "/work/b"]


def test_the_environment_this_python_runs_from_is_needed():
    assert sys.prefix in runs_from()


def test_a_mount_that_hides_another_ones_source_goes_last():
    binds = [("/tmp", "/tmp", []), ("/tmp/pod/volumes/data", "/data", ["ro"])]
    assert [dst for _, dst, _ in mount_order(binds)] == ["/data", "/tmp"]


def test_a_path_inside_an_image_root_follows_its_links_inside_that_root(tmp_path):
    root = tmp_path / "root"
    (root / "run").mkdir(parents=True)
    (root / "var").mkdir()
    os.symlink("/run", root / "var" / "run")  # as in Debian: absolute, meant from inside the image
    os.symlink("../../etc", root / "var" / "up")
    assert in_root(str(root), "/var/run/secrets/sa") == str(root / "run" / "secrets" / "sa")
    assert in_root(str(root), "/var/up/hosts") == str(root / "etc" / "hosts")  # never above the root
    assert in_root(str(root), "/data") == str(root / "data")
