"""draftgen's image as the pods run it: built from the Dockerfile (tests/conftest.py's draftgen_image),
run as its user on its read-only root, with only the volumes and /tmp writable."""

from __future__ import annotations

import json
import os
import subprocess
import tomllib
from pathlib import Path

import pytest

from draftgen_dev.demo_assets import build_model, write_datasets
from jobrunner.shared.corpus import iter_corpus

from ..local_run.conftest import quickstart, write_spec

REPO = Path(__file__).resolve().parents[2]
USER = 65532  # the Dockerfile's USER, the plan's runAsUser


def run_in(image, cmd: list[str], binds: dict | None = None, timeout_s: float = 60, **env) -> subprocess.CompletedProcess:
    return subprocess.run(image.argv(cmd, binds or {}), env={**image.env, **env}, capture_output=True, text=True,
                          timeout=timeout_s)


def writable_by_the_user(path: Path) -> Path:
    """A folder the image's user may write, as a volume with the pod's fsGroup is."""
    path.mkdir(parents=True, exist_ok=True)
    for p in [path, *path.rglob("*")]:
        os.chown(p, USER, USER)
    return path


def test_both_commands_say_the_packages_version_as_the_images_user_on_a_read_only_root(draftgen_image, tmp_path):
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    for command in ("draftgen", "jobrunner"):
        said = run_in(draftgen_image, [command, "--version"])
        assert said.stdout == f"{command} {version}\n", said.stderr
    tmp = writable_by_the_user(tmp_path / "tmp")
    said = run_in(draftgen_image, ["sh", "-c", "id -u; touch /opt/draftgen/x; touch /tmp/x && echo tmp writable"],
                  {str(tmp): "/tmp"})
    assert said.stdout == f"{USER}\ntmp writable\n"
    assert "Read-only file system" in said.stderr


def installed(image) -> dict[str, str]:
    said = run_in(image, ["python", "-m", "pip", "list", "--format", "json"])
    return {p["name"].lower().replace("_", "-"): p["version"] for p in json.loads(said.stdout)}


def locked(*names: str) -> dict[str, str]:
    lines = [line for n in names for line in (REPO / "requirements" / n).read_text().splitlines()]
    return dict(line.lower().replace("_", "-").split("==") for line in lines if "==" in line)


def test_the_image_holds_the_locked_packages_and_draftgen_nothing_else(draftgen_image):
    packages = installed(draftgen_image)
    assert packages.pop("draftgen") == tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    packages.pop("pip")  # the venv's own
    assert packages == locked("draftgen.lock", "torch.lock")


def test_the_image_leaves_the_tests_and_the_development_tools_out(draftgen_image):
    site = run_in(draftgen_image, ["python", "-c", "import jobrunner, os; print(os.path.dirname(jobrunner.__path__[0]))"])
    root = draftgen_image.root / site.stdout.strip().lstrip("/")
    assert (root / "jobrunner" / "cli.py").exists()
    assert not [p for top in ("draftgen", "jobrunner", "draftgen_contracts") for p in (root / top).rglob("*_test.py")]
    assert not (root / "draftgen_dev").exists() and not (root / "tests").exists()


@pytest.mark.timeout(300)
def test_the_quickstart_runs_in_the_image_preflight_generate_merge_and_extraction(draftgen_image, tmp_path):
    """`draftgen run` inside the image runs every stage the pods run, each from the image's own
    programs: the preflight, the simulator as the server, generation, the merge, and the extraction
    with the default backend (transformers, on the image's torch)."""
    models = tmp_path / "models"
    build_model(models / "tiny")
    data = tmp_path / "data"
    write_datasets(data / "prompts", rows_per_dataset=60)
    writable_by_the_user(data)
    (tmp_path / "spec").mkdir()
    spec = write_spec(tmp_path / "spec" / "quickstart.yaml", quickstart(budget_tokens=800))
    binds = {str(models): "/models:ro", str(data): "/data", str(spec.parent): "/spec:ro",
             str(writable_by_the_user(tmp_path / "tmp")): "/tmp"}
    said = run_in(draftgen_image, ["draftgen", "run", "/spec/quickstart.yaml", "--data-dir", "/data",
                                   "--model-dir", "/models"], binds, timeout_s=280)
    assert said.returncode == 0, said.stdout[-3000:] + said.stderr[-3000:]
    root = data / "quickstart"
    corpus_ids = {r["sample_id"] for r in iter_corpus(root / "corpus")}
    index = json.loads((root / "hidden-states" / "index.json").read_text())
    assert corpus_ids and index["complete"] and set(index["samples"]) == corpus_ids
    assert all(p.stat().st_uid == USER for p in root.rglob("*"))  # written by the image's user
