import socket

from draftgen_dev.cluster.kubelet.kubelet import free_pod_ip, pod_ip_for


def test_an_address_where_a_pods_port_is_already_taken_is_skipped():
    with socket.socket() as other:
        other.bind((pod_ip_for(0), 0))
        other.listen()
        port = other.getsockname()[1]
        assert free_pod_ip(0, [port]) == (pod_ip_for(1), 2)
    assert free_pod_ip(0, [port]) == (pod_ip_for(0), 1)
    assert free_pod_ip(5, []) == (pod_ip_for(5), 6)
