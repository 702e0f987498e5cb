"""`draftgen run`: the local executor. The operator's pipeline, run with local processes.

The pipeline logic is the operator's own: `draftgen.reconcile.decide` takes the spec, the last status
and the observed world and says which Jobs must exist, which must go, and what the status is. Only
how the world is observed and how a decision is applied differ:

    cluster (draftgen_operator)            this machine (draftgen.local)
    a Job and its pods                     a LocalJob: its container's command as one process at a
                                           time, retried as the Job would be
    the generate config's ConfigMap        its keys as files (<output>/local-run/volumes/configmaps/)
    report ConfigMaps                      progress-rNNN.json files (file coordination)
    the object's status                    <output>/local-run/state.json, and the terminal
    Events                                 lines on the terminal
    volumes mounted at /data, the model    --data-dir and --model-dir (the same paths under them)
    the SGLang sidecar                     --server-url, or a `jobrunner simulate` child

    spec_file   the manifest, checked with the admission rules (draftgen.admission)
    paths       where the pods' paths are on this machine
    pod_process a decided Job as a local process: every difference from a pod, in one place
    server      the generation server: a running one, or the simulator
    local_job   process supervision: one Job as local processes
    state       what a rerun continues from
    progress_view  the live table
    executor    observe -> decide -> apply, until Succeeded or Failed
    cli         the command line
"""
