"""A JSON array's elements found one at a time, whatever the chunk boundaries cut through."""

import io
import json

import pytest

from jobrunner.shared.json_array import ArrayRefused, array_elements

ROWS = [{"prompt": 'brackets ",]}[{ and an escaped quote \\" in a string'}, {"messages": [{"role": "user"}]},
        [1, [2, {}]], "text", 5, None]


def elements(data: bytes, limit: int = 10_000, chunk: int = 1 << 20) -> list:
    return list(array_elements(io.BytesIO(data), limit, chunk))


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 64, 1 << 20])
def test_every_element_comes_out_whole_whatever_the_chunks(chunk):
    for text in (json.dumps(ROWS), json.dumps(ROWS, indent=2), "\ufeff \n" + json.dumps(ROWS)):
        assert [json.loads(e) for e in elements(text.encode(), chunk=chunk)] == ROWS


def test_an_element_over_the_limit_is_its_length_and_the_next_still_comes():
    big = json.dumps({"prompt": "x" * 500})
    got = elements(f"[{big}, {{\"prompt\": \"ok\"}}]".encode(), limit=100, chunk=16)
    assert got[0] == len(big) and json.loads(got[1]) == {"prompt": "ok"}


def test_a_cut_array_and_text_after_it_are_elements_that_do_not_parse():
    assert elements(b'[{"a": 1}, {"b": [2') == [b'{"a": 1}', b' {"b": [2']
    assert elements(b'[1, 2] and more') == [b"1", b" 2", b" and more"]
    assert elements(b"[]\n") == [] and elements(b"[ ]") == []


def test_deep_nesting_is_counted_not_recursed_into():
    deep = b"[" + b"[" * 100_000 + b"]" * 100_000 + b", 1]"
    got = elements(deep, limit=1 << 20, chunk=4096)
    assert len(got) == 2 and got[1] == b" 1"


def test_a_file_that_is_no_array_is_refused():
    with pytest.raises(ArrayRefused, match="does not start with"):
        elements(b'{"prompt": "a"}\n')
