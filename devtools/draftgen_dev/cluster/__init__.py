"""A real local Kubernetes control plane (etcd, kube-apiserver, controller-manager, scheduler, KWOK)."""
