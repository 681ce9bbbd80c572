"""Leader election on a `coordination.k8s.io/v1` Lease, so a controller can run two replicas.

The holder renews `renewTime` every `retry_period`; another candidate takes the Lease only after
`lease_duration` has passed without a renewal. Every write carries the resourceVersion it read,
so two candidates racing for an expired Lease cannot both win (the loser gets a 409). A leader
that cannot renew within `renew_deadline` steps down. On a clean shutdown the leader releases
the Lease so a standby takes over at once instead of after `lease_duration`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

from kubetune import errors
from kubetune.kube import LEASES, Kube, Obj

log = logging.getLogger(__name__)


def _micro_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse(stamp: str | None) -> float:
    if not stamp:
        return 0.0
    text = stamp.replace("Z", "+00:00")
    return datetime.fromisoformat(text).timestamp()


class LeaderElector:
    """Campaigns for one Lease; `is_leader` is set while this process holds it."""

    def __init__(
        self,
        kube: Kube,
        namespace: str,
        name: str,
        identity: str,
        *,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.kube = kube
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.wall_clock = wall_clock
        self.is_leader = threading.Event()
        self.lost = threading.Event()

    def _spec(self, transitions: int, acquire: str | None) -> Obj:
        now = _micro_now()
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": max(1, int(self.lease_duration)),
            "acquireTime": acquire or now,
            "renewTime": now,
            "leaseTransitions": transitions,
        }

    def try_acquire_or_renew(self) -> bool:
        """One attempt; True when this process holds the Lease afterwards."""
        lease = self.kube.get_or_none(LEASES, self.name, self.namespace)
        if lease is None:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": self._spec(0, None),
            }
            try:
                self.kube.create(LEASES, body, self.namespace)
                return True
            except errors.Conflict:
                return False
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        transitions = int(spec.get("leaseTransitions") or 0)
        if holder == self.identity:
            new_spec = self._spec(transitions, spec.get("acquireTime"))
        else:
            duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
            expires = _parse(spec.get("renewTime") or spec.get("acquireTime")) + duration
            if holder and expires > self.wall_clock():
                return False
            new_spec = self._spec(transitions + 1, None)
        lease["spec"] = new_spec
        try:
            self.kube.replace(LEASES, lease, self.namespace)
            return True
        except errors.Conflict:
            return False

    def release(self) -> None:
        """Give the Lease up (only if still ours) so a standby can lead at once."""
        lease = self.kube.get_or_none(LEASES, self.name, self.namespace)
        if lease is None or (lease.get("spec") or {}).get("holderIdentity") != self.identity:
            return
        lease["spec"]["holderIdentity"] = ""
        lease["spec"]["leaseDurationSeconds"] = 1
        try:
            self.kube.replace(LEASES, lease, self.namespace)
        except errors.ApiError as e:
            log.warning("could not release lease %s: %s", self.name, e)

    def run(self, stop: threading.Event) -> None:
        """Campaign until leader, then renew; set `lost` if renewing fails past the deadline."""
        last_renew = 0.0
        while not stop.is_set():
            try:
                ok = self.try_acquire_or_renew()
            except errors.ApiError as e:
                log.warning("lease %s: %s", self.name, e)
                ok = False
            except OSError as e:
                log.warning("lease %s: %s", self.name, e)
                ok = False
            now = time.monotonic()
            if ok:
                if not self.is_leader.is_set():
                    log.info("became leader (lease %s/%s)", self.namespace, self.name)
                self.is_leader.set()
                last_renew = now
            elif self.is_leader.is_set() and now - last_renew > self.renew_deadline:
                log.error("lost leadership of lease %s/%s", self.namespace, self.name)
                self.is_leader.clear()
                self.lost.set()
                return
            stop.wait(self.retry_period)
        if self.is_leader.is_set():
            self.release()
            self.is_leader.clear()

    def start(self, stop: threading.Event) -> threading.Thread:
        thread = threading.Thread(
            target=self.run, args=(stop,), name="leader-election", daemon=True
        )
        thread.start()
        return thread
