"""`jobrunner validate --corpus C [--states O]`: check a corpus and its hidden states before training.

Checks, each counted over what it looked at:
- corpus shards: every shard the manifest lists exists with its sha256 and record count;
- corpus samples: ids and loss mask of equal length, the mask 0 on the prompt and 1 on exactly the
  generated tokens, no sample id twice;
- states, every sample once: each sample of `index.json` is in exactly one shard (the shard headers
  are read, not trusted from the index), and every corpus sample is there unless counted skipped;
- states, ids and lengths: each stored sample holds the corpus sample's ids and loss mask (cut at the
  run's max_len as extraction cuts them) and states of its length, hidden size and aux layers;
- states, finite: no NaN or Inf in any state (fp8 states dequantized first).

It prints one table row per check and the first problems found, and exits 1 on any problem.

    checks  what each check finds wrong (pure), the table
    run     the checks over the files
    cli     the command line
"""
