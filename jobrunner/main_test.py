import subprocess
import sys
from pathlib import Path


def test_python_dash_m_jobrunner_is_the_jobrunner_script():
    script = Path(sys.executable).parent / "jobrunner"
    module = subprocess.run([sys.executable, "-m", "jobrunner", "--help"], capture_output=True, text=True)
    installed = subprocess.run([str(script), "--help"], capture_output=True, text=True)
    assert module.returncode == installed.returncode == 0, module.stderr
    assert module.stdout == installed.stdout and "generate" in module.stdout

