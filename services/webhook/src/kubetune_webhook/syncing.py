"""Every webhook replica serves the pair its certificate Secret holds, reloaded without restart.

Why: the Secret is the one source of truth for the serving certificate (`rotating.py`). Each
replica reads it every `interval` seconds and writes the pair to the files the server loads
(`serving.CertificateStore` reloads them when they change), so a renewal reaches every replica
within an interval, without restarts and without the kubelet's Secret-volume delay. With
`provision`, replicas also campaign for a Lease; the leader runs the rotation pass first.

A replica is ready only once the caBundle of every webhook configuration trusts the CA of the
pair it serves, so `kubectl wait --for=condition=Available` on the Deployment means admission
works.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import urllib3

from kubetune import errors
from kubetune.kube import SECRETS, Kube, Obj
from kubetune.runtime.electing import LeaderElector
from kubetune.wakeups import Wakeup
from kubetune_webhook import certificates, rotating

log = logging.getLogger(__name__)

LEASE_NAME = "kubetune-webhook-certs"


class CertificateSync:
    """Keeps `cert_file`/`key_file` equal to the Secret's pair; `trusted` once it is published."""

    def __init__(
        self,
        kube: Kube,
        plan: rotating.Plan,
        cert_file: str,
        key_file: str,
        *,
        provision: bool,
        identity: str,
        interval: float = 10.0,
        lease_name: str = LEASE_NAME,
    ) -> None:
        self.kube = kube
        self.plan = plan
        self.cert_file = Path(cert_file)
        self.key_file = Path(key_file)
        self.provision = provision
        self.identity = identity
        self.interval = interval
        self.lease_name = lease_name
        self.rotator = rotating.Rotator(kube, plan)
        self.elector: LeaderElector | None = None
        self.written = threading.Event()
        self.trusted = threading.Event()
        self._pair: rotating.Pair | None = None
        self._thread: threading.Thread | None = None

    def leading(self) -> bool:
        return self.elector is not None and self.elector.is_leader.is_set()

    def sync_once(self) -> None:
        """One pass: rotate (leader only), then serve and check what the Secret holds."""
        plan = self.plan
        secret: Obj
        if self.leading():
            secret = self.rotator.reconcile()
        else:
            secret = self.kube.get(SECRETS, plan.secret, plan.namespace)
        pair = rotating.pair_of(secret)
        if pair is None:
            log.info(
                "Secret %s/%s holds no certificate yet%s", plan.namespace, plan.secret,
                "" if self.provision else " (written by cert-manager?)",
            )  # fmt: skip
            return
        if pair != self._pair:
            self.key_file.parent.mkdir(parents=True, exist_ok=True)
            # Key first: a reader seeing the new key with the old cert fails and keeps the old.
            certificates.write_atomic(self.key_file, pair.key, 0o600)
            certificates.write_atomic(self.cert_file, pair.cert)
            self._pair = pair
            self.written.set()
            log.info("serving the certificate of Secret %s/%s", plan.namespace, plan.secret)
        trusted = all(
            rotating.published(self.kube, resource, name, pair.ca)
            for resource, name in plan.configurations()
        )
        if trusted != self.trusted.is_set():
            log.info("caBundle %s the serving CA", "trusts" if trusted else "does not trust yet")
        (self.trusted.set if trusted else self.trusted.clear)()

    def _campaign(self) -> tuple[Wakeup, threading.Thread]:
        """Start a new candidacy (at start, and after a lost Lease): its stop event, its thread."""
        own_stop = Wakeup()
        self.elector = LeaderElector(self.kube, self.plan.namespace, self.lease_name, self.identity)
        return own_stop, self.elector.start(own_stop)

    def run(self, stop: threading.Event) -> None:
        """Sync every `interval` until `stop`; then release the Lease if held."""
        election = self._campaign() if self.provision else None
        while not stop.is_set():
            if self.elector is not None and self.elector.lost.is_set():
                election = self._campaign()
            try:
                self.sync_once()
            except (errors.NotFound, errors.Forbidden) as e:
                log.error("%s", rotating.missing(e, self.plan))
            except (errors.ApiError, OSError, urllib3.exceptions.HTTPError, ValueError) as e:
                log.warning("certificate sync: %s; retrying in %gs", e, self.interval)
            # Until a pair is served, look again soon: the Lease is usually won within a second.
            stop.wait(self.interval if self.written.is_set() else min(1.0, self.interval))
        if election is not None:
            election[0].set()
            election[1].join(timeout=5)

    def start(self, stop: threading.Event) -> None:
        self._thread = threading.Thread(
            target=self.run, args=(stop,), name="cert-sync", daemon=True
        )
        self._thread.start()

    def join(self, timeout: float) -> None:
        """Wait (after `stop`) until the Lease is released."""
        if self._thread is not None:
            self._thread.join(timeout)
