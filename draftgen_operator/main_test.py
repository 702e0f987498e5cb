import json
import logging
import socket
import urllib.request

from draftgen_operator.main import JsonFormatter, answering_probes


def test_json_logs_are_one_object_per_line():
    record = logging.LogRecord("draftgen.lease", logging.INFO, __file__, 1, "holds lease %s", ("ns/x",), None)
    entry = json.loads(JsonFormatter().format(record))
    assert (entry["level"], entry["logger"], entry["message"]) == ("INFO", "draftgen.lease", "holds lease ns/x")


def test_a_standby_answers_the_probe_and_frees_the_port_for_kopf():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/healthz"
    with answering_probes(url):
        with urllib.request.urlopen(url, timeout=5) as response:
            assert response.status == 200 and json.loads(response.read()) == {"standby": True}
    with socket.socket() as s:  # kopf's endpoint binds the same address next
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
