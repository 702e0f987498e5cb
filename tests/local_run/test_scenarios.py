"""The shared scenarios (tests/scenarios.py) with `draftgen run` as the executor."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from jobrunner.shared.output import iter_records, record_files
from tests.conftest import wait_for
from tests.scenarios import SCENARIOS, play

from .conftest import quickstart, write_spec


class LocalDriver:
    """`draftgen run` as a user runs it: a process per apply, the status read from its state file."""

    def __init__(self, tmp_path: Path, data_dir: Path, model_dir: Path):
        self.data, self.models = data_dir, model_dir
        self.obj = quickstart(extraction=False)
        self.spec = tmp_path / "quickstart.yaml"
        self.log = tmp_path / "draftgen-run.log"
        self.argv = [sys.executable, "-m", "draftgen_operator.cli", "run", str(self.spec), "--data-dir", str(data_dir),
                     "--model-dir", str(model_dir)]
        self.root = data_dir / "quickstart"
        self.proc: subprocess.Popen | None = None

    def apply(self, spec_change=None) -> None:
        if spec_change is not None:
            spec_change(self.obj["spec"])
        write_spec(self.spec, self.obj)
        self.start()

    def start(self) -> None:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True)

    def status(self) -> dict:
        try:
            return json.loads((self.root / "local-run" / "state.json").read_text())["status"]
        except (OSError, ValueError, KeyError):
            return {}

    def wait_for_tokens(self) -> None:
        wait_for(lambda: (self.status().get("tokens") or 0) > 0 or self.proc.poll() is not None, 60, "tokens in status")
        assert self.proc.poll() is None, self.log.read_text()

    def restart_controller(self) -> None:
        self.proc.send_signal(signal.SIGKILL)  # no cleanup: its children die with it (PR_SET_PDEATHSIG)
        self.proc.wait(30)
        self.start()

    def wait_done(self) -> dict:
        self.proc.wait(180)
        status = self.status()
        assert status.get("phase") in ("Succeeded", "Failed"), self.log.read_text()
        return status

    def events(self) -> list[str]:
        return [line.split()[2].rstrip(":") for line in self.log.read_text().splitlines()
                if line.startswith("event ")]

    def records(self) -> list[dict]:
        return [r for f in record_files(self.root) for r in iter_records(f)]

    def applied_spec(self) -> dict:
        return self.obj["spec"]

    def volumes(self) -> tuple[Path, Path]:
        return self.data, self.models

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_scenario(scenario, tmp_path, data_dir, model_dir):
    driver = LocalDriver(tmp_path, data_dir, model_dir)
    try:
        play(scenario, driver)
    finally:
        driver.stop()
