"""The certificates and keys a local control plane needs: a CA, the API server's serving cert, an admin
client cert (group system:masters) and the ServiceAccount token signing key pair."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Pki:
    ca_cert: Path
    ca_key: Path
    serving_cert: Path
    serving_key: Path
    admin_cert: Path
    admin_key: Path
    sa_key: Path  # signs ServiceAccount tokens (RSA, PKCS#8)
    sa_pub: Path


def _write_key(path: Path, key) -> None:
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    path.chmod(0o600)


def _cert(subject: x509.Name, issuer: x509.Name, public_key, signing_key, *, ca: bool,
          usages: list | None = None, sans: list | None = None) -> x509.Certificate:
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(public_key)
               .serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=30))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        builder = builder.add_extension(x509.KeyUsage(
            digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
            key_encipherment=False, data_encipherment=False, key_agreement=False, encipher_only=False,
            decipher_only=False), critical=True)
    if usages:
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(signing_key, hashes.SHA256())


def files(directory: Path) -> Pki:
    """The PKI's files in `directory`, as `create` writes them (what a process that attaches to a
    running control plane reads)."""
    return Pki(*(directory / n for n in ("ca.crt", "ca.key", "apiserver.crt", "apiserver.key", "admin.crt",
                                          "admin.key", "sa.key", "sa.pub")))


def create(directory: Path) -> Pki:
    directory.mkdir(parents=True, exist_ok=True)
    pki = files(directory)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "draftgen-local-ca")])
    ca = _cert(ca_name, ca_name, ca_key.public_key(), ca_key, ca=True)
    pki.ca_cert.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    _write_key(pki.ca_key, ca_key)

    serving_key = ec.generate_private_key(ec.SECP256R1())
    sans = [x509.DNSName(n) for n in ("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc")]
    sans += [x509.IPAddress(ipaddress.ip_address(a)) for a in ("127.0.0.1", "10.0.0.1")]
    serving = _cert(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]), ca_name,
                    serving_key.public_key(), ca_key, ca=False, usages=[ExtendedKeyUsageOID.SERVER_AUTH], sans=sans)
    pki.serving_cert.write_bytes(serving.public_bytes(serialization.Encoding.PEM))
    _write_key(pki.serving_key, serving_key)

    admin_key = ec.generate_private_key(ec.SECP256R1())
    admin = _cert(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "draftgen-admin"),
                             x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:masters")]), ca_name,
                  admin_key.public_key(), ca_key, ca=False, usages=[ExtendedKeyUsageOID.CLIENT_AUTH])
    pki.admin_cert.write_bytes(admin.public_bytes(serialization.Encoding.PEM))
    _write_key(pki.admin_key, admin_key)

    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    _write_key(pki.sa_key, sa_key)
    pki.sa_pub.write_bytes(sa_key.public_key().public_bytes(serialization.Encoding.PEM,
                                                            serialization.PublicFormat.SubjectPublicKeyInfo))
    return pki


def issue_serving_cert(pki: Pki, directory: Path, name: str) -> tuple[Path, Path]:
    """A serving cert and key for a server on 127.0.0.1 signed by the cluster's CA, so the API
    server can call it (an admission webhook, Kueue's webhooks) with that CA as its caBundle."""
    directory.mkdir(parents=True, exist_ok=True)
    ca = x509.load_pem_x509_certificate(pki.ca_cert.read_bytes())
    ca_key = serialization.load_pem_private_key(pki.ca_key.read_bytes(), password=None)
    key = ec.generate_private_key(ec.SECP256R1())
    sans = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    cert = _cert(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]), ca.subject, key.public_key(), ca_key,
                 ca=False, usages=[ExtendedKeyUsageOID.SERVER_AUTH], sans=sans)
    cert_path, key_path = directory / f"{name}.crt", directory / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    _write_key(key_path, key)
    return cert_path, key_path
