"""When the leader renews the certificate Secret, and what the caBundle holds (no cluster)."""

from __future__ import annotations

import base64

from kubetune_webhook import certificates, rotating

PLAN = rotating.Plan(
    namespace="kubeflow",
    secret="kubetune-webhook-cert",
    dns_names=("kubetune-webhook.kubeflow.svc",),
    ips=("127.0.0.1",),
)


def _data(
    ca_days: int = 3650, cert_days: int = 365, names: tuple[str, ...] = PLAN.dns_names
) -> dict[str, bytes]:
    ca, ca_key = certificates.make_ca(days=ca_days)
    cert, key = certificates.make_serving(ca, ca_key, names, PLAN.ips, days=cert_days)
    return {"ca.crt": ca, "ca.key": ca_key, "tls.crt": cert, "tls.key": key}


def test_a_fresh_pair_is_kept() -> None:
    data = _data()
    assert rotating._ca_usable(data, PLAN)
    assert rotating._serving_ok(data, PLAN)


def test_a_certificate_with_less_than_renew_before_left_is_renewed() -> None:
    assert not rotating._serving_ok(_data(cert_days=60), PLAN)


def test_a_certificate_missing_a_name_is_renewed() -> None:
    assert not rotating._serving_ok(_data(names=("other.kubeflow.svc",)), PLAN)


def test_a_certificate_of_another_ca_is_renewed() -> None:
    data = _data()
    data["ca.crt"], data["ca.key"] = certificates.make_ca()
    assert not rotating._serving_ok(data, PLAN)


def test_a_ca_a_new_certificate_would_outlive_is_renewed() -> None:
    assert not rotating._ca_usable(_data(ca_days=300, cert_days=200), PLAN)


def test_garbage_is_renewed_not_fatal() -> None:
    data = {"ca.crt": b"nope", "ca.key": b"nope", "tls.crt": b"x", "tls.key": b"y"}
    assert not rotating._ca_usable(data, PLAN)
    assert not rotating._serving_ok(data, PLAN)


def test_the_bundle_keeps_the_previous_ca_until_it_expires() -> None:
    data = _data()
    previous, _ = certificates.make_ca(days=10)
    data[rotating.CA_PREVIOUS] = previous
    assert rotating.bundle_of(data) == data["ca.crt"].rstrip(b"\n") + b"\n" + previous
    expired, _ = certificates.make_ca(days=0)  # not after = now: expired at once
    data[rotating.CA_PREVIOUS] = expired
    assert rotating.bundle_of(data) == data["ca.crt"]


def test_a_secret_without_a_pair_serves_nothing() -> None:
    assert rotating.pair_of({"metadata": {"name": "x"}}) is None
    encoded = {k: base64.b64encode(v).decode() for k, v in _data().items()}
    pair = rotating.pair_of({"data": encoded})
    assert pair is not None and pair.bundle == pair.ca
