"""`make demo`'s install steps on a loaded machine: every wait waits for the object to exist and to have
the field it reads (a loaded API server writes a new CRD's conditions a moment after creating it; `kubectl
wait --for=condition=Established` on it failed with `.status.conditions accessor error`)."""

from __future__ import annotations

import multiprocessing
import time

import pytest
import yaml
from kubernetes import client

from draftgen_dev.cluster.waiting import crd_established
from draftgen_dev.demo import Demo

KIND = {"group": "race.draftgen.io", "plural": "widgets", "kind": "Widget"}


def busy(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


@pytest.fixture
def loaded():
    """Every core busy while the test runs."""
    workers = [multiprocessing.Process(target=busy, args=(120,)) for _ in range(multiprocessing.cpu_count())]
    for w in workers:
        w.start()
    yield
    for w in workers:
        w.terminate()
        w.join()


def throwaway_crd(path, version: str):
    """A CRD no other test knows, new to the cluster, so its conditions are written while the demo waits."""
    body = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": f"{KIND['plural']}{version}.{KIND['group']}"},
            "spec": {"group": KIND["group"], "scope": "Namespaced",
                     "names": {"plural": f"{KIND['plural']}{version}", "kind": f"{KIND['kind']}{version}"},
                     "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                         "type": "object", "properties": {"spec": {"type": "object", "properties": {
                             "size": {"type": "integer", "description": "how big the widget is"}}}}}}}]}}
    path.write_text(yaml.safe_dump(body))
    return path, body


def test_the_demos_install_steps_wait_for_a_new_crd_under_cpu_load(cluster, namespace, tmp_path, loaded):
    version = str(int(time.time() * 1000) % 10**8)
    crd, body = throwaway_crd(tmp_path / "crd.yaml", version)
    demo = Demo(cluster, tmp_path, manifest={})
    try:
        demo.install(crd=crd, namespace=f"{namespace}-demo", explain=f"{body['spec']['names']['plural']}.spec.size")
        assert crd_established(demo.api, body["metadata"]["name"])
    finally:
        client.ApiextensionsV1Api(demo.api).delete_custom_resource_definition(body["metadata"]["name"])
        client.CoreV1Api(demo.api).delete_namespace(f"{namespace}-demo")
