"""Statistics from summaries (they survive restarts) and the stats command."""

import argparse
import json

from draftgen_contracts.generation_record import CutAtBudget, Timings
from draftgen_dev.builders import generate_config, generation_record
from jobrunner.stats import cli, render
from jobrunner.shared.output import PartWriter
from jobrunner.shared.rate_meter import RateMeter
from jobrunner.stats.dataset_stats import dataset_stats


def test_rate_meter_window():
    m = RateMeter(window_s=10)
    m.add(0.0, 100)
    m.add(5.0, 100)
    assert m.rate(10.0) == 20.0
    assert m.rate(20.0) == 0.0  # both events left the window


def write_part(root, dataset, replica, rows, n, reason="stop", e2e_s=1.0, spacing_s=1.0, cut_rows=()):
    w = PartWriter(root, dataset, replica)
    for row in rows:
        w.append_record(generation_record(dataset, row, [1] * 3, [0] * n, reason,
                                          timings=Timings(0.0, e2e_s, 100.0 + spacing_s * row),
                                          cut=CutAtBudget(n) if row in cut_rows else None))
    w.append_skip(10_000 + replica, "bad_json")
    w.close()


def test_dataset_stats_fold_replicas(tmp_path):
    write_part(tmp_path, "d", 0, [0, 2], 1500)
    write_part(tmp_path, "d", 1, [1, 3], 10, reason="length")
    s = dataset_stats(tmp_path, "d", budget_tokens=6020)
    assert (s.samples, s.completion_tokens, s.truncated, s.skipped) == (4, 3020, 2, 2)
    assert s.prompt_tokens == 12 and s.prompt_lengths.median == 3
    assert s.truncated_share == 0.5 and s.skipped_by_reason == {"bad_json": 2}
    # From the first request sent (finished at 100 after 1 s) to the last response (103).
    assert s.tokens_per_second == 3020 / 4 and s.eta_s == 3000 / (3020 / 4)
    assert s.lengths.share_over_1k == 0.5


def test_responses_cut_at_the_budget_are_counted_apart_from_those_at_max_new_tokens(tmp_path):
    write_part(tmp_path, "d", 0, [0, 1, 2, 3], 100, reason="length", cut_rows={1, 2, 3})
    write_part(tmp_path, "d", 1, [4, 5, 6, 7], 300)
    s = dataset_stats(tmp_path, "d")
    assert (s.truncated, s.truncated_share) == (1, 1 / 8)
    assert (s.cut, s.cut_share, s.cut_tokens, s.cut_token_share) == (3, 3 / 8, 300, 300 / 1600)
    assert render.table_rows([s])[0][render.COLUMNS.index("cut"):render.COLUMNS.index("skipped")] == (
        "37.5%", "18.8%")


def test_a_small_dataset_whose_responses_finish_together_has_a_rate_that_makes_sense(tmp_path):
    """Three 10 s requests finishing within 20 ms: 150 tokens in about 10 s, not in 20 ms."""
    write_part(tmp_path, "small", 0, [0, 1, 2], 50, e2e_s=10.0, spacing_s=0.01)
    assert round(dataset_stats(tmp_path, "small").tokens_per_second, 1) == round(150 / 10.02, 1)


def test_stats_table_figures_and_summary(tmp_path, capsys):
    write_part(tmp_path, "d", 0, range(20), 700)
    write_part(tmp_path, "e", 0, range(5), 40, reason="length")
    config = tmp_path / "generate.json"
    config.write_text(json.dumps(generate_config("http://127.0.0.1:1", tmp_path, None, [
        {"name": "d", "path": "x", "budget_tokens": 10000, "pretokenized": True},
        {"name": "e", "path": "y", "budget_tokens": 1000, "pretokenized": True}]).to_document()))
    png_dir = tmp_path / "png"
    args = argparse.Namespace(output_root=str(tmp_path), png_dir=str(png_dir), json=False, config=str(config),
                              budget=None)
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    assert "d" in out and "14,000" in out
    for figure in ("d.png", "e.png", "overview.png"):
        assert (png_dir / figure).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    summary = (png_dir / "stats.md").read_text()
    assert "| d | 20 | 14,000 | 10,000 | 140.0% | budget met | 700 | 700 |" in summary
    assert "| e | 5 | 200 | 1,000 | 20.0% | below budget |" in summary and "| 100.0% |" in summary
    assert "![overview](overview.png)" in summary


def test_log_bins_cover_every_length():
    bins = render.log_bins([3, 16384])
    assert round(bins[0], 6) == 3 and bins[-1] > 16384 and all(a < b for a, b in zip(bins, bins[1:]))


def test_histogram_markers_that_coincide_share_one_label():
    from jobrunner.stats.render import marker_labels

    assert marker_labels({"median": 400.0, "p90": 400.0}) == [(400.0, "median=p90")]
    assert marker_labels({"median": 120.0, "p90": 400.0}) == [(120.0, "median"), (400.0, "p90")]
