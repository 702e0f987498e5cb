"""`jobrunner report --output-root D [--png-dir P]`: per-dataset statistics as a table and PNG histograms.

Computed from the durable part summaries (jobrunner.stats), so it works during a run, after a
restart, and after the run, without rereading the records.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from jobrunner.stats import DatasetStats, all_dataset_stats, all_lengths

COLUMNS = ("dataset", "samples", "tokens", "tok/s", "mean", "median", "p90", "p99", "max", ">1K", ">5K",
           "truncated", "skipped")


def table_rows(stats: list[DatasetStats]) -> list[tuple[str, ...]]:
    rows = []
    for s in stats:
        L = s.lengths
        rows.append((
            s.dataset, f"{s.samples:,}", f"{s.completion_tokens:,}", f"{s.tokens_per_second:,.0f}",
            f"{L.mean:,.0f}", f"{L.median:,.0f}", f"{L.p90:,.0f}", f"{L.p99:,.0f}", f"{L.max:,}",
            f"{100 * L.share_over_1k:.1f}%", f"{100 * L.share_over_5k:.1f}%", f"{100 * s.truncated_share:.1f}%",
            f"{s.skipped:,}" + (f" ({', '.join(f'{k}: {v}' for k, v in sorted(s.skipped_by_reason.items()))})"
                                if s.skipped_by_reason else ""),
        ))
    return rows


def render_table(stats: list[DatasetStats]) -> str:
    rows = [COLUMNS, *table_rows(stats)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    lines = ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(r, widths)))
             for r in rows]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def marker_labels(markers: dict[str, float]) -> list[tuple[float, str]]:
    """One label per distinct value ("median=p90 400" when they coincide, as at max_new_tokens)."""
    by_value: dict[float, list[str]] = {}
    for name, value in markers.items():
        by_value.setdefault(value, []).append(name)
    return [(value, "=".join(names)) for value, names in by_value.items()]


def render_histograms(output_root: str | os.PathLike, stats: list[DatasetStats], png_dir: str | os.PathLike) -> list[Path]:
    """One PNG per dataset: the distribution of response lengths, median and p90 marked."""
    import matplotlib

    matplotlib.use("Agg")  # no display in pods
    import matplotlib.pyplot as plt

    png_dir = Path(png_dir)
    png_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for s in stats:
        lengths = all_lengths(output_root, s.dataset)
        fig, ax = plt.subplots(figsize=(7, 4))
        ax.hist(lengths, bins=50, color="#4878a8")
        for value, label in marker_labels({"median": s.lengths.median, "p90": s.lengths.p90}):
            ax.axvline(value, color="#c44e52", linestyle="--", linewidth=1)
            ax.text(value, ax.get_ylim()[1] * 0.95, f" {label} {value:,.0f}", fontsize=8)
        ax.set_title(f"{s.dataset}: {s.samples:,} responses, {s.completion_tokens:,} tokens")
        ax.set_xlabel("response length (tokens)")
        ax.set_ylabel("responses")
        fig.tight_layout()
        path = png_dir / f"{s.dataset}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    return written


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--output-root", required=True, help="the generate output root")
    parser.add_argument("--png-dir", default=None, help="write one length histogram per dataset here")
    parser.add_argument("--json", action="store_true", help="print the statistics as JSON instead of a table")


def main(args: argparse.Namespace) -> int:
    stats = all_dataset_stats(args.output_root)
    if not stats:
        print(f"no generate output under {args.output_root}")
        return 1
    print(json.dumps([s.to_json() for s in stats], indent=2) if args.json else render_table(stats))
    if args.png_dir:
        for path in render_histograms(args.output_root, stats, args.png_dir):
            print(f"wrote {path}")
    return 0
