"""Images loaded into the local kubelet, as `kind load` loads them into a kind node: a container whose
image is one of them runs from that image's root (pod_exec --root), every other from this Python
environment.

The cluster keeps them in a JSON file (LocalCluster.load_image), read at each container's start, so an
image loaded after the kubelet started is used from its next container on:
    {"<image reference>": {"root": DIR, "env": {...}, "user": "UID:GID", "workdir": "/..."}}
"""

from __future__ import annotations

import json
from pathlib import Path

from kubernetes import client


def loaded_image(images_file: Path | None, ref: str) -> dict | None:
    if images_file is None or not images_file.exists():
        return None
    return json.loads(images_file.read_text()).get(ref)


def run_as(pod: client.V1Pod, container, image_user: str) -> str:
    """UID:GID the container runs as: its securityContext, then the pod's, then the image's USER."""
    uid, gid = image_user.split(":")
    for context in (pod.spec.security_context, container.security_context):  # the container's wins
        if context is not None:
            uid = str(context.run_as_user) if context.run_as_user is not None else uid
            gid = str(context.run_as_group) if context.run_as_group is not None else gid
    return f"{uid}:{gid}"


def supplementary_groups(pod: client.V1Pod) -> list[int]:
    """The pod's fsGroup and supplementalGroups, which every container's process holds."""
    context = pod.spec.security_context
    if context is None:
        return []
    return sorted({*([context.fs_group] if context.fs_group is not None else []), *(context.supplemental_groups or [])})


def run_options(pod: client.V1Pod, container, image: dict) -> list[str]:
    """pod_exec's options that run the container from the image's root, as its securityContext says."""
    context = container.security_context
    read_only = bool(context and context.read_only_root_filesystem)
    groups = ",".join(map(str, supplementary_groups(pod)))
    return ["--root", image["root"], "--user", run_as(pod, container, image["user"]),
            "--workdir", container.working_dir or image["workdir"], *(["--groups", groups] if groups else []),
            *(["--read-only-root"] if read_only else [])]
