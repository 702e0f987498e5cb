"""`jobrunner merge`: every dataset's generation output -> one deduplicated, shuffled, split, sharded corpus.

Two streaming passes, so memory is bounded by the bucket size whatever the corpus size:

1. Partition. Each generation record (read with `jobrunner.shared.output.iter_records`) is validated, put
   through the truncated-response policy, encoded as its corpus line and given a key: a seeded
   128-bit BLAKE2b of its token content (prompt ids + response ids). The line goes to the bucket file
   that owns the key's range (bucket = top 64 bits * B >> 64), with the key in front.
2. Sort. Each bucket is read into memory, its lines sorted (key, then sample id), exact duplicates
   (equal keys) dropped but the first, and the lines streamed out to the train or eval shards.

Why one key does three jobs. Sorting by a keyed hash is a seeded uniform shuffle; because buckets are
key *ranges*, sorting each bucket and concatenating them is the global sort, so the output is
independent of the bucket count (that is, of the memory limit); and equal contents have equal keys,
so duplicates meet in one bucket, next to each other: dedupe costs no memory of its own (no global
hash set, which in Python would cost ~90 bytes per sample). The duplicate kept is the one with the
smallest sample id, whichever file it came from. A false duplicate needs a 128-bit collision
(probability ~n^2 / 2^129: never, at any corpus size).

The train/eval split is decided per sample by a seeded hash of its sample id, so a sample stays on
its side when other samples are added or removed.

    settings   MergeSettings: the policies, the seed, the shard sizes, the memory limit
    decisions  pure: what a record's problem is, its key, its bucket, its split, the truncation policy
    tally      what the manifest says of each dataset
    partition  pass 1: records to their buckets
    shards     pass 2: buckets sorted, deduplicated, split and written as shards; the manifest committed
    run        the merge of one output root
    cli        the command line
"""
