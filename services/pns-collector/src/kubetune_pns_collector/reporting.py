"""Write an observation to the Trial: a merge patch of `status.observation` only, on the
status subresource (one writer per field: the trial-controller owns the conditions), and,
after an early stop, the `EarlyStopped` condition: the one condition the collector may add
(the one exception to one writer per field, as upstream's early-stopping service adds it).

Intermediate reports are best effort (one attempt, rate-limited by the caller); the final one
retries with exponential backoff until its deadline. A missing Trial (NotFound) or a patch the
server rejects as invalid cannot get better by retrying; anything else (5xx, connection
errors, a RoleBinding not there yet: Forbidden) is retried.
"""

from __future__ import annotations

import time

from kubetune import errors, lightlog, metrichistory
from kubetune.clock import SYSTEM, Clock
from kubetune.kube import TRIALS, Kube
from kubetune.observations import ObservationSummary
from kubetune.typenames import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar

    T = TypeVar("T")

log = lightlog.get(__name__)


EARLY_STOPPED_MESSAGE = "Trial is early stopped"


class ReportError(Exception):
    """The observation could not be written; the message says why and how often we tried."""


def observation_patch(
    observation: ObservationSummary, history: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The merge patch: `metrics` is a list, so it replaces the previous one whole; so does
    the history's (`status.metricHistory.metrics`, bounded by kubetune.metrichistory)."""
    status: dict[str, Any] = {"observation": observation.to_wire()}
    if history is not None:
        status[metrichistory.FIELD] = history
    return {"status": status}


class Reporter:
    """Patches one Trial's `status.observation`."""

    def __init__(
        self,
        kube: Kube,
        trial: str,
        namespace: str,
        *,
        clock: Clock = SYSTEM,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.kube = kube
        self.trial = trial
        self.namespace = namespace
        self.clock = clock
        self.sleep = sleep
        self.reports = 0

    def _patch(
        self, observation: ObservationSummary, history: dict[str, Any] | None = None
    ) -> None:
        self.kube.patch(
            TRIALS,
            self.trial,
            observation_patch(observation, history),
            self.namespace,
            subresource="status",
        )
        self.reports += 1

    def try_report(
        self, observation: ObservationSummary, history: dict[str, Any] | None = None
    ) -> bool:
        """One attempt; False (logged) on any error."""
        try:
            self._patch(observation, history)
        except Exception as e:  # noqa: BLE001 - an intermediate report must not stop collection
            log.warning("intermediate report to trial %s failed: %s", self.trial, e)
            return False
        return True

    def report(
        self,
        observation: ObservationSummary,
        timeout: float = 60.0,
        history: dict[str, Any] | None = None,
    ) -> None:
        """Write it, retrying with backoff (0.1 s doubling to 5 s) for up to `timeout` seconds.

        Raises:
            ReportError: not written (terminal answer, or still failing at the deadline).
        """
        self._retrying(
            f"write the observation of trial {self.namespace}/{self.trial}",
            lambda: self._patch(observation, history),
            timeout,
        )

    def _retrying(
        self, what: str, action: Callable[[], T], timeout: float, rereads: bool = False
    ) -> T:
        """`action()`, retried with backoff (0.1 s doubling to 5 s) for up to `timeout` seconds;
        NotFound and Invalid are final. For an action that re-reads what it writes (`rereads`),
        a Conflict is retried at once.

        Raises:
            ReportError: `what` failed (terminal answer, or still failing at the deadline).
        """
        deadline = self.clock.monotonic() + timeout
        delay = 0.1
        attempt = 0
        while True:
            attempt += 1
            try:
                return action()
            except (errors.NotFound, errors.Invalid) as e:
                raise ReportError(f"cannot {what}: {e}") from e
            except Exception as e:
                if rereads and isinstance(e, errors.Conflict):
                    if self.clock.monotonic() < deadline:
                        continue
                    raise ReportError(f"cannot {what}: it kept changing for {timeout:g}s") from None
                left = deadline - self.clock.monotonic()
                if left <= 0:
                    raise ReportError(
                        f"cannot {what} after {attempt} attempts in {timeout:g}s: {e}"
                    ) from e
                log.warning("attempt %d to %s failed (%s); retrying", attempt, what, e)
                self.sleep(min(delay, left))
                delay = min(delay * 2, 5.0)

    def mark_early_stopped(self, timeout: float = 60.0) -> bool:
        """Append `EarlyStopped` (True, `TrialEarlyStopped`) to the Trial's conditions, leaving
        every other condition as it is (Running too, as upstream); False when it was there.

        A read-modify-write with the read's resourceVersion (a Conflict re-reads), so a
        condition the trial-controller wrote meanwhile is never lost.

        Raises:
            ReportError: not written (terminal answer, or still failing at the deadline).
        """

        # Imported here: the conditions' enums and state machine cost 1.2 ms of CPU at start,
        # and only a trial that is stopped early writes a condition.
        from kubetune import conditions
        from kubetune.conditions import TrialCondition, TrialReason

        def mark() -> bool:
            trial = self.kube.get(TRIALS, self.trial, self.namespace, subresource="status")
            raw = list((trial.get("status") or {}).get("conditions") or [])
            if any(
                isinstance(c, dict)
                and c.get("type") == TrialCondition.EARLY_STOPPED
                and c.get("status") == conditions.TRUE
                for c in raw
            ):
                return False
            now = conditions.rfc3339_now()
            # The others exactly as read (the authorizing webhook compares them).
            updated = [
                c
                for c in raw
                if not (isinstance(c, dict) and c.get("type") == TrialCondition.EARLY_STOPPED)
            ]
            updated.append(
                {
                    "type": TrialCondition.EARLY_STOPPED.value,
                    "status": conditions.TRUE,
                    "reason": TrialReason.EARLY_STOPPED.value,
                    "message": EARLY_STOPPED_MESSAGE,
                    "lastUpdateTime": now,
                    "lastTransitionTime": now,
                }
            )
            patch = {
                "metadata": {"resourceVersion": trial["metadata"]["resourceVersion"]},
                "status": {"conditions": updated},
            }
            self.kube.patch(TRIALS, self.trial, patch, self.namespace, subresource="status")
            return True

        return self._retrying(
            f"mark trial {self.namespace}/{self.trial} early stopped", mark, timeout, rereads=True
        )
