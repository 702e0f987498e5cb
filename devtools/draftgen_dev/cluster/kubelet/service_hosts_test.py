from kubernetes.client import (V1ObjectMeta, V1Pod, V1PodCondition, V1PodSpec, V1PodStatus, V1Service,
                               V1ServiceSpec)

from draftgen_dev.cluster.kubelet.service_hosts import hosts_text, pod_names


def pod(name, hostname, subdomain, ip, ready, ns="ns", labels=None):
    return V1Pod(metadata=V1ObjectMeta(name=name, namespace=ns, labels=labels or {"app": "ranks"}),
                 spec=V1PodSpec(containers=[], hostname=hostname, subdomain=subdomain),
                 status=V1PodStatus(pod_ip=ip, conditions=[V1PodCondition(type="Ready", status=str(ready))]))


def service(name, headless=True, not_ready=True, ns="ns"):
    return V1Service(metadata=V1ObjectMeta(name=name, namespace=ns),
                     spec=V1ServiceSpec(selector={"app": "ranks"}, cluster_ip="None" if headless else "10.0.0.1",
                                        publish_not_ready_addresses=not_ready))


def test_pods_under_a_headless_service_are_named_hostname_dot_subdomain_ready_or_not_where_it_publishes_them():
    pods = [pod("a", "run-gen-r000-0", "run-ranks", "127.0.1.5", False),
            pod("b", "run-gen-r000-1", "run-ranks", "127.0.1.6", True),
            pod("c", "lone", None, "127.0.1.7", True),
            pod("d", "other", "run-ranks", "127.0.1.8", True, labels={"app": "else"})]
    assert pod_names(pods, [service("run-ranks")]) == {("ns", "run-gen-r000-0.run-ranks"): "127.0.1.5",
                                                       ("ns", "run-gen-r000-1.run-ranks"): "127.0.1.6"}
    assert pod_names(pods, [service("run-ranks", not_ready=False)]) == {("ns", "run-gen-r000-1.run-ranks"): "127.0.1.6"}
    assert pod_names(pods, [service("run-ranks", headless=False)]) == {}


def test_the_hosts_file_carries_the_names_dns_would_answer():
    text = hosts_text("ns", {("ns", "run-gen-r000-0.run-ranks"): "127.0.1.5"})
    assert ("127.0.1.5\trun-gen-r000-0.run-ranks.ns.svc.cluster.local\trun-gen-r000-0.run-ranks.ns.svc\t"
            "run-gen-r000-0.run-ranks.ns\trun-gen-r000-0.run-ranks") in text.splitlines()
