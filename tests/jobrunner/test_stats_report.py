"""Statistics from summaries (they survive restarts) and the report command."""

import argparse

from jobrunner import report
from jobrunner.output import PartWriter
from jobrunner.stats import RateMeter, dataset_stats


def test_rate_meter_window():
    m = RateMeter(window_s=10)
    m.add(0.0, 100)
    m.add(5.0, 100)
    assert m.rate(10.0) == 20.0
    assert m.rate(20.0) == 0.0  # both events left the window


def write_part(root, dataset, replica, rows, n, reason="stop"):
    w = PartWriter(root, dataset, replica)
    for row in rows:
        w.append_record({"sample_id": f"{dataset}/{row:09d}", "dataset": dataset, "row": row, "input_ids": [1],
                         "output_ids": [0] * n, "finish_reason": reason, "prompt_tokens": 1,
                         "completion_tokens": n, "prompt_class": "short", "sampling_params": {}, "rid": "r",
                         "timings": {"queued_s": 0, "e2e_s": 1, "finished_at": 100.0 + row}})
    w.append_skip(10_000 + replica, "bad_json")
    w.close()


def test_dataset_stats_fold_replicas(tmp_path):
    write_part(tmp_path, "d", 0, [0, 2], 1500)
    write_part(tmp_path, "d", 1, [1, 3], 10, reason="length")
    s = dataset_stats(tmp_path, "d", budget_tokens=6020)
    assert (s.samples, s.completion_tokens, s.truncated, s.skipped) == (4, 3020, 2, 2)
    assert s.truncated_share == 0.5 and s.skipped_by_reason == {"bad_json": 2}
    assert s.tokens_per_second == 3020 / 3 and s.eta_s == 3000 / (3020 / 3)
    assert s.lengths.share_over_1k == 0.5


def test_report_table_and_pngs(tmp_path, capsys):
    write_part(tmp_path, "d", 0, range(20), 700)
    png_dir = tmp_path / "png"
    assert report.main(argparse.Namespace(output_root=str(tmp_path), png_dir=str(png_dir), json=False)) == 0
    out = capsys.readouterr().out
    assert "d" in out and "14,000" in out
    assert (png_dir / "d.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_histogram_markers_that_coincide_share_one_label():
    from jobrunner.report import marker_labels

    assert marker_labels({"median": 400.0, "p90": 400.0}) == [(400.0, "median=p90")]
    assert marker_labels({"median": 120.0, "p90": 400.0}) == [(120.0, "median"), (400.0, "p90")]
