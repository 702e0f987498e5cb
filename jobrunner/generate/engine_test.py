import asyncio

import urllib3
from kubernetes.client.exceptions import ApiException

from draftgen_dev.builders import generate_config
from jobrunner.shared.coordination import FileCoordinator
from jobrunner.generate.engine import Engine


class FlakyCoordinator(FileCoordinator):
    """The Kubernetes coordinator's failures, one round each: an ApiException publishing, a urllib3
    error reading the peers."""

    def __init__(self, directory, failures: list[Exception]):
        super().__init__(directory, 0)
        self.failures = failures
        self.published = 0

    def publish(self, progress) -> None:
        if self.failures and isinstance(self.failures[0], ApiException):
            raise self.failures.pop(0)
        super().publish(progress)
        self.published += 1

    def peers(self):
        if self.failures and isinstance(self.failures[0], urllib3.exceptions.HTTPError):
            raise self.failures.pop(0)
        return super().peers()


async def test_progress_publishing_survives_any_failure_of_one_round(tmp_path, caplog):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"input_ids": [1, 2]}\n')
    config = generate_config("http://127.0.0.1:1", tmp_path / "out", None,
                             [{"name": "a", "path": prompts, "pretokenized": True, "budget_tokens": 10}],
                             progress_interval_s=0.01)
    failures = [ApiException(status=500, reason="etcd timeout"), urllib3.exceptions.ProtocolError("reset")]
    coordinator = FlakyCoordinator(tmp_path / "coord", failures)
    engine = Engine(config, client=None, coordinator=coordinator)
    engine._open_datasets()
    loop = asyncio.create_task(engine._publish_loop())
    try:
        for _ in range(500):
            if coordinator.published >= 3 or loop.done():
                break
            await asyncio.sleep(0.01)
        assert not loop.done(), "the loop ended"
    finally:
        loop.cancel()
        for writer in engine.writers.values():
            writer.close()
    assert not failures and coordinator.published >= 3
    warnings = [r.getMessage() for r in caplog.records if r.getMessage().startswith(("progress", "the peers"))]
    assert [w.split(":")[0] for w in warnings] == ["progress not published", "the peers' progress not read"]
    assert [w.split(":")[1].strip() for w in warnings] == ["ApiException", "ProtocolError"]


async def test_an_api_server_that_hangs_never_stalls_the_event_loop(tmp_path):
    """Publishing and reading the peers wait on the API server (a time-out of 10 s each): on the event
    loop they would hold up every cut and abort meanwhile. Off it, the loop keeps its beat, and the
    last report is still the last one written."""
    import time

    class Hanging(FileCoordinator):
        def publish(self, progress) -> None:
            time.sleep(0.5)
            super().publish(progress)

        def peers(self):
            time.sleep(0.5)
            return super().peers()

    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"input_ids": [1, 2]}\n')
    config = generate_config("http://127.0.0.1:1", tmp_path / "out", None,
                             [{"name": "a", "path": prompts, "pretokenized": True, "budget_tokens": 10}],
                             progress_interval_s=0.01)
    coordinator = Hanging(tmp_path / "coord", 0)
    engine = Engine(config, client=None, coordinator=coordinator)
    engine._open_datasets()
    publisher = asyncio.create_task(engine._publish_loop())
    worst = 0.0
    for _ in range(30):
        before = time.monotonic()
        await asyncio.sleep(0.05)
        worst = max(worst, time.monotonic() - before - 0.05)
    assert worst < 0.25, f"the event loop stalled {worst:.2f} s"
    await engine._wind_down(publisher)
    assert coordinator.all_progress()[0].finished  # the final report was not overtaken by an earlier one
