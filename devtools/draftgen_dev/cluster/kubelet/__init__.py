"""The local kubelet: runs draftgen's own pods for real on this machine.

KWOK fakes every other pod on the fake nodes. A pod labelled `draftgen.io/local-kubelet=true`, once
the scheduler has bound it to a node, is run here instead, as a kubelet would run it:

- native sidecars (init containers with `restartPolicy: Always`) start first, each waited on through
  its startup probe; plain init containers run to completion; then the main containers run;
- each container is a local process with the pod's env (values, downward API fields,
  ConfigMap/Secret keys, `$(VAR)` expansion), in a private mount namespace where the pod's volumes are bind-mounted at their
  mountPaths: PVCs map to `<volumes-dir>/<namespace>/<claim>`, emptyDirs and ConfigMaps/Secrets to
  per-pod folders, and a real ServiceAccount token (TokenRequest, bound to the pod) appears at
  `/var/run/secrets/kubernetes.io/serviceaccount` with KUBERNETES_SERVICE_HOST/PORT set, so
  in-cluster clients work unchanged;
- every pod gets its own loopback address as its pod IP (127.0.x.y), so two pods' servers can both
  listen on the same port, as in separate network namespaces, when they bind `$(POD_IP)`;
- each container's /etc/hosts names every Service by a Ready pod's IP, kept current (no cluster DNS
  or kube-proxy here), so `http://svc.ns.svc:PORT` works where the Service's port is its target port;
- the pod's status follows the processes: Running, then Succeeded or Failed with each container's
  exit code (so a Job's podFailurePolicy sees real exit codes);
- a main container that exits is started again in place when the pod's restartPolicy says so
  (Always, a Deployment's; OnFailure on a non-zero exit), after the same back-off as below, in
  `CrashLoopBackOff` meanwhile with the pod still Running, so a crashing Deployment pod stays one pod
  (a real kubelet's back-off also resets after ten minutes of running well; this one never resets);
- a volume mounted over the folder that holds this Python environment or the checkout (an emptyDir
  at /tmp over a clone under /tmp) hides neither: they are mounted back inside it (pod_exec);
- a pod marked for deletion gets SIGTERM, SIGKILL after its grace period, then is removed;
- a native sidecar that exits (or fails its startup probe) before it has started is restarted after a
  back-off (10 s doubling up to 5 min), in `CrashLoopBackOff` with its restart count and last exit
  code meanwhile, as restartPolicy Always says;
- a container whose image was loaded into the node (LocalCluster.load_image, as `kind load` does)
  runs from that image's root: chrooted as its securityContext's user (else the image's USER), the
  root read-only when readOnlyRootFilesystem says so, with the image's ENV under the pod's env; every
  other container runs from this Python environment and the project's checkout;
- an image whose registry host is under `.invalid` cannot be pulled (`ErrImagePull`, then
  `ImagePullBackOff`, retried with the same back-off); every other image "pulls" (image_pull).

Liveness probes are not run (a dead local process already fails the pod).

    pod_env      a container's environment: values, downward API, ConfigMap/Secret refs, $(VAR)
    pod_volumes  the pod's volumes as local folders, its ServiceAccount token, the bind-mounted argv
    probes       startup and readiness probes
    image_pull   which images pull, and how a failed pull reads
    loaded_images  the images loaded into the node, and the options that run a container from one
    service_hosts  the Services' names in each container's /etc/hosts
    pod_runner   one pod: its containers in order, its status, its termination
    kubelet      the watch on pods and the command line
"""
