"""Prompt files from the internet never take a run down (docs/security.md#hostile-inputs): a file
that cannot be read safely is refused naming it, a hostile row is skipped with its reason, a
symlink out of the run's volumes is never followed, and reading stays within the stated memory."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from draftgen_contracts import exit_codes
from draftgen_dev.builders import generate_config
from draftgen_dev.demo_assets import build_model
from jobrunner.shared.datasets import MAX_ROW_BYTES, MAX_ROW_GROUP_BYTES
from jobrunner.preflight.run import run_preflight

MiB = 1 << 20


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return build_model(tmp_path_factory.mktemp("model") / "tiny")


def volume_with_a_link_out(tmp_path):
    """A data volume whose prompt file is a symlink to a file outside it (a pod's secret, say)."""
    volume, secret = tmp_path / "data", tmp_path / "secret.jsonl"
    (volume / "prompts").mkdir(parents=True)
    secret.write_text(json.dumps({"prompt": "the keys"}) + "\n")
    (volume / "prompts" / "chat.jsonl").symlink_to(secret)
    return volume, secret


def test_a_dataset_linked_out_of_the_volumes_is_refused_by_preflight_and_generate(tmp_path, model):
    volume, secret = volume_with_a_link_out(tmp_path)
    path = volume / "prompts" / "chat.jsonl"
    config = generate_config("http://127.0.0.1:1", volume / "run", model,
                             [{"name": "chat", "path": str(path), "budget_tokens": 100}],
                             input_roots=[str(volume), str(model)])
    problem = run_preflight(config, str(model)).problem
    assert problem.where == "the run's inputs"
    assert f"datasets[0] (chat): {path} is {secret}, outside the volumes {volume}, {model}" in problem.message
    written = tmp_path / "generate.json"
    written.write_text(config.model_dump_json())
    proc = subprocess.run([sys.executable, "-m", "jobrunner.cli", "generate", "--config", str(written)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == exit_codes.BAD_CONFIG and f"is {secret}, outside the volumes" in proc.stderr
    assert not (volume / "run" / "chat").exists()  # nothing read, nothing written


def test_a_parquet_file_of_no_known_shape_is_refused_naming_it(tmp_path, model):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "labels.parquet"
    pq.write_table(pa.table({"text": ["a", "b"], "label": [0, 1]}), path)
    config = generate_config("http://127.0.0.1:1", tmp_path / "run", model,
                             [{"name": "labels", "path": str(path), "budget_tokens": 100}])
    problem = run_preflight(config, str(model)).problem
    assert problem.where == str(path) and problem.message.startswith("its columns ['text', 'label'] hold none of")


MEASURE = """
import json, sys
import pyarrow.parquet  # imported before the baseline: the reader's import is not what is measured
from jobrunner.shared.datasets import DatasetRefused, read_rows

def status(field):
    return int(next(l for l in open("/proc/self/status") if l.startswith(field)).split()[1]) * 1024

def growth(read):
    # Linux: writing 5 to clear_refs resets the peak resident size (VmHWM) to the current one.
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    base = status("VmRSS:")
    result = read()
    return result, status("VmHWM:") - base

def parquet():
    try:
        return "read " + str(sum(1 for _ in read_rows(sys.argv[2])))
    except DatasetRefused as e:
        return e.reason

rows, jsonl = growth(lambda: [(r.row, getattr(r, "reason", "ok")) for r in read_rows(sys.argv[1])])
refused, parquet_bytes = growth(parquet)
array_rows, array = growth(lambda: [(r.row, getattr(r, "reason", "ok")) for r in read_rows(sys.argv[3])])
print(json.dumps({"rows": rows, "jsonl_bytes": jsonl, "parquet": refused, "parquet_bytes": parquet_bytes,
                  "array_rows": array_rows, "array_bytes": array}))
"""

WRITE_PARQUET = """
import sys, pyarrow as pa, pyarrow.parquet as pq
rows = 300
pq.write_table(pa.table({"prompt": [str(i) + "x" * (1 << 20) for i in range(rows)]}), sys.argv[1],
               row_group_size=rows, use_dictionary=False, compression="zstd")
"""


def test_reading_hostile_files_stays_within_the_stated_memory(tmp_path):
    """The bounds of jobrunner.shared.datasets, measured as the reader's peak resident memory over its
    baseline: a JSONL file of a 256 MB line, JSON nested 2 million deep and the largest row admitted
    costs at most 6 x MAX_ROW_BYTES (the largest row, its text and its objects; 87 MiB measured);
    a Parquet row group over MAX_ROW_GROUP_BYTES is refused from its metadata (5 MiB measured). The
    same rows as the elements of one JSON array cost the same bound."""
    jsonl, array = tmp_path / "hostile.jsonl", tmp_path / "hostile.json"
    for path, start, between, end in ((jsonl, b"", b"\n", b""), (array, b"[", b",\n", b"]")):
        with open(path, "wb") as f:
            f.write(start + json.dumps({"prompt": "first"}).encode() + between + b'{"prompt": "')
            for _ in range(256):
                f.write(b"x" * MiB)
            f.write(b'"}' + between + b"[" * (2 * MiB) + b"]" * (2 * MiB) + between)
            f.write(json.dumps({"prompt": "\ud800"}).encode() + between + b"\xc3\x28" + between)
            f.write(json.dumps({"messages": [{"role": "user", "content": "y" * (MAX_ROW_BYTES - 100)}]}).encode()
                    + end)  # the largest row
    parquet = tmp_path / "one-group.parquet"
    subprocess.run([sys.executable, "-c", WRITE_PARQUET, str(parquet)], check=True, timeout=120)
    proc = subprocess.run([sys.executable, "-c", MEASURE, str(jsonl), str(parquet), str(array)], capture_output=True,
                          text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert [tuple(r) for r in got["rows"]] == [(0, "ok"), (1, "too_large"), (2, "too_deep"), (3, "invalid_utf8"),
                                               (4, "invalid_utf8"), (5, "ok")]
    assert got["jsonl_bytes"] <= 6 * MAX_ROW_BYTES, got
    assert got["parquet"].startswith("row group 0 holds") and MAX_ROW_GROUP_BYTES < 300 * MiB, got
    assert got["parquet_bytes"] <= 16 * MiB, got
    assert got["array_rows"] == got["rows"] and got["array_bytes"] <= 6 * MAX_ROW_BYTES, got
