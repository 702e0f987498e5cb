"""A validating admission webhook for tests: an HTTPS server on 127.0.0.1 (its cert signed by the
local cluster's CA) that answers the API server's AdmissionReviews for Job creations in one namespace
as the test says: allow, or deny with an HTTP code and a message. A webhook may choose the code the
API server returns for its denial (`response.status.code`, admission.k8s.io/v1), so one server stands
for a policy engine's denial (403), a throttling proxy (429), a conflict (409); stopped while its
configuration stays, it is a webhook that cannot be reached (failurePolicy Fail: HTTP 500).

    with AdmissionWebhook(cluster, namespace) as hook:
        hook.deny(403, "Jobs need a cost-center label")
"""

from __future__ import annotations

import base64
import json
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from kubernetes import client

from . import pki

WEBHOOK_NAME = "jobs.draftgen.test"


class AdmissionWebhook:
    def __init__(self, cluster, namespace: str):
        self.cluster, self.namespace = cluster, namespace
        self.config_name = f"draftgen-test-{namespace}"
        self.answer: tuple[int, str] | None = None  # None: allow; else (HTTP code, message) of a denial
        self.reviews = 0  # AdmissionReviews answered
        cert, key = pki.issue_serving_cert(cluster.pki, cluster.state_dir / "webhooks", f"webhook-{namespace}")
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(str(cert), str(key))
        self.server: ThreadingHTTPServer | None = None
        self.port = 0
        self.api = cluster.api_client()

    # --- what it answers ------------------------------------------------------------------------------
    def allow(self) -> None:
        self.answer = None

    def deny(self, code: int, message: str) -> None:
        self.answer = (code, message)

    def review(self, request: dict) -> dict:
        self.reviews += 1
        response = {"uid": request["request"]["uid"], "allowed": self.answer is None}
        if self.answer is not None:
            response["status"] = {"code": self.answer[0], "message": self.answer[1]}
        return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}

    # --- the server ------------------------------------------------------------------------------------
    def start(self) -> "AdmissionWebhook":
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                out = json.dumps(hook.review(body)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.server.socket = self.context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True, name="admission-webhook").start()
        return self

    def stop_serving(self) -> None:
        """Stop answering; the configuration stays, so the API server cannot reach its webhook."""
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    # --- its registration ----------------------------------------------------------------------------
    def register(self) -> None:
        ca = base64.b64encode(self.cluster.pki.ca_cert.read_bytes()).decode()
        client.AdmissionregistrationV1Api(self.api).create_validating_webhook_configuration({
            "metadata": {"name": self.config_name},
            "webhooks": [{
                "name": WEBHOOK_NAME, "admissionReviewVersions": ["v1"], "sideEffects": "None",
                "failurePolicy": "Fail", "timeoutSeconds": 2,
                "clientConfig": {"url": f"https://127.0.0.1:{self.port}/validate", "caBundle": ca},
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": self.namespace}},
                "rules": [{"apiGroups": ["batch"], "apiVersions": ["v1"], "operations": ["CREATE"],
                           "resources": ["jobs"], "scope": "Namespaced"}],
            }]})

    def unregister(self) -> None:
        try:
            client.AdmissionregistrationV1Api(self.api).delete_validating_webhook_configuration(
                self.config_name)
        except client.ApiException as e:
            if e.status != 404:
                raise

    def __enter__(self) -> "AdmissionWebhook":
        self.start()
        self.register()
        return self

    def __exit__(self, *exc) -> None:
        self.unregister()
        self.stop_serving()
        self.api.close()
