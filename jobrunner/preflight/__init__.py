"""Preflight: a run checked on the CPU before any GPU is taken (docs/preflight.md).

    problem        PreflightProblem: what makes the run impossible, and where (file, row, field)
    model_facts    the model's config.json (the text model's, nested or not)
    tokenizer_check  the tokenizer loads, has its chat template and its special tokens
    dataset_scan   one pass over a dataset with the tokenizer: rows, skipped, prompt lengths, reach
    run            the findings of a whole run; cli: `jobrunner preflight`
"""
