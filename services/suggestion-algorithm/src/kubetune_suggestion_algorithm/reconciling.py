"""The algorithm process as a one-key controller of `kubetune.runtime`: one `Syncer` pass per
change of its Suggestion, its Experiment or the Experiment's Trials.

Why the runtime and not a loop of its own: the same work queue (one pass at a time, changes
during a pass give one more pass), backoff after a failed pass, probes, signals and logs as
every controller. Neighbours: `syncing` (the pass), `main` (flags and wiring).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from kubetune import knownresults
from kubetune.kube import TRIALS
from kubetune.runtime import Context, Key, Result
from kubetune_suggestion_algorithm import syncing

READY_FILE = "ready"
"""Under the data directory, written after the first pass: the Deployment's readiness probe."""


class Reconciler:
    """Keeps one `Syncer` (the algorithm's study) across passes; made on the first pass from
    the context's client."""

    def __init__(
        self,
        algorithm: str,
        directory: Path | None,
        *,
        max_bytes: int = syncing.DEFAULT_MAX_BYTES,
        keep_named: int = syncing.DEFAULT_KEEP_NAMED,
        resync: float = 30.0,
        bridge: syncing.Bridging | None = None,
        warm_start_dir: Path = Path(knownresults.MOUNT_ROOT),
    ) -> None:
        self.algorithm = algorithm
        self.directory = directory
        self.max_bytes = max_bytes
        self.keep_named = keep_named
        self.resync = resync
        self.bridge = bridge
        self.warm_start_dir = warm_start_dir
        self.syncer: syncing.Syncer | None = None
        self.marker = (directory or Path(tempfile.gettempdir())) / READY_FILE
        self.marker.unlink(missing_ok=True)

    def reconcile(self, ctx: Context, key: Key) -> Result:
        """One pass; another at once when it wrote (there may be more to do), else after
        `resync` seconds unless a change comes first."""
        if self.syncer is None:
            self.syncer = syncing.Syncer(
                ctx.kube,
                key.namespace,
                key.name,
                self.algorithm,
                self.directory,
                max_bytes=self.max_bytes,
                keep_named=self.keep_named,
                bridge=self.bridge,
                warm_start_dir=self.warm_start_dir,
            )
        # The watch caches answer the reads: no GET of Suggestion and Experiment per pass.
        self.syncer.read = lambda resource: ctx.read(resource, key)
        trials = ctx.list(TRIALS, key.namespace)
        again = self.syncer.sync(trials)
        if not self.marker.exists():
            self.marker.write_text("ready\n")
        return Result.again() if again else Result.after(self.resync)
