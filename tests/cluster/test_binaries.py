"""The binary cache: complete entries only, one clear message when Go is missing."""

from __future__ import annotations

import pytest

from draftgen_dev.cluster import binaries
from draftgen_dev.cluster.binaries import BuildError, Part

UPSTREAM = """module k8s.io/kubernetes

go 1.26.0

godebug default=go1.26

require (
\tk8s.io/api v0.0.0
\tk8s.io/client-go v0.0.0
)

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/client-go => ./staging/src/k8s.io/client-go
)
"""


def test_wrapper_gomod_replaces_staging_modules_with_published_tags():
    gomod = binaries.kubernetes_wrapper_gomod(UPSTREAM, "v1.36.3")
    assert "require k8s.io/kubernetes v1.36.3" in gomod
    assert "\tk8s.io/api => k8s.io/api v0.36.3" in gomod
    assert "\tk8s.io/client-go => k8s.io/client-go v0.36.3" in gomod
    assert "go 1.26.0" in gomod and "default=go1.26" in gomod
    assert "./staging" not in gomod


def test_interrupted_build_never_leaves_an_entry_that_looks_complete(tmp_path, monkeypatch):
    monkeypatch.setenv("DRAFTGEN_CACHE", str(tmp_path))
    part = Part("fake", "v1", ("a", "b"))

    def half_then_die(part, out):
        (out / "a").write_text("built")
        raise KeyboardInterrupt  # Ctrl-C half-way

    monkeypatch.setitem(binaries._BUILDERS, "fake", half_then_die)
    with pytest.raises(KeyboardInterrupt):
        binaries.ensure(part)
    assert not binaries.is_complete(part)
    assert not part.directory.exists()
    assert [p.name for p in (tmp_path / "bin").iterdir() if not p.name.endswith(".lock")] == []

    def whole(part, out):
        for f in part.files:
            (out / f).write_text("built")

    monkeypatch.setitem(binaries._BUILDERS, "fake", whole)
    assert binaries.ensure(part) == part.directory and binaries.is_complete(part)
    monkeypatch.setitem(binaries._BUILDERS, "fake", half_then_die)
    assert binaries.ensure(part) == part.directory  # cached: not rebuilt


def test_missing_go_toolchain_gives_one_clear_message(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(BuildError, match="Go toolchain"):
        binaries._go()


def test_kwok_is_built_against_the_k8s_modules_of_the_kubernetes_we_build():
    gomod = binaries.kwok_wrapper_gomod(UPSTREAM, "v1.36.3", "v0.8.0")
    assert "require sigs.k8s.io/kwok v0.8.0" in gomod
    assert "\tk8s.io/client-go => k8s.io/client-go v0.36.3" in gomod
    assert "k8s.io/kubernetes" not in gomod.replace("draftgen.local", "")
    assert binaries.KWOK.directory.name == "kwok-v0.8.0-k8s-v1.36.3"  # a new recipe is a new cache entry
    assert binaries.KUBERNETES.directory.name == "kubernetes-v1.36.3-with-etcd"
    assert "etcd" in binaries.KUBERNETES.files
    assert binaries.ALL_PARTS.index(binaries.KWOK) > binaries.ALL_PARTS.index(binaries.KUBERNETES)
