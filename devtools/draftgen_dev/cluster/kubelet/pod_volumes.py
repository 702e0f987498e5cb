"""A pod's volumes as local folders, its ServiceAccount token, and the argv that mounts them."""

from __future__ import annotations

import base64
import sys
from pathlib import Path

from kubernetes import client

from .pod_env import expand_vars

SA_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


def volume_sources(core: client.CoreV1Api, pod: client.V1Pod, pod_dir: Path, volumes_dir: Path) -> dict[str, Path]:
    """Each pod volume's local folder (created and filled as needed)."""
    sources: dict[str, Path] = {}
    for vol in pod.spec.volumes or []:
        if vol.projected and vol.name.startswith("kube-api-access"):
            continue  # served by the ServiceAccount token mount
        if vol.persistent_volume_claim:
            path = claim_path(core, pod.metadata.namespace, vol.persistent_volume_claim.claim_name, volumes_dir)
        elif vol.host_path:
            path = Path(vol.host_path.path)
        else:  # ConfigMaps and Secrets filled in; emptyDir (memory-backed or not) and the rest empty
            path = pod_dir / "volumes" / vol.name
            path.mkdir(parents=True, exist_ok=True)
            if vol.empty_dir is not None:
                path.chmod(0o777)  # as a kubelet makes an emptyDir: any user the container runs as writes it
            for key, content in volume_files(core, pod.metadata.namespace, vol).items():
                (path / key).write_bytes(content)
        path.mkdir(parents=True, exist_ok=True)
        sources[vol.name] = path
    return sources


def volume_files(core: client.CoreV1Api, namespace: str, vol) -> dict[str, bytes]:
    if vol.config_map:
        return {k: v.encode() for k, v in (core.read_namespaced_config_map(vol.config_map.name, namespace).data
                                           or {}).items()}
    if vol.secret:
        data = core.read_namespaced_secret(vol.secret.secret_name, namespace).data or {}
        return {k: base64.b64decode(v) for k, v in data.items()}
    return {}


def claim_path(core: client.CoreV1Api, namespace: str, claim: str, volumes_dir: Path) -> Path:
    """A bound claim's PersistentVolume path (hostPath or local); else a folder named after the claim."""
    pvc = core.read_namespaced_persistent_volume_claim(claim, namespace)
    if pvc.spec.volume_name:
        pv = core.read_persistent_volume(pvc.spec.volume_name).spec
        source = pv.host_path or pv.local
        if source is not None:
            return Path(source.path)
    return volumes_dir / namespace / claim


def service_account_dir(core: client.CoreV1Api, pod: client.V1Pod, pod_dir: Path) -> Path | None:
    """A real token (TokenRequest, bound to the pod), the cluster's CA and the namespace, as mounted
    at SA_MOUNT in a real pod."""
    spec, meta = pod.spec, pod.metadata
    if spec.automount_service_account_token is False:
        return None
    request = client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(
        audiences=[], expiration_seconds=6 * 3600,
        bound_object_ref=client.V1BoundObjectReference(kind="Pod", api_version="v1", name=meta.name, uid=meta.uid)))
    token = core.create_namespaced_service_account_token(
        spec.service_account_name or "default", meta.namespace, request).status.token
    ca = core.read_namespaced_config_map("kube-root-ca.crt", meta.namespace).data["ca.crt"]
    path = pod_dir / "serviceaccount"
    path.mkdir(parents=True, exist_ok=True)
    (path / "token").write_text(token)
    (path / "ca.crt").write_text(ca)
    (path / "namespace").write_text(meta.namespace)
    return path


def container_argv(container, env: dict[str, str], volumes: dict[str, Path], sa_dir: Path | None,
                   hosts: Path | None = None, image: list[str] = ()) -> list[str]:
    """The container's command in a private mount namespace with its volumes bind-mounted (and
    `hosts` over /etc/hosts: the Services' names, service_hosts); `image`: pod_exec's options that run
    it from a loaded image's root (loaded_images.run_options)."""
    if not container.command:
        raise ValueError(f"container {container.name} has no command (the local kubelet has no image entrypoints)")
    binds = []
    for mount in container.volume_mounts or []:
        if mount.mount_path.startswith(("/dev", "/proc", "/sys")) or mount.name not in volumes:
            continue
        src = volumes[mount.name] / (mount.sub_path or "")
        src.mkdir(parents=True, exist_ok=True)
        binds += ["--bind", f"{src}:{mount.mount_path}" + (":ro" if mount.read_only else "")]
    if sa_dir is not None:
        binds += ["--bind", f"{sa_dir}:{SA_MOUNT}:ro"]
    if hosts is not None:
        binds += ["--bind", f"{hosts}:/etc/hosts:ro"]
    cmd = [expand_vars(a, env) for a in [*container.command, *(container.args or [])]]
    return ["unshare", "--mount", "--propagation", "private", sys.executable, "-m",
            "draftgen_dev.cluster.pod_exec", *image, *binds, "--", *cmd]
