"""One document into one of the run's report ConfigMaps, from a pod, with the standard library only.

The SGLang extraction runs jobrunner with the server image's Python, and SGLang 0.5.23's dependencies
bring no Kubernetes client (its venv in the real-SGLang tier has none; the extraction pod failed on
`import kubernetes` in tests/operator/test_real_sglang_pipeline.py before this). So the reports a pod
publishes (the preflight's findings, the extraction's progress) go out as one merge
PATCH over HTTPS, authenticated as any in-cluster client is: the ServiceAccount mount's token (read
each time: the kubelet rotates it), its CA and its namespace, and the API server at
KUBERNETES_SERVICE_HOST:KUBERNETES_SERVICE_PORT.
"""

from __future__ import annotations

import json
import os
import ssl
import urllib.request
from pathlib import Path

SERVICE_ACCOUNT_MOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")


def patch_report(configmap: str, key: str, text: str, mount: Path = SERVICE_ACCOUNT_MOUNT,
                 timeout_s: float = 10) -> None:
    """Set `key` of `configmap` (in the pod's own namespace) to `text`; raises on any refusal."""
    namespace = (mount / "namespace").read_text().strip()
    host = os.environ["KUBERNETES_SERVICE_HOST"]
    host = f"[{host}]" if ":" in host else host  # an IPv6 address
    url = f"https://{host}:{os.environ['KUBERNETES_SERVICE_PORT']}/api/v1/namespaces/{namespace}/configmaps/{configmap}"
    request = urllib.request.Request(
        url, data=json.dumps({"data": {key: text}}).encode(), method="PATCH",
        headers={"Authorization": f"Bearer {(mount / 'token').read_text().strip()}",
                 "Content-Type": "application/merge-patch+json"})
    with urllib.request.urlopen(request, context=ssl.create_default_context(cafile=str(mount / "ca.crt")),
                                timeout=timeout_s):
        pass
