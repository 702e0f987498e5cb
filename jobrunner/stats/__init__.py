"""`jobrunner stats --output-root D [--png-dir P] [--config F]`: per-dataset statistics as a table;
with --png-dir also one histogram per dataset, one overview figure of every dataset (response and
prompt lengths on shared log axes, truncation and cuts at the budget, budget progress) and a Markdown summary (stats.md).

Computed from the durable part summaries (`dataset_stats`), so it works during a run, after a
restart, and after the run, without rereading the records. --config (the run's generate config)
gives the budgets.

    dataset_stats  the numbers, from the part summaries
    render         the table, the figures, stats.md
    cli            the command line
"""
