"""Every Python file of the repository passes pyflakes: no unused or undefined name, no definition
written twice (a repeated block once slipped in unseen), no import nothing uses."""

import subprocess

from pyflakes.api import checkPath
from pyflakes.reporter import Reporter

from tests.conftest import REPO


class Found:
    def __init__(self):
        self.said: list[str] = []

    def write(self, text: str) -> None:
        self.said.append(text)

    def flush(self) -> None:
        pass


def test_pyflakes_finds_nothing_in_any_tracked_or_new_python_file():
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.py"], cwd=REPO,
                            capture_output=True, text=True, check=True).stdout.split()
    found = Found()
    reporter = Reporter(found, found)
    for path in listed:
        if (REPO / path).exists():
            checkPath(str(REPO / path), reporter)
    assert not found.said, "".join(found.said)
