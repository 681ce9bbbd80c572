"""Leader election on a `coordination.k8s.io/v1` Lease, so a controller can run two replicas.

The holder renews `renewTime` every `retry_period`; another candidate takes the Lease only after
`lease_duration` has passed without a renewal. Every write carries the resourceVersion it read,
so two candidates racing for an expired Lease cannot both win (the loser gets a 409). A leader
that cannot renew within `renew_deadline` steps down (`lost`), measured from the start of its
last successful renewal and checked by a watchdog, so a request that hangs cannot keep it
leading; every request is also bounded by the time left to that deadline. On a clean shutdown
the election thread, and only it, releases the Lease (once) so a standby takes over at once
instead of after `lease_duration`.
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime

import urllib3

from kubetune import errors
from kubetune.clock import SYSTEM, Clock, rfc3339_micro
from kubetune.kube import LEASES, Kube, Obj

log = logging.getLogger(__name__)

# The Kubernetes client's urllib3 pool retries an idempotent request 3 times by default.
_TRIES = 4


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
        clock: Clock = SYSTEM,
    ) -> None:
        self.kube = kube
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.clock = clock
        self.is_leader = threading.Event()
        self.lost = threading.Event()
        self._lock = threading.Lock()
        self._renewed_at = 0.0  # monotonic start of the last successful acquire/renew
        self._deadline = 0.0  # monotonic time by which the current attempt must end
        self._released = False

    def _timeout(self) -> float:
        """A request's timeout: its share of what is left of the current attempt's deadline
        (the client retries a timed-out GET or PUT, `_TRIES` tries in all)."""
        return max(0.05, (self._deadline - self.clock.monotonic()) / _TRIES)

    def _check_deadline(self) -> bool:
        """Step down when the last renewal is older than `renew_deadline`; True if lost."""
        with self._lock:
            if self.lost.is_set():
                return True
            if (
                self.is_leader.is_set()
                and self.clock.monotonic() - self._renewed_at > self.renew_deadline
            ):
                log.error(
                    "lost leadership of lease %s/%s: not renewed within %gs",
                    self.namespace,
                    self.name,
                    self.renew_deadline,
                )
                self.is_leader.clear()
                self.lost.set()
                return True
            return False

    def _spec(self, transitions: int, acquire: str | None) -> Obj:
        now = rfc3339_micro(self.clock.now())
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": max(1, int(self.lease_duration)),
            "acquireTime": acquire or now,
            "renewTime": now,
            "leaseTransitions": transitions,
        }

    def try_acquire_or_renew(self) -> bool:
        """One attempt; True when this process holds the Lease afterwards."""
        lease = self.kube.get_or_none(LEASES, self.name, self.namespace, timeout=self._timeout())
        if lease is None:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": self._spec(0, None),
            }
            try:
                self.kube.create(LEASES, body, self.namespace, timeout=self._timeout())
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
            if holder and expires > self.clock.now().timestamp():
                return False
            new_spec = self._spec(transitions + 1, None)
        lease["spec"] = new_spec
        try:
            self.kube.replace(LEASES, lease, self.namespace, timeout=self._timeout())
            return True
        except errors.Conflict:
            return False

    def release(self) -> None:
        """Give the Lease up (only if still ours, and only once) so a standby can lead at once.

        Called by the election thread when it stops; a second call does nothing, so two
        callers never race each other into a 409."""
        with self._lock:
            if self._released:
                return
            self._released = True
            self.is_leader.clear()
        self._deadline = self.clock.monotonic() + self.renew_deadline
        try:
            lease = self.kube.get_or_none(
                LEASES, self.name, self.namespace, timeout=self._timeout()
            )
            if lease is None or (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return
            lease["spec"]["holderIdentity"] = ""
            lease["spec"]["leaseDurationSeconds"] = 1
            self.kube.replace(LEASES, lease, self.namespace, timeout=self._timeout())
        except (errors.ApiError, OSError, urllib3.exceptions.HTTPError) as e:
            log.warning("could not release lease %s: %s", self.name, e)

    def run(self, stop: threading.Event) -> None:
        """Campaign until leader, then renew; set `lost` if renewing fails past the deadline."""
        while not stop.is_set():
            started = self.clock.monotonic()
            leading = self.is_leader.is_set()
            self._deadline = (self._renewed_at if leading else started) + self.renew_deadline
            try:
                ok = self.try_acquire_or_renew()
            except (errors.ApiError, OSError, urllib3.exceptions.HTTPError) as e:
                log.warning("lease %s: %s", self.name, e)
                ok = False
            with self._lock:
                if ok and not self.lost.is_set() and not self._released:
                    if not self.is_leader.is_set():
                        log.info("became leader (lease %s/%s)", self.namespace, self.name)
                    # From the attempt's start: the renewTime written is no older than that.
                    self._renewed_at = started
                    self.is_leader.set()
            if self._check_deadline():
                return
            stop.wait(self.retry_period)
        if self.is_leader.is_set():
            self.release()

    def _watch_deadline(self, stop: threading.Event) -> None:
        """Step down on time even while a renew request hangs in `run`."""
        while not stop.is_set() and not self._check_deadline():
            stop.wait(min(0.1, self.renew_deadline / 10))

    def start(self, stop: threading.Event) -> threading.Thread:
        """Start campaigning; the thread returned ends after the release on `stop`, or on loss."""
        thread = threading.Thread(
            target=self.run, args=(stop,), name="leader-election", daemon=True
        )
        thread.start()
        threading.Thread(
            target=self._watch_deadline, args=(stop,), name="lease-deadline", daemon=True
        ).start()
        return thread
