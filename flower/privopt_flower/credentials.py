"""TLS certificates and SuperNode keys for a Flower deployment, made with Python's
``cryptography`` (a dependency of Flower): a CA, the SuperLink's certificate signed by it for the
given hosts, and one ECDSA P-384 key pair per SuperNode in the SSH format Flower reads.

``python -m privopt_flower.credentials DIR --nodes 5 --host 127.0.0.1`` writes::

    DIR/ca.crt                 give it to every SuperNode and to the flwr CLI
    DIR/ca.key                 keep it offline: it signs SuperLink certificates
    DIR/superlink.crt, .key    the SuperLink's (flower-superlink --ssl-certfile/--ssl-keyfile)
    DIR/supernode-I.key, .pub  SuperNode I's (flower-supernode --auth-supernode-private-key;
                               register the .pub with `flwr supernode register`)

Private keys are written readable by their owner only. An existing file is never overwritten."""

from __future__ import annotations

import argparse
import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# Long enough for a study, short enough that a leaked certificate does not outlive it.
VALID_DAYS = 365


@dataclass(frozen=True)
class Credentials:
    """Paths of what :func:`make` wrote."""

    ca: Path
    superlink_cert: Path
    superlink_key: Path
    supernode_keys: tuple[Path, ...]

    def supernode_public(self, i: int) -> Path:
        return self.supernode_keys[i].with_suffix(".pub")


def _write(path: Path, data: bytes, secret: bool) -> None:
    # O_EXCL: never replace a key a deployment may already trust.
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    fd = os.open(path, flags, 0o600 if secret else 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _san(hosts: list[str]) -> x509.SubjectAlternativeName:
    names: list[x509.GeneralName] = []
    for h in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            names.append(x509.DNSName(h))
    return x509.SubjectAlternativeName(names)


def make(directory: str | os.PathLike[str], nodes: int, hosts: list[str]) -> Credentials:
    """Writes a CA, a SuperLink certificate for ``hosts`` and ``nodes`` SuperNode key pairs
    into ``directory`` (created if missing)."""
    if not 1 <= nodes <= 10_000:
        raise ValueError(f"nodes must be in 1..=10000, got {nodes}")
    if not hosts:
        raise ValueError("the SuperLink certificate needs at least one host name or address")
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    until = now + datetime.timedelta(days=VALID_DAYS)

    ca_key = ec.generate_private_key(ec.SECP384R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "privopt deployment CA")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(until)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA384())
    )
    link_key = ec.generate_private_key(ec.SECP384R1())
    link_cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]))
        .issuer_name(ca_name)
        .public_key(link_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(until)
        .add_extension(_san(hosts), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA384())
    )
    pem = serialization.Encoding.PEM
    _write(out / "ca.crt", ca_cert.public_bytes(pem), secret=False)
    _write(out / "ca.key", _pem_key(ca_key), secret=True)
    _write(out / "superlink.crt", link_cert.public_bytes(pem), secret=False)
    _write(out / "superlink.key", _pem_key(link_key), secret=True)
    keys = []
    for i in range(nodes):
        key = ec.generate_private_key(ec.SECP384R1())
        private = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.OpenSSH,
            serialization.NoEncryption(),
        )
        public = key.public_key().public_bytes(
            serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
        )
        path = out / f"supernode-{i}.key"
        _write(path, private, secret=True)
        _write(path.with_suffix(".pub"), public + b"\n", secret=False)
        keys.append(path)
    return Credentials(out / "ca.crt", out / "superlink.crt", out / "superlink.key", tuple(keys))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("directory")
    ap.add_argument("--nodes", type=int, required=True, help="SuperNode key pairs to make")
    ap.add_argument(
        "--host",
        action="append",
        help="a name or address the SuperLink is reached at (repeat; default 127.0.0.1 and "
        "localhost)",
    )
    args = ap.parse_args()
    try:
        made = make(args.directory, args.nodes, args.host or ["127.0.0.1", "localhost"])
    except (ValueError, FileExistsError) as e:
        raise SystemExit(f"error: {e}") from None
    print(f"wrote {made.ca.parent}: ca.crt, superlink.crt/.key, {args.nodes} SuperNode key pairs")


if __name__ == "__main__":
    main()
