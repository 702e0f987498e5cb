"""draftgen's contracts: the one definition of every concept its parts share.

This is the bottom layer. Everything else imports it and it imports nothing of the project
(tests/test_layers.py fails on a back-import), nor any HTTP or Kubernetes library: it holds names,
states, formats and decisions, never I/O.

    names            API group/version/kind, labels, child-object names, file names and their parsers
    states           dataset states, pipeline stages and phases, with their done sets
    progress         the progress document a generate process publishes, and its readers' parser
    generate_config  the generate config the operator and the local runner write, and jobrunner reads
    replica_status   status.replicas[]: each replica's folded report, which the replicas read back
    preflight_report the preflight's findings: the preflight.json document and status.preflight
    extraction_progress  what a running extraction publishes: status.extraction and its measured rate
    exit_codes       what each process exit status means, and the Jobs' retry rule's numbers
    budget           the token-budget decisions
    budget_shares    how the replicas share one budget
    prompt_classes   the prompt class (spec and config alike) and the default table
    sglang_protocol  SGLang's /generate wire contract: sampling params, rids, errors, responses
    length_stats     the one length-distribution summary (the report and the corpus manifest)
    provenance       what made a corpus: the keys of a generation session and their hashes
    hidden_state_layout  bytes per stored token of the EAGLE-3 hidden states
    validation       pydantic errors as field paths
    timestamps       the one UTC timestamp format of status and events
"""
