"""The local runner's pure decisions: spec errors, path and command translation, what is done already."""

from __future__ import annotations

from pathlib import Path

import pytest

from draftgen import api, local_run, plan
from draftgen.api import DatasetStatus
from draftgen.local_run import (
    JOBRUNNER,
    SpecError,
    dataset_generation,
    extract_placement,
    format_duration,
    generate_outcome,
    is_extraction_current,
    is_merge_current,
    local_argv,
    local_path,
    parse_object,
    pod_mounts,
    progress_rows,
    simulator_argv,
    with_flag_values,
)
from draftgen_contracts import names

from .conftest import quickstart


def spec_of(obj: dict) -> api.DatasetGenerationSpec:
    return parse_object(obj)[1]


# --- the spec ---------------------------------------------------------------------------------------

def test_a_bad_field_is_named_as_in_the_yaml():
    obj = quickstart()
    obj["spec"]["datasets"][1]["budgetTokens"] = 0
    obj["spec"]["merge"]["evalFraktion"] = 0.1
    with pytest.raises(SpecError) as e:
        parse_object(obj)
    assert "spec.datasets[1].budgetTokens: Input should be greater than or equal to 1" in str(e.value)
    assert "spec.merge.evalFraktion: Extra inputs are not permitted" in str(e.value)


@pytest.mark.parametrize("name", [None, "", "Has_Upper", "a/b", "n" * (names.MAX_NAME_LENGTH + 1)])
def test_metadata_name_must_be_a_dns_name(name):
    obj = quickstart()
    obj["metadata"]["name"] = name
    with pytest.raises(SpecError, match="metadata.name"):
        parse_object(obj)


def test_the_dataset_generation_is_picked_among_other_documents():
    pvc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"}}
    assert dataset_generation([pvc, quickstart(), None])["kind"] == names.KIND
    with pytest.raises(SpecError, match="expected one DatasetGeneration object, found 0"):
        dataset_generation([pvc])
    with pytest.raises(SpecError, match="found 2"):
        dataset_generation([quickstart(), quickstart()])
    with pytest.raises(SpecError, match="apiVersion"):
        dataset_generation([{**quickstart(), "apiVersion": "draftgen.io/v1"}])


# --- paths and command lines ------------------------------------------------------------------------

def test_pod_paths_map_to_the_local_folders_longest_mount_first():
    mounts = {"/data": Path("/d"), "/data/models": Path("/m")}
    assert local_path("/data/prompts/a.jsonl", mounts) == "/d/prompts/a.jsonl"
    assert local_path("/data/models/tiny", mounts) == "/m/tiny"
    assert local_path("/data", mounts) == "/d"
    assert local_path("/database/x", mounts) == "/database/x"  # a prefix of a name is not a mount
    assert local_path("/opt/prompts.jsonl", mounts) == "/opt/prompts.jsonl"  # in the image: as it is


def test_the_operators_merge_and_extract_commands_run_here_with_local_paths():
    spec = spec_of(quickstart())
    mounts = pod_mounts(spec, Path("/d"), Path("/m"))
    merge = local_argv(plan.merge_command("qs", spec), mounts)
    assert merge[:len(JOBRUNNER) + 1] == [*JOBRUNNER, "merge"]
    assert merge[merge.index("--output-root") + 1] == "/d/qs"
    assert merge[merge.index("--corpus-dir") + 1] == "/d/qs/corpus"
    extract = local_argv(plan.extract_command("qs", spec), mounts)
    assert extract[extract.index("--model") + 1] == "/m/tiny"
    with pytest.raises(ValueError, match="not a jobrunner command"):
        local_argv(["python3", "-m", "sglang.launch_server"], mounts)


def test_extraction_runs_on_the_device_asked_for_not_the_pods_placement():
    spec = spec_of(quickstart())
    assert extract_placement("cpu") == ["--device", "cpu"]
    assert extract_placement("auto") == ["--device-map", "auto"]
    argv = plan.extract_command("qs", spec, placement=extract_placement("cuda:1"))
    assert "--device-map" not in argv and argv[argv.index("--device") + 1] == "cuda:1"


def test_flag_values_are_replaced_at_every_occurrence():
    argv = ["--host", "$(POD_IP)", "--port", "30000", "--x", "1", "--host", "0.0.0.0"]
    assert with_flag_values(argv, {"--host": "127.0.0.1", "--port": "0"}) == [
        "--host", "127.0.0.1", "--port", "0", "--x", "1", "--host", "127.0.0.1"]


def test_the_simulator_gets_the_pods_server_flags_on_a_free_loopback_port():
    spec = spec_of(quickstart())
    argv = simulator_argv(spec, "/m/tiny")
    assert argv[:len(JOBRUNNER) + 1] == [*JOBRUNNER, "simulate"]
    assert argv[argv.index("--host") + 1] == "127.0.0.1" and argv[argv.index("--port") + 1] == "0"
    assert argv[argv.index("--model-path") + 1] == "/m/tiny"
    assert argv[argv.index("--context-length") + 1] == "2048"
    assert argv[-len(spec.server.args):] == spec.server.args  # the quickstart's own simulator flags


