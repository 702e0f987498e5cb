"""A container's environment, as the kubelet builds it."""

from __future__ import annotations

import base64
import os
import re
import sys
from pathlib import Path

from kubernetes import client

from draftgen.env_vars import expand_vars


def field_value(pod: client.V1Pod, pod_ip: str, path: str) -> str:
    """A downward API fieldRef."""
    meta = pod.metadata
    simple = {"metadata.name": meta.name, "metadata.namespace": meta.namespace, "metadata.uid": meta.uid,
              "spec.nodeName": pod.spec.node_name, "spec.serviceAccountName": pod.spec.service_account_name,
              "status.podIP": pod_ip, "status.hostIP": "127.0.0.1"}
    if path in simple:
        return simple[path] or ""
    m = re.fullmatch(r"metadata\.(labels|annotations)\['(.+)'\]", path)
    if m:
        return (getattr(meta, m.group(1)) or {}).get(m.group(2), "")
    raise ValueError(f"unsupported fieldRef {path}")


def base_env(pod: client.V1Pod, apiserver_port: int, image_env: dict[str, str] | None = None) -> dict[str, str]:
    """What every container gets: the image's ENV (this Python's PATH for a container run from here),
    the in-cluster API server's address."""
    here = {"PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
            "HOME": os.environ.get("HOME", "/root"), "PYTHONUNBUFFERED": "1"}
    return {**(here if image_env is None else image_env), "HOSTNAME": pod.metadata.name,
            "KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(apiserver_port)}


def container_env(core: client.CoreV1Api, pod: client.V1Pod, container, pod_ip: str, apiserver_port: int,
                  image_env: dict[str, str] | None = None) -> dict[str, str]:
    env = base_env(pod, apiserver_port, image_env)
    ns = pod.metadata.namespace
    for source in container.env_from or []:
        if source.config_map_ref:
            data = core.read_namespaced_config_map(source.config_map_ref.name, ns).data or {}
            env.update({(source.prefix or "") + k: v for k, v in data.items()})
    for var in container.env or []:
        env[var.name] = var_value(core, pod, container, pod_ip, var, env)
    return env


def var_value(core: client.CoreV1Api, pod: client.V1Pod, container, pod_ip: str, var, env: dict[str, str]) -> str:
    ns = pod.metadata.namespace
    source = var.value_from
    if source is None:
        return expand_vars(var.value or "", env)
    if source.field_ref:
        return field_value(pod, pod_ip, source.field_ref.field_path)
    if source.config_map_key_ref:
        ref = source.config_map_key_ref
        return (core.read_namespaced_config_map(ref.name, ns).data or {}).get(ref.key, "")
    if source.secret_key_ref:
        ref = source.secret_key_ref
        return base64.b64decode((core.read_namespaced_secret(ref.name, ns).data or {}).get(ref.key, "")).decode()
    if source.resource_field_ref:
        kind, _, name = source.resource_field_ref.resource.partition(".")  # e.g. limits.nvidia.com/gpu
        return str(((getattr(container.resources, kind, None) or {}) if container.resources else {}).get(name, ""))
    return ""
