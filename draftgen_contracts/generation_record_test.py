import json
from dataclasses import replace

from draftgen_contracts.generation_record import CutAtBudget, GenerationRecord, SkipEntry, Timings

RECORD = GenerationRecord(sample_id="chat/000000007", dataset="chat", row=7, input_ids=[1, 2], output_ids=[5, 6, 2],
                          finish_reason="length", prompt_tokens=2, completion_tokens=3, prompt_class="short",
                          sampling_params={"temperature": 0.7}, rid="dg-7", timings=Timings(0.5, 1.25, 1700000000.0),
                          source_id="q-7", cut=CutAtBudget(generated=9, estimated=3))


def test_a_record_reads_back_as_it_was_written_with_the_part_files_field_names():
    line = json.dumps(RECORD.to_json())
    assert GenerationRecord.from_json(json.loads(line)) == RECORD
    assert json.loads(line)["cut_at_budget"] is True and json.loads(line)["cut"] == {"generated": 9, "estimated": 3}
    assert "source" not in json.loads(line)  # generated here: only a trace says its source


def test_a_line_written_before_the_type_reads_too():
    older = {"sample_id": "a/000000001", "dataset": "a", "row": 1, "input_ids": [1], "output_ids": [4],
             "finish_reason": "stop", "prompt_tokens": 1, "completion_tokens": 1, "rid": "r",
             "timings": {"e2e_s": 0.1, "finished_at": 5.0}, "source": "trace", "cut_at_budget": True}
    record = GenerationRecord.from_json(older)
    assert record.trace and record.cut == CutAtBudget(1) and record.timings == Timings(0.0, 0.1, 5.0)
    assert record.prompt_class is None and record.sampling_params == {}


def test_the_writers_one_check_names_what_is_wrong():
    assert RECORD.problem() is None
    assert replace(RECORD, completion_tokens=4).problem() == "completion_tokens (4) != len(output_ids) (3)"
    assert "finish_reason 'abort'" in replace(RECORD, finish_reason="abort").problem()
    assert replace(RECORD, row=8).problem() == "sample_id 'chat/000000007' is not 'chat/000000008'"


def test_a_skip_entry_reads_back():
    entry = SkipEntry("a/000000003", 3, "bad_json", "line 4: Expecting value")
    assert SkipEntry.from_json(json.loads(json.dumps(entry.to_json()))) == entry
