"""Leader election on a `coordination.k8s.io/v1` Lease, so a controller can run two replicas.

The holder renews `renewTime` every `retry_period`; another candidate takes the Lease only after
`lease_duration` has passed without a renewal. "Passed" is measured on the candidate's own
monotonic clock, from the moment the candidate itself saw the Lease record last change: the
holder's `renewTime` is another machine's wall clock, and comparing it with ours would let a
standby whose clock runs fast take the Lease from a healthy leader. Every write carries the
resourceVersion it read, so two candidates racing for an expired Lease cannot both win (the
loser gets a 409). A leader that cannot renew within `renew_deadline` steps down (`lost`),
measured from the start of its last successful renewal and checked by a watchdog, so a request
that hangs cannot keep it leading; every request is also bounded by the time left to that
deadline. On a clean shutdown the election thread, and only it, releases the Lease (once) so a
standby takes over at once instead of after `lease_duration`. A leader renews from the Lease
its last write returned, without reading it first (one request per renewal, not two); a
Conflict (someone else wrote) sends it back to reading.
"""

from __future__ import annotations

import logging
import threading

import urllib3

from kubetune import errors
from kubetune.clock import SYSTEM, Clock, rfc3339_micro
from kubetune.kube import LEASES, Kube, Obj
from kubetune.wakeups import Wakeup, first_of

log = logging.getLogger(__name__)

# The Kubernetes client's urllib3 pool retries an idempotent request 3 times by default.
_TRIES = 4


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
        self.is_leader = Wakeup()
        self.lost = Wakeup()
        self._lock = threading.Lock()
        self._renewed_at = 0.0  # monotonic start of the last successful acquire/renew
        self._deadline = 0.0  # monotonic time by which the current attempt must end
        self._released = False
        # The Lease record as last seen, and when (our monotonic clock) it was seen to change.
        self._observed: Obj | None = None
        self._observed_at = 0.0
        self._written: Obj | None = None  # the Lease as our last successful write returned it

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

    @property
    def observed(self) -> Obj | None:
        """The Lease record as this candidate last saw it (None before its first read)."""
        return self._observed

    def _observe(self, spec: Obj) -> None:
        """Remember `spec`, restarting the expiry countdown if it differs from the last seen."""
        if spec != self._observed:
            self._observed = spec
            self._observed_at = self.clock.monotonic()

    def held_by_another(self, spec: Obj) -> bool:
        """Whether `spec` names another holder whose term has not run out on our clock:
        its lease duration since we saw the record change (renewTime is not compared)."""
        holder = spec.get("holderIdentity") or ""
        if not holder or holder == self.identity:
            return False
        duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
        return self.clock.monotonic() < self._observed_at + duration

    def _renew_written(self) -> bool:
        """Renew from the Lease our last write returned; False (and forgotten) on Conflict."""
        lease = self._written
        if lease is None or not self.is_leader.is_set():
            return False
        spec = lease.get("spec") or {}
        new_spec = self._spec(int(spec.get("leaseTransitions") or 0), spec.get("acquireTime"))
        try:
            self._written = self.kube.replace(
                LEASES, {**lease, "spec": new_spec}, self.namespace, timeout=self._timeout()
            )
        except errors.Conflict:
            self._written = None
            return False
        self._observe(new_spec)
        return True

    def try_acquire_or_renew(self) -> bool:
        """One attempt; True when this process holds the Lease afterwards."""
        if self._renew_written():
            return True
        self._written = None
        lease = self.kube.get_or_none(LEASES, self.name, self.namespace, timeout=self._timeout())
        if lease is None:
            spec = self._spec(0, None)
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": spec,
            }
            try:
                self._written = self.kube.create(
                    LEASES, body, self.namespace, timeout=self._timeout()
                )
            except errors.Conflict:
                return False
            self._observe(spec)
            return True
        spec = lease.get("spec") or {}
        self._observe(spec)
        if self.held_by_another(spec):
            return False
        transitions = int(spec.get("leaseTransitions") or 0)
        if (spec.get("holderIdentity") or "") == self.identity:
            new_spec = self._spec(transitions, spec.get("acquireTime"))
        else:
            new_spec = self._spec(transitions + 1, None)
        lease["spec"] = new_spec
        try:
            self._written = self.kube.replace(
                LEASES, lease, self.namespace, timeout=self._timeout()
            )
        except errors.Conflict:
            return False
        self._observe(new_spec)
        return True

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

    def _until_deadline(self) -> float:
        """Seconds until the last renewal is `renew_deadline` old: the first moment
        `_check_deadline` can step down (a renewal meanwhile only moves it later)."""
        with self._lock:
            left = self._renewed_at + self.renew_deadline - self.clock.monotonic()
        return max(0.01, left)

    def _watch_deadline(self, stop: Wakeup) -> None:
        """Step down on time even while a renew request hangs in `run`. Sleeps until leading,
        then until the deadline of the last renewal: one wake per renewal, not a poll."""
        while not stop.is_set() and not self._check_deadline():
            if not self.is_leader.is_set():
                leading_or_stopped = first_of(stop, self.is_leader, self.lost)
                if not self.is_leader.is_set():
                    leading_or_stopped.wait()
                continue
            stop.wait(self._until_deadline())

    def start(self, stop: Wakeup) -> threading.Thread:
        """Start campaigning; the thread returned ends after the release on `stop`, or on loss."""
        thread = threading.Thread(
            target=self.run, args=(stop,), name="leader-election", daemon=True
        )
        thread.start()
        threading.Thread(
            target=self._watch_deadline, args=(stop,), name="lease-deadline", daemon=True
        ).start()
        return thread
