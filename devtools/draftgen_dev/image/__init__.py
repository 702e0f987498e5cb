"""draftgen's image, built here and run by the tests (docs/image.md).

No Docker here: buildah builds the Dockerfile (`--isolation chroot`) on a Debian base that mmdebstrap
makes from Debian's packages (public base images cannot be pulled here), into a container store of
our own under ~/.cache/draftgen/containers. A built image is kept by the hash of what it copies, so
a warm `make test` builds nothing. Its root is then mounted (`buildah mount`) and run with chroot as
the image's user: podman cannot start containers on these machines.

    buildah   the buildah command on our store, and the tools' install
    base      the Debian base image
    build     the image itself, by content hash (`python -m draftgen_dev.image`)
    rootfs    a built image's root, mounted, and its configuration (user, env)
"""
