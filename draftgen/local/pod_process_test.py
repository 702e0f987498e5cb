"""The decided Jobs as local processes: each container's command as given, its paths under the
local folders, its variables expanded; what the Job asks that has nothing to stand for it here is refused."""

import copy
from pathlib import Path

import pytest

from draftgen import plan
from draftgen.local.paths import JOBRUNNER, JOBRUNNER_ROOT, pod_mounts
from draftgen import server_keys
from draftgen.local.pod_process import NotRunnableHere, PodProcess, pod_process, secret_folder, server_sidecar, with_device
from draftgen_contracts.sglang_auth import ServerKeys
from draftgen_contracts import names
from draftgen_dev.builders import SpecBuilder

SPEC = SpecBuilder.quickstart("qs").extraction().spec()
SETTINGS = plan.OperatorSettings(coordination="file")
CONFIG = plan.config_object("qs", "local", SPEC, SETTINGS)
FOLDERS = pod_mounts(SPEC, Path("/d"), Path("/m"))
VOLUMES = Path("/run/volumes")


def option(argv, flag):
    return argv[argv.index(flag) + 1]


def test_generate_runs_the_pods_command_with_the_configmaps_file_the_keys_and_the_pod_ip_here(tmp_path):
    job = plan.generation_job("qs", SPEC, 0, SETTINGS, CONFIG)
    with pytest.raises(NotRunnableHere, match="DRAFTGEN_SERVER_API_KEY comes from"):  # before the executor wrote them
        pod_process(job, FOLDERS, tmp_path)
    keys = secret_folder(tmp_path, names.keys_secret_name("qs"))
    keys.mkdir(parents=True)
    for key, text in server_keys.filled({}, ServerKeys("a-key", "an-admin-key"))["stringData"].items():
        (keys / key).write_text(text)
    process = pod_process(job, FOLDERS, tmp_path)
    assert process.argv[:len(JOBRUNNER) + 1] == [*JOBRUNNER, "generate"]
    assert option(process.argv, "--config") == str(
        tmp_path / "configmaps" / CONFIG["metadata"]["name"] / names.GENERATE_CONFIG_KEY)
    assert option(process.argv, "--server-url") == f"http://127.0.0.1:{SPEC.server.port}"
    assert process.env["POD_IP"] == "127.0.0.1" and process.env["HF_HUB_OFFLINE"] == "1"
    assert ServerKeys.from_env(process.env) == ServerKeys("a-key", "an-admin-key")
    sidecar = pod_process(job, FOLDERS, tmp_path, server_sidecar(job)).argv  # the server reads the same keys
    assert option(sidecar, "--config") == str(keys / names.KEYS_CONFIG_FILE)


def test_merge_and_extract_run_on_the_local_folders_the_user_named():
    merge = pod_process(plan.merge_job("qs", SPEC, SETTINGS), FOLDERS, VOLUMES).argv
    assert (option(merge, "--output-root"), option(merge, "--corpus-dir")) == ("/d/qs", "/d/qs/corpus")
    extract = pod_process(plan.extract_job("qs", SPEC, SETTINGS), FOLDERS, VOLUMES).argv
    assert option(extract, "--model") == str(Path("/m") / SPEC.model.path)
    assert option(extract, "--out") == "/d/qs/hidden-states"


def test_the_sglang_extraction_runs_the_servers_python_importing_this_jobrunner(tmp_path):
    spec = (SpecBuilder.quickstart("qs").server(command=["/opt/sglang/bin/python", "-m", "sglang.launch_server"],
                                                tensorParallelSize=1).extraction(backend="sglang", gpus=0).spec())
    process = pod_process(plan.extract_job("qs", spec, SETTINGS), pod_mounts(spec, Path("/d"), Path("/m")), tmp_path)
    assert process.argv[:4] == ["/opt/sglang/bin/python", "-m", "jobrunner", "extract"]
    assert option(process.argv, "--out") == "/d/qs/hidden-states" and option(process.argv, "--backend") == "sglang"
    assert process.env["PYTHONPATH"] == str(JOBRUNNER_ROOT)  # not the pod's copy, which no init container made here


def test_an_emptydir_is_a_fresh_folder_of_the_job_and_dev_is_this_machines(tmp_path):
    job = plan.merge_job("qs", SPEC, SETTINGS)
    pod = job["spec"]["template"]["spec"]
    pod["volumes"] += [{"name": "tmp", "emptyDir": {}}, {"name": "dshm", "emptyDir": {"medium": "Memory"}}]
    pod["containers"][0]["volumeMounts"] += [{"name": "tmp", "mountPath": "/tmp/work"},
                                             {"name": "dshm", "mountPath": "/dev/shm"}]
    pod["containers"][0]["command"] += ["--scratch", "/tmp/work/x", "--shm", "/dev/shm/y"]
    argv = pod_process(job, FOLDERS, tmp_path).argv
    scratch = tmp_path / "emptydirs" / job["metadata"]["name"] / "tmp"
    assert option(argv, "--scratch") == str(scratch / "x") and scratch.is_dir()
    assert option(argv, "--shm") == "/dev/shm/y"


@pytest.mark.parametrize("change, says", [
    (lambda c, p: c.update(command=["python3", "-m", "sglang.launch_server"]), "only jobrunner's commands"),
    (lambda c, p: c["env"].append({"name": "K", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}),
     "env K comes from"),
    (lambda c, p: p["volumes"].append({"name": "other", "persistentVolumeClaim": {"claimName": "x"}})
     or c["volumeMounts"].append({"name": "other", "mountPath": "/other"}), "no local folder stands for it"),
])
def test_what_has_nothing_to_stand_for_it_here_is_refused_by_name(change, says):
    job = copy.deepcopy(plan.extract_job("qs", SPEC, SETTINGS))
    pod = job["spec"]["template"]["spec"]
    change(pod["containers"][0], pod)
    with pytest.raises(NotRunnableHere, match=says):
        pod_process(job, FOLDERS, VOLUMES)


def test_options_are_replaced_where_they_stand_or_dropped_with_their_value():
    process = PodProcess(["jobrunner", "generate", "--server-url", "http://a", "--metrics-address", "b:1"], {})
    assert process.with_option("--server-url", "http://c").argv == [
        "jobrunner", "generate", "--metrics-address", "b:1", "--server-url", "http://c"]
    assert process.without_option("--metrics-address").argv == ["jobrunner", "generate", "--server-url", "http://a"]


@pytest.mark.parametrize("device, placement", [("cpu", ["--device", "cpu"]), ("cuda:1", ["--device", "cuda:1"]),
                                               ("auto", ["--device-map", "auto"])])
def test_extraction_runs_on_the_device_asked_for_not_the_pods_placement(device, placement):
    on_gpus = SpecBuilder.quickstart("qs").extraction(gpus=2).spec()
    process = pod_process(plan.extract_job("qs", on_gpus, SETTINGS), pod_mounts(on_gpus, Path("/d"), Path("/m")),
                          VOLUMES)
    assert option(process.argv, "--device-map") == "auto"
    placed = with_device(process, device).argv
    assert placed[-2:] == placement and placed.count(placement[0]) == 1
    assert ("--device-map" in placed) == (device == "auto")
