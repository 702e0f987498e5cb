"""The statistics as a table, figures (one histogram per dataset, one overview) and a Markdown summary."""

from __future__ import annotations

import math
import os
from pathlib import Path

from jobrunner.stats.dataset_stats import DatasetStats, all_lengths

COLUMNS = ("dataset", "samples", "tokens", "tok/s", "mean", "median", "p90", "p99", "max", ">1K", ">5K",
           "truncated", "cut", "cut tokens", "skipped")


def table_rows(stats: list[DatasetStats]) -> list[tuple[str, ...]]:
    rows = []
    for s in stats:
        L = s.lengths
        rows.append((
            s.dataset, f"{s.samples:,}", f"{s.completion_tokens:,}", f"{s.tokens_per_second:,.0f}",
            f"{L.mean:,.0f}", f"{L.median:,.0f}", f"{L.p90:,.0f}", f"{L.p99:,.0f}", f"{L.max:,}",
            f"{100 * L.share_over_1k:.1f}%", f"{100 * L.share_over_5k:.1f}%", f"{100 * s.truncated_share:.1f}%",
            f"{100 * s.cut_share:.1f}%", f"{100 * s.cut_token_share:.1f}%",
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


def log_bins(values: list[int], per_decade: int = 12) -> list[float]:
    """Bin edges from the smallest value to past the largest, evenly spaced in log10."""
    low = math.log10(max(1, min(values, default=1)))
    top = math.log10(max(2, max(values, default=2)) + 1)
    count = max(2, math.ceil((top - low) * per_decade))
    return [10 ** (low + (top - low) * i / count) for i in range(count + 1)]


def render_overview(output_root: str | os.PathLike, stats: list[DatasetStats], png_dir: str | os.PathLike) -> Path:
    """One figure of every dataset: response lengths and prompt lengths on shared log axes (each
    dataset's share of its responses per bin, so a small dataset reads beside a large one), the
    shares truncated at max new tokens and cut at the budget, and the budget progress."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ((responses, truncated), (prompts, progress)) = plt.subplots(2, 2, figsize=(13, 8),
                                                                       gridspec_kw={"width_ratios": [2, 1]})
    response_lengths = {s.dataset: all_lengths(output_root, s.dataset) for s in stats}
    prompt_lengths = {s.dataset: all_lengths(output_root, s.dataset, prompts=True) for s in stats}
    for ax, lengths, what in ((responses, response_lengths, "response"), (prompts, prompt_lengths, "prompt")):
        bins = log_bins([v for values in lengths.values() for v in values])
        for name, values in lengths.items():
            if values:
                ax.hist(values, bins=bins, histtype="step", linewidth=1.4, label=name,
                        weights=[1 / len(values)] * len(values))
        ax.set_xscale("log")
        ax.set_xlabel(f"{what} length (tokens, log scale)")
        ax.set_ylabel("share of the dataset's responses")
        ax.legend(fontsize=8)
    responses.set_title("response lengths")
    prompts.set_title("prompt lengths")
    names = [s.dataset for s in stats]
    rows, height = range(len(names)), 0.27
    for offset, values, color, label in (
            (-height, [s.truncated_share for s in stats], "#c44e52", "responses at max new tokens"),
            (0.0, [s.cut_share for s in stats], "#8172b2", "responses cut at the budget"),
            (height, [s.cut_token_share for s in stats], "#ccb974", "kept tokens in them")):
        truncated.barh([r + offset for r in rows], [100 * v for v in values], height=height, color=color, label=label)
    truncated.set_yticks(list(rows), names)
    truncated.set_xlabel("% of the dataset")
    truncated.set_title("truncated")
    truncated.legend(fontsize=8)
    truncated.invert_yaxis()
    budgeted = [s for s in stats if s.budget_tokens]
    if budgeted:
        progress.barh([s.dataset for s in budgeted], [s.percent_of_budget or 0.0 for s in budgeted], color="#55a868")
        progress.axvline(100, color="black", linewidth=1)
        progress.set_xlabel("% of the token budget")
    else:
        progress.barh(names, [s.completion_tokens for s in stats], color="#55a868")
        progress.set_xlabel("completion tokens (no budgets given: --config)")
    progress.set_title("budget progress")
    progress.invert_yaxis()
    fig.tight_layout()
    path = Path(png_dir) / "overview.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def state_of(s: DatasetStats) -> str:
    if not s.budget_tokens:
        return "-"
    return "budget met" if s.completion_tokens >= s.budget_tokens else "below budget"


def render_markdown(stats: list[DatasetStats], figures: list[str]) -> str:
    """The one-page summary beside the figures."""
    head = ("| dataset | samples | tokens | budget | of budget | state | mean | median | p90 | p99 | >1K | >5K "
            "| truncated | cut | cut tokens | skipped | tok/s |")
    lines = ["# Generation report", "", head, "|" + "---|" * (head.count("|") - 1)]
    for s in stats:
        L = s.lengths
        skipped = f"{s.skipped:,}" + (f" ({', '.join(f'{k} {v}' for k, v in sorted(s.skipped_by_reason.items()))})"
                                      if s.skipped_by_reason else "")
        budget = f"{s.budget_tokens:,}" if s.budget_tokens else "-"
        share = f"{s.percent_of_budget:.1f}%" if s.percent_of_budget is not None else "-"
        lines.append(f"| {s.dataset} | {s.samples:,} | {s.completion_tokens:,} | {budget} | {share} | {state_of(s)} "
                     f"| {L.mean:,.0f} | {L.median:,} | {L.p90:,} | {L.p99:,} | {100 * L.share_over_1k:.1f}% "
                     f"| {100 * L.share_over_5k:.1f}% | {100 * s.truncated_share:.1f}% | {100 * s.cut_share:.1f}% "
                     f"| {100 * s.cut_token_share:.1f}% | {skipped} "
                     f"| {s.tokens_per_second:,.0f} |")
    lines += ["", "Lengths are completion tokens per response; truncated: responses that reached max new tokens; "
              "cut: responses cut at the budget (atBudget: cut), and their share of the kept tokens; tok/s is the "
              "dataset's tokens over the span from its first request sent to its last response.", ""]
    lines += [f"![{Path(f).stem}]({Path(f).name})" for f in figures]
    return "\n".join(lines) + "\n"
