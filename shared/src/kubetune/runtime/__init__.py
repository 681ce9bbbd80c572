"""The controller runtime: work queue, informers, leader election, probes, process lifecycle.

Layers: `queue` (keys and backoff) < `watching` (list+watch into a cache) < `controlling`
(reconcile loop) < `running` (the process: flags, signals, election, probes).
"""

from kubetune.runtime.controlling import Controller, Key, Result, own_key, owner_keys
from kubetune.runtime.queue import Backoff, WorkQueue

__all__ = ["Backoff", "Controller", "Key", "Result", "WorkQueue", "own_key", "owner_keys"]
