"""`jobrunner rank` as a worker rank runs it: a follower that reads its replica's report as it is
when the group goes."""

import argparse
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from draftgen_contracts import exit_codes, names
from draftgen_contracts.progress import ProgressDocument
from draftgen_dev.builders import generate_config
from jobrunner.group import follower, rank
from jobrunner.shared.coordination import FileCoordinator


class Health(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's name)
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_a_group_the_leader_ends_in_order_ends_its_worker_rank_with_success(tmp_path, monkeypatch):
    """The leader publishes `finished` after the worker rank started, then its server and rendezvous
    go: the worker reads the report as it is then, and exits 0 (a copy taken at its start had no
    `finished`, so it exited 1 and the whole group was started again for nothing)."""
    health = ThreadingHTTPServer(("127.0.0.1", 0), Health)
    threading.Thread(target=health.serve_forever, daemon=True).start()
    rendezvous = socket.create_server(("127.0.0.1", 0))
    config = generate_config(f"http://127.0.0.1:{health.server_port}", tmp_path / "out", None,
                             [{"name": "a", "path": tmp_path / "p.jsonl", "budget_tokens": 10}], replicas=1)
    (tmp_path / "config.json").write_text(json.dumps(config.to_document()))
    (tmp_path / "leader").write_text("127.0.0.1\n")
    monkeypatch.setenv(names.COMPLETION_INDEX_ENV, "1")  # a worker rank
    monkeypatch.setattr(rank, "follow", lambda *a, **kw: follower.follow(*a, interval_s=0.05, **kw))
    args = argparse.Namespace(leader_file=str(tmp_path / "leader"), dist_port=rendezvous.getsockname()[1],
                              command=["--", "jobrunner", "generate", "--config", str(tmp_path / "config.json")])

    def leader_ends_the_group():
        time.sleep(0.3)  # after the worker started
        FileCoordinator(config.coordination_directory(), 0).publish(
            ProgressDocument(replica=0, replicas=1, updated_at=time.time(), finished=True))
        rendezvous.close()
        health.shutdown()
        health.server_close()
    threading.Thread(target=leader_ends_the_group).start()
    assert rank.main(args) == exit_codes.OK  # in the main thread: the follower handles SIGTERM
