"""The webhook refuses to be Ready while Katib's webhook configurations exist.

Why: with both webhooks registered, a trial pod would be mutated by Katib's and by kubetune's,
and an Experiment defaulted and validated by both. `kubectl apply -k` cannot refuse by itself,
so the webhook checks at start and every `interval` seconds (by name, `get` only), and while
Katib's configurations exist its readiness probe fails: the Deployment never becomes Available
and `kubectl wait` on it fails with the log naming each object and the command that removes it
(logged once per change). Meanwhile admission keeps answering (see `reviewing.py`): Experiments
and Trials are still validated, trial pods are admitted unchanged with a warning, so nothing is
injected twice and nothing waits on a webhook that is not Ready.
"""

from __future__ import annotations

import logging
import threading

import urllib3

from kubetune import errors, katibpresence
from kubetune.kube import Kube

log = logging.getLogger(__name__)

DEFAULT_INTERVAL = 30.0


class KatibGuard:
    """What of Katib's webhook configurations is present, refreshed every `interval`."""

    def __init__(self, kube: Kube, interval: float = DEFAULT_INTERVAL) -> None:
        self.kube = kube
        self.interval = interval
        self._found: tuple[katibpresence.Finding, ...] = ()
        self._forbidden = False

    def present(self) -> bool:
        """Whether Katib's webhook configurations were there at the last check."""
        return bool(self._found)

    def ready(self) -> bool:
        return not self._found

    def check_once(self) -> None:
        try:
            found = tuple(katibpresence.webhook_configurations(self.kube))
        except errors.Forbidden as e:
            if not self._forbidden:
                log.error(
                    "cannot check for Katib's webhook configurations (%s): grant the webhook's "
                    "ServiceAccount get on mutatingwebhookconfigurations and "
                    "validatingwebhookconfigurations named katib.kubeflow.org "
                    "(kustomize/base/webhook/rbac.yaml)",
                    e,
                )
            self._forbidden = True
            return
        except (errors.ApiError, OSError, urllib3.exceptions.HTTPError) as e:
            log.warning("checking for Katib's webhook: %s; retrying in %gs", e, self.interval)
            return
        self._forbidden = False
        if found == self._found:
            return
        self._found = found
        if found:
            log.error(
                "Katib's webhook is installed: kubetune's webhook stays not Ready, and admits "
                "trial pods unchanged, until it is removed: %s",
                "; ".join(f"{what}: {command}" for what, command in found),
            )
        else:
            log.info("Katib's webhook configurations are gone: ready")

    def run(self, stop: threading.Event) -> None:
        while not stop.wait(self.interval):
            self.check_once()

    def start(self, stop: threading.Event) -> None:
        """Check now (so the first probe already answers), then every `interval` in a thread."""
        self.check_once()
        threading.Thread(target=self.run, args=(stop,), name="katib-guard", daemon=True).start()
