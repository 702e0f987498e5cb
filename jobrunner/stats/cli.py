"""`jobrunner stats`'s command line: the budgets from the run's config or the options, the table, the figures."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from draftgen_contracts import exit_codes
from jobrunner.stats.dataset_stats import all_dataset_stats
from jobrunner.stats.render import render_histograms, render_markdown, render_overview, render_table


def budgets_from(config_path: str | None, pairs: list[str] | None) -> dict[str, int]:
    """The budgets of the run's generate config, then NAME=TOKENS pairs over them."""
    budgets = {}
    if config_path:
        from jobrunner.shared.config import load_config

        budgets = {d.name: d.budget_tokens for d in load_config(config_path).datasets}
    for pair in pairs or ():
        name, _, tokens = pair.partition("=")
        budgets[name] = int(tokens)
    return budgets


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--output-root", required=True, help="the generate output root")
    parser.add_argument("--png-dir", default=None,
                        help="write the figures (one per dataset, overview.png) and stats.md here")
    parser.add_argument("--config", default=None, help="the run's generate config, for the budgets")
    parser.add_argument("--budget", action="append", metavar="DATASET=TOKENS", help="a dataset's budget (repeatable)")
    parser.add_argument("--json", action="store_true", help="print the statistics as JSON instead of a table")


def main(args: argparse.Namespace) -> int:
    stats = all_dataset_stats(args.output_root, budgets_from(args.config, args.budget))
    if not stats:
        print(f"no generate output under {args.output_root}")
        return exit_codes.FAILED
    print(json.dumps([s.to_json() for s in stats], indent=2) if args.json else render_table(stats))
    if args.png_dir:
        figures = [render_overview(args.output_root, stats, args.png_dir),
                   *render_histograms(args.output_root, stats, args.png_dir)]
        summary = Path(args.png_dir) / "stats.md"
        summary.write_text(render_markdown(stats, [str(f) for f in figures]))
        for path in (*figures, summary):
            print(f"wrote {path}")
    return exit_codes.OK
