"""One version for the package, both commands' --version and the chart's appVersion (the image tag
the chart defaults to)."""

import subprocess
import sys
import tomllib
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def test_one_version_for_the_package_the_commands_and_the_charts_app_version():
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert yaml.safe_load((REPO / "charts" / "draftgen" / "Chart.yaml").read_text())["appVersion"] == version
    for command in ("draftgen", "jobrunner"):
        said = subprocess.run([str(Path(sys.executable).parent / command), "--version"], capture_output=True, text=True)
        assert said.stdout == f"{command} {version}\n", said.stderr
