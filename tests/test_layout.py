"""The repository's layout promises: the packages at its root are the layers, and the console scripts work."""

import subprocess
import sys
import sysconfig

from tests.conftest import REPO


def test_the_operator_package_is_at_the_root_with_the_other_layers():
    path = subprocess.run([sys.executable, "-c", "import draftgen_operator; print(draftgen_operator.__file__)"],
                          cwd=REPO.parent, capture_output=True, text=True, check=True).stdout.strip()
    assert path == str(REPO / "draftgen_operator" / "__init__.py")


def test_console_scripts_exist():
    bin_dir = sysconfig.get_paths()["scripts"]
    for script in ("draftgen", "jobrunner"):
        out = subprocess.run([f"{bin_dir}/{script}", "--help"], capture_output=True, text=True)
        assert out.returncode == 0 and "usage" in out.stdout.lower()


def test_every_path_in_the_readmes_table_exists():
    """The README's "Where things are" table names the tree as it is."""
    readme = (REPO / "README.md").read_text()
    table = readme.split("## Where things are", 1)[1].split("\n## ", 1)[0]
    paths = []
    for row in table.splitlines():
        if row.startswith("| `"):
            first = row.split("|")[1]
            paths += [p for p in first.split("`")[1::2] if "*" not in p]
    base = None
    for path in paths:  # "draftgen/api.py", "crd.py": a bare name sits beside the path before it
        full = REPO / path if "/" in path or base is None else base / path
        assert full.exists(), path
        base = full.parent if full.is_file() else full
    assert len(paths) > 10


def test_the_readme_is_a_map_that_indexes_every_doc():
    """A newcomer reads it in minutes: short, no paragraph-long lines, measurements kept in docs/;
    and its index of the docs by question names every file in docs/."""
    readme = (REPO / "README.md").read_text()
    assert len(readme) <= 16_000, f"README.md is {len(readme)} characters: move detail into docs/"
    assert not [n for n, line in enumerate(readme.splitlines(), 1) if len(line) > 400]
    index = readme.split("## The docs, by question", 1)[1].split("\n## ", 1)[0]
    unlisted = [p.name for p in sorted((REPO / "docs").glob("*.md")) if f"(docs/{p.name})" not in index]
    assert not unlisted, f"docs missing from the README's index: {unlisted}"


def test_jobrunner_is_its_command_table_and_packages():
    """A stage is a package (its command line, its pure decisions, its I/O), the libraries they share
    are `jobrunner/shared/`: jobrunner's root holds only the command table beside them."""
    from jobrunner.cli import COMMANDS

    modules = sorted(p.name for p in (REPO / "jobrunner").glob("*.py") if not p.name.endswith("_test.py"))
    assert modules == ["__init__.py", "__main__.py", "cli.py"]
    assert [name for name, (module, _) in COMMANDS.items() if module.rsplit(".", 1)[0] == "jobrunner"] == []
