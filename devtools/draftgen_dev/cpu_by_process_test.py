import sys
from pathlib import Path

from draftgen_dev.cpu_by_process import kind_at_sighting, kind_of, main, table


def test_kinds_of_the_processes_a_test_run_starts():
    assert kind_of(["/w/.venv/bin/python", "/w/.venv/bin/jobrunner", "generate", "--config", "x"]) == "jobrunner generate"
    assert kind_of(["python", "-m", "jobrunner.cli", "--verbose", "merge"]) == "jobrunner merge"
    assert kind_of(["unshare", "--mount", "python", "-m", "draftgen_dev.cluster.pod_exec", "--", "jobrunner",
                    "simulate", "--profile", "q"]) == "simulator (jobrunner simulate)"
    assert kind_of(["/c/bin/kubernetes-v1/kube-apiserver", "--etcd-servers=x"]) == "kube-apiserver"
    assert kind_of(["python", "-c", "import sys;exec(eval(sys.stdin.readline()))"]) == "pytest workers (execnet)"
    assert kind_of(["/usr/bin/sleep", "1"]) == "sleep"


def test_a_child_seen_before_its_exec_takes_the_kind_of_its_own_command_and_an_exiting_one_keeps_its_kind():
    worker = ["python", "-c", "import sys;exec(eval(sys.stdin.readline()))"]
    forked = kind_at_sighting(None, worker)
    assert forked == "pytest workers (execnet)"
    assert kind_at_sighting(forked, ["/c/kube-apiserver", "--etcd-servers=x"]) == "kube-apiserver"
    assert kind_at_sighting("kube-apiserver", []) == "kube-apiserver"


def test_a_commands_cpu_is_counted_by_kind(capsys):
    # It idles after its CPU, so a half-second reading sees all of it however loaded the machine.
    assert main(["--", sys.executable, "-c", "import time\nt = time.process_time()\nwhile time.process_time() - t < 1.2: pass\ntime.sleep(1.2)"]) == 0
    said = capsys.readouterr().err
    [row] = [line for line in said.splitlines() if line.startswith(Path(sys.executable).name + " ")]
    assert 0.9 <= float(row.split()[1]) <= 2.0, said
    assert "CPU s" in table({}, 1.0)
