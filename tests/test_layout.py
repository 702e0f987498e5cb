"""The repository's layout promises: `operator/` holds the operator without shadowing the standard library."""

import subprocess
import sys
import sysconfig

from tests.conftest import REPO


def run_python(code: str, cwd) -> str:
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, check=True).stdout


def test_import_operator_is_the_standard_library_from_the_repo_root_and_elsewhere(tmp_path):
    stdlib = sysconfig.get_paths()["stdlib"]
    for cwd in (REPO, tmp_path):
        path = run_python("import operator; print(operator.__file__)", cwd).strip()
        assert path.startswith(stdlib), path
        assert run_python("import operator; print(operator.add(2, 3))", cwd).strip() == "5"


def test_the_operator_package_imports_as_draftgen_operator(tmp_path):
    path = run_python("import draftgen_operator; print(draftgen_operator.__file__)", tmp_path).strip()
    assert path.endswith("operator/draftgen_operator/__init__.py")


def test_console_scripts_exist():
    bin_dir = sysconfig.get_paths()["scripts"]
    for script in ("draftgen", "jobrunner"):
        out = subprocess.run([f"{bin_dir}/{script}", "--help"], capture_output=True, text=True)
        assert out.returncode == 0 and "usage" in out.stdout.lower()
