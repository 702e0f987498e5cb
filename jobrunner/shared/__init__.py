"""The libraries jobrunner's stages share: each imports only the contracts, the SGLang client
(`jobrunner.sglang`) and its siblings here, never a stage (tests/test_layers.py says so).

    rows as they come   dataset_files (a file, folder or glob), datasets (JSONL, JSON array, Parquet
                        in the common shapes), json_array, glaive, openai_batch, row_error
    prompts             rows to exact token ids (chat template, prompt class, room left);
                        recommended_sampling (the model's own defaults)
    generate's files    config (the generate config), output (crash-safe part files and their totals),
                        coordination (progress between replicas) and coordination_kube, report_patch
    the corpus          corpus (its format), vocabulary (the draft vocabulary), stats (lengths)
    files               atomic (replace by rename), full_volume (a full volume, said as such)
"""
