"""draftgen's Kubernetes operator (kopf). Run it with `draftgen operator`."""
