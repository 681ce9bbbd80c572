"""The controller runtime: work queue, informers, leader election, probes, process lifecycle.

Layers: `queue` (keys, backoff and the retry bucket) < `watching` (list+watch into a cache) <
`context` (what one reconcile gets: client, cached reads, events, logger, clock, status write)
< `controlling` (reconcile loop) < `running` (the process: flags, signals, election, probes).
"""

from kubetune.runtime.context import Context, Key, OnDemand, Result
from kubetune.runtime.controlling import Controller, Predicate, own_key, owner_keys
from kubetune.runtime.frozen import FrozenError, thaw
from kubetune.runtime.ownwrites import OwnWrites
from kubetune.runtime.predicates import changed_beyond, fields_changed
from kubetune.runtime.queue import Backoff, TokenBucket, WorkQueue

__all__ = [
    "Backoff",
    "Context",
    "Controller",
    "FrozenError",
    "Key",
    "OnDemand",
    "OwnWrites",
    "Predicate",
    "Result",
    "TokenBucket",
    "WorkQueue",
    "changed_beyond",
    "fields_changed",
    "own_key",
    "owner_keys",
    "thaw",
]
