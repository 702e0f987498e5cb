"""The extraction's reports: how often, what they count, and the rate's clock."""

import json

from draftgen_contracts import names
from jobrunner.hidden_states.progress import ExtractionReporter


class Store:
    """What the reporter reads of a ShardStore: the stored samples and tokens."""

    def __init__(self):
        self.samples, self.tokens = {}, 0

    def stored_tokens(self):
        return self.tokens


def test_reports_come_every_interval_count_what_is_on_disk_and_time_the_rate_from_the_loaded_backend(tmp_path):
    now = [100.0]
    published = []
    reporter = ExtractionReporter(tmp_path, corpus_tokens=10_000, publish=published.append, every_s=15,
                                  clock=lambda: 1_700_000_000.0 + now[0], monotonic=lambda: now[0],
                                  log=lambda *_: None)
    now[0] = 160.0  # a minute of loading weights: not part of the rate
    reporter.start()
    store = Store()
    now[0] = 170.0
    reporter.extracted_batch(1000, store)  # 10 s in: no report yet
    assert published == []
    now[0] = 176.0
    store.tokens, store.samples = 1000, {"a": {}}  # the first batch is on disk now; the second buffered
    reporter.extracted_batch(800, store)
    [first] = map(json.loads, published)
    assert first["tokens"] == 1000 and first["samples"] == 1 and first["corpus_tokens"] == 10_000
    assert first["tokens_per_second"] == round(1800 / 16, 1) and not first["finished"]
    now[0] = 180.0
    reporter.extracted_batch(200, store)  # 4 s after the last report: none
    assert len(published) == 1
    store.tokens = 2000
    reporter.report(store, finished=True)
    last = json.loads(published[-1])
    assert last["finished"] and last["tokens"] == 2000 and last["tokens_per_second"] == 100.0
    assert json.loads((tmp_path / names.EXTRACTION_KEY).read_text()) == last


def test_a_run_with_nothing_left_to_extract_reports_no_rate(tmp_path):
    reporter = ExtractionReporter(tmp_path, corpus_tokens=500, log=lambda *_: None)
    store = Store()
    store.tokens = 500  # all resumed from the shards on disk
    assert reporter.report(store, finished=True).tokens_per_second == 0.0