def test_a_real_servers_args_are_not_given_to_the_simulator():
    obj = quickstart()
    obj["spec"]["server"].update(command=["python3", "-m", "sglang.launch_server"],
                                 args=["--mem-fraction-static", "0.88"])
    argv = simulator_argv(spec_of(obj), "/m/tiny")
    assert "--mem-fraction-static" not in argv
    assert argv[argv.index("--port") + 1] == "0"


def test_server_replicas_are_ignored_locally():
    spec = spec_of(quickstart())
    assert spec.server.replicas == 2
    assert local_run.local_spec(spec).server.replicas == 1


# --- what is done already ---------------------------------------------------------------------------

MANIFEST = {"policies": {"seed": 0, "truncated": "mark"},
            "inputs": [{"path": "generate/a/part-r000.jsonl", "bytes": 100},
                       {"path": "generate/b/part-r000.jsonl", "bytes": 50}]}
INPUTS = {"generate/a/part-r000.jsonl": 100, "generate/b/part-r000.jsonl": 50}


def test_a_merge_is_current_only_for_the_same_files_sizes_and_settings():
    assert is_merge_current(MANIFEST, INPUTS, {"seed": 0, "truncated": "mark"})
    assert not is_merge_current(None, INPUTS, {"seed": 0, "truncated": "mark"})
    assert not is_merge_current(MANIFEST, {**INPUTS, "generate/a/part-r000.jsonl": 120}, MANIFEST["policies"])
    assert not is_merge_current(MANIFEST, {**INPUTS, "generate/c/part-r000.jsonl": 1}, MANIFEST["policies"])
    assert not is_merge_current(MANIFEST, INPUTS, {"seed": 1, "truncated": "mark"})


def test_an_extraction_is_current_when_completed_after_the_corpus_was_committed():
    assert is_extraction_current({"complete": True}, index_mtime_ns=2, manifest_mtime_ns=1)
    assert not is_extraction_current({"complete": False}, 2, 1)  # killed half-way: resume it
    assert not is_extraction_current({"complete": True}, 1, 2)  # the corpus was merged again since
    assert not is_extraction_current({"complete": True}, 1, 1)  # cannot tell: redo (it resumes by sample id)
    assert not is_extraction_current(None, 0, 1)


def test_generate_is_restarted_after_transient_failures_a_bounded_number_of_times():
    assert generate_outcome(0, 1) == "done"
    assert generate_outcome(75, 1) == "restart"
    assert generate_outcome(75, local_run.GENERATE_ATTEMPTS) == "failed"
    assert generate_outcome(1, 1) == "failed"
    assert generate_outcome(2, 1) == "failed"


# --- progress ---------------------------------------------------------------------------------------

def test_progress_rows_show_percent_rate_and_eta_while_generating():
    rows = progress_rows([
        DatasetStatus(name="a", budget_tokens=1000, tokens=250, state="Generating", tokens_per_second=50.0),
        DatasetStatus(name="b", budget_tokens=1000, tokens=1020, state="BudgetMet"),
        DatasetStatus(name="c", budget_tokens=1000, tokens=0, state="Generating"),
    ])
    assert rows[0] == ("a", "250", "1,000", "25.0", "Generating", "50", "15s")
    assert rows[1] == ("b", "1,020", "1,000", "102.0", "BudgetMet", "-", "-")
    assert rows[2][-1] == "-"  # no rate yet: no ETA


@pytest.mark.parametrize("seconds,text", [(None, "-"), (0.4, "0s"), (59, "59s"), (61, "1m01s"), (3725, "1h02m")])
def test_durations(seconds, text):
    assert format_duration(seconds) == text



def test_the_live_table_and_the_plain_lines_show_the_same_rows():
    import io

    statuses = [DatasetStatus(name="chat", budget_tokens=2000, tokens=500, state="Generating", tokens_per_second=100.0)]
    live, plain = io.StringIO(), io.StringIO()
    with local_run.ProgressView(live, tty=True) as view:
        view.show(statuses)
    with local_run.ProgressView(plain, tty=False) as view:
        view.show(statuses, final=True)
        view.show(statuses, final=True)  # nothing moved: no second block
    for text in (live.getvalue(), plain.getvalue()):
        assert "generate: 25.0% of the budgets" in text
        assert all(cell in text for cell in ("chat", "500", "2,000", "25.0", "Generating", "100", "15s"))
    assert "│" in live.getvalue()  # rich's table
    assert plain.getvalue().count("of the budgets") == 1


def test_output_of_other_replicas_is_recognised_by_its_part_names():
    parts = [Path("generate/a/part-r000.jsonl"), Path("generate/a/part-r002.jsonl"), Path("generate/b/part-r002.jsonl")]
    assert local_run.other_replicas(parts) == [2]
    assert local_run.other_replicas(parts[:1]) == []
