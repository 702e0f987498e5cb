"""One version for the package, both commands' --version, the chart's appVersion (the image tag the
chart defaults to) and the tag of the image `make image` builds."""

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


def test_the_operators_default_image_and_the_quickstarts_are_the_local_build_of_this_version():
    from draftgen import plan

    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    quickstart = yaml.safe_load((REPO / "examples" / "quickstart.yaml").read_text())
    assert plan.OperatorSettings().runner_image == quickstart["spec"]["server"]["image"] == f"localhost/draftgen:{version}"
