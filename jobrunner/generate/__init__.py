"""`jobrunner generate`: responses through SGLang /generate, within per-dataset token budgets.

Per dataset, in the configured order:

- a dataset already at or over its budget (own durable tokens + the coordinator's count from other
  replicas), at its sample cap, or stopped by the coordinator, is skipped on start;
- rows are read and tokenized on one worker thread (`prepared_prompts`), a chunk ahead, so the
  event loop only sends requests and writes records; rows already done (written or skipped) are
  passed over before tokenization;
- each prompt waits for a slot of its class (short/long, shared by all datasets) and for the
  dataset's own limit, then runs as an asyncio Task;
- when a completed response makes the dataset's total reach its budget (or cap), or the
  coordinator stops it, dispatch stops, every in-flight request of the dataset is aborted at the
  server (`/abort_request`, so no GPU time is spent on it after that) and its Task is cancelled
  (Tasks, never bare coroutines: cancelling a coroutine object does nothing, which is how the
  reference run's early stop hung);
- each replica owns a fixed share of every budget and one replica, the receiver, makes the last
  part once the others have settled (draftgen_contracts.budget_shares, docs/budgets.md); a dataset
  sends no more while its requests in flight are expected to bring what this replica may still add
  (`length_model`: Kaplan-Meier over the completed lengths and the partial ones in flight), and the
  next dataset starts meanwhile; if they fall short, it dispatches again, sharing the class slots;
- the next dataset also starts when this one waits for a full class while another has room;
- when a dataset runs out of rows, the next dataset starts at once while the last requests of the
  previous one finish: the class slots are shared, so the GPUs stay full across the switch.

A 400 for one sample (or a response that breaks the contract) is recorded as a skipped row with its
reason. A request that fails after the client's retries, or that the server aborted on its own, is
not recorded: its row is generated again on the next run, and the process exits with
`exit_codes.RETRY_LATER` so that a Job restarts it. SIGTERM stops dispatch, aborts in flight, syncs and
exits 0.

    dataset_run  one dataset's live state in this process, and the budget questions it answers
    length_model what the requests in flight are expected to bring, from the lengths seen so far
    feed         rows read and tokenized off the event loop, a chunk ahead
    engine       dispatch, completion, the stop at the budget, publishing progress
    run          one generate process: its client, coordinator, signals and exit status
    cli          the command line
"""
