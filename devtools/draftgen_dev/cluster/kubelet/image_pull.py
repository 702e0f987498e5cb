"""Image pulls, as far as the local kubelet has them: it runs every container from this Python
environment, so every image "pulls" except one whose registry host is under `.invalid`, the top-level
name reserved never to resolve (RFC 6761 section 6.4). Such an image fails as a real kubelet's pull of
an unknown host does, so tests can show what the operator says about a pull that cannot succeed."""

from __future__ import annotations


def registry_host(image: str) -> str:
    """The registry host of an image reference; "" for a bare name (Docker Hub's `library/`)."""
    first, slash, _ = image.partition("/")
    if not slash or ("." not in first and ":" not in first and first != "localhost"):
        return ""
    return first.split(":")[0]


def pull_error(image: str) -> str | None:
    """Why pulling `image` fails (in the words of containerd's resolver); None when it succeeds."""
    host = registry_host(image)
    if not host.endswith(".invalid"):
        return None
    return (f'failed to pull and unpack image "{image}": failed to resolve reference "{image}": '
            f'failed to do request: Head "https://{host}/v2/": dial tcp: lookup {host}: no such host')


def back_off_message(image: str) -> str:
    """The kubelet's message while it waits before pulling again."""
    return f'Back-off pulling image "{image}"'
