"""The reconcile runtime on a real API server: watch, relist after 410 Gone, leader hand-over,
and what a reconcile gets (`Context`): cached reads, on-demand watches, status writes."""

from __future__ import annotations

import argparse
import base64
import contextlib
import datetime
import json
import logging
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from kubetune import errors
from kubetune.clock import ManualClock
from kubetune.kube import (
    CONFIGMAPS,
    LEASES,
    NAMESPACES,
    SERVICE_ACCOUNTS,
    SUGGESTIONS,
    Kube,
    Obj,
    Resource,
    connect,
)
from kubetune.runtime import Context, Controller, Key, OnDemand, Result, own_key, running
from kubetune.runtime.electing import LeaderElector
from kubetune.runtime.queue import WorkQueue
from kubetune.runtime.watching import WATCH_RESTARTS, Event, Informer
from kubetune.wakeups import Wakeup
from kubetune_testkit import skips
from localcluster.pytest_plugin import ClusterHandle

pytestmark = pytest.mark.integration


def wait_for(check: Callable[[], bool], timeout: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


@pytest.fixture
def stop() -> Iterator[Wakeup]:
    event = Wakeup()
    yield event
    event.set()


def configmap(name: str, value: str = "1") -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name},
        "data": {"v": value},
    }


def test_informer_sees_add_modify_delete(kube: Kube, namespace: str, stop: threading.Event) -> None:
    seen: list[tuple[str, str]] = []
    informer = Informer(
        kube,
        CONFIGMAPS,
        lambda e: seen.append((e.type, e.object["metadata"]["name"])),
        namespace=namespace,
    )
    informer.start(stop)
    assert informer.synced.wait(30)
    kube.create(CONFIGMAPS, configmap("a"), namespace)
    kube.patch(CONFIGMAPS, "a", {"data": {"v": "2"}}, namespace)
    assert kube.get(CONFIGMAPS, "a", namespace)["metadata"].get("managedFields")
    wait_for(lambda: ("MODIFIED", "a") in seen, what="the update event")
    cached = informer.get(namespace, "a")
    assert cached is not None and cached["data"] == {"v": "2"}
    assert "managedFields" not in cached["metadata"]  # the cache never holds them
    kube.delete(CONFIGMAPS, "a", namespace)
    wait_for(lambda: ("DELETED", "a") in seen, what="the delete event")
    events = [e for e in seen if e[1] == "a"]
    assert events == [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a")]
    assert ("", "a") not in informer.cache and (namespace, "a") not in informer.cache


def test_informer_select_follows_label_changes_deletes_and_relists(
    kube: Kube, namespace: str, stop: threading.Event
) -> None:
    """`select` answers from the namespace/label index (one Experiment's Trials without going
    through all of them): it must agree with the cache after relabels, deletes and a relist."""
    informer = Informer(kube, CONFIGMAPS, lambda e: None, namespace=namespace)
    informer.start(stop)
    assert informer.synced.wait(30)

    def labelled(name: str, **labels: str) -> dict[str, object]:
        body = configmap(name)
        body["metadata"] = {"name": name, "labels": labels}
        return body

    def names(**labels: str) -> set[str]:
        return {o["metadata"]["name"] for o in informer.select(namespace, labels)}

    kube.create(CONFIGMAPS, labelled("a", exp="x", kind="t"), namespace)
    kube.create(CONFIGMAPS, labelled("b", exp="y", kind="t"), namespace)
    kube.create(CONFIGMAPS, labelled("c"), namespace)
    wait_for(lambda: names() >= {"a", "b", "c"}, what="three objects cached")
    assert names(exp="x") == {"a"} and names(exp="y", kind="t") == {"b"}
    kube.patch(CONFIGMAPS, "a", {"metadata": {"labels": {"exp": "y"}}}, namespace)
    wait_for(lambda: names(exp="y") == {"a", "b"}, what="the relabel")
    assert names(exp="x") == set()
    kube.delete(CONFIGMAPS, "b", namespace)
    wait_for(lambda: names(exp="y") == {"a"}, what="the delete")
    assert names(kind="t") == {"a"}
    informer.relist()
    assert names(exp="y") == {"a"} and names(exp="x") == set() and "c" in names()
    assert informer.select("elsewhere", {}) == []
    everything = {o["metadata"]["name"] for o in informer.select(None, {"exp": "y"})}
    assert everything == {"a"}


def _reconciles(controller: str, outcome: str) -> float:
    """The runtime's count of finished passes of `controller` that ended in `outcome`."""
    labels = {"controller": controller, "outcome": outcome}
    return REGISTRY.get_sample_value("kubetune_reconcile_total", labels) or 0.0


def _etcd_url(cluster: ClusterHandle) -> str:
    """The local cluster's etcd client URL; only our own cluster lets a test compact etcd."""
    state = cluster.state
    if state is None and os.environ.get("LOCALCLUSTER_STATE_DIR"):
        from localcluster.cluster import State

        state = State.load(Path(os.environ["LOCALCLUSTER_STATE_DIR"]))
    if state is None:
        skips.skip("existing cluster", "compacting etcd needs the local cluster's etcd")
    return f"http://127.0.0.1:{state.ports['etcd-client']}"


def _etcd(url: str, path: str, body: dict[str, object]) -> dict[str, object]:
    request = urllib.request.Request(
        url + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        answer: dict[str, object] = json.loads(response.read())
    return answer


def compact_etcd(cluster: ClusterHandle) -> None:
    """Compact etcd's history up to now, as its periodic compaction does in production."""
    url = _etcd_url(cluster)
    header = _etcd(url, "/v3/kv/range", {"key": base64.b64encode(b"/registry/").decode()})["header"]
    assert isinstance(header, dict)
    _etcd(url, "/v3/kv/compaction", {"revision": int(header["revision"]), "physical": True})


def _churn(kube: Kube, namespace: str) -> str:
    """Create and update objects, returning a resourceVersion from before the updates."""
    kube.create(CONFIGMAPS, configmap("churn"), namespace)
    old = kube.list(CONFIGMAPS, namespace)["metadata"]["resourceVersion"]
    for i in range(3):
        kube.patch(CONFIGMAPS, "churn", {"data": {"v": str(i)}}, namespace)
    return str(old)


def test_watch_from_a_compacted_version_answers_gone(
    kube: Kube, namespace: str, cluster: ClusterHandle
) -> None:
    old = _churn(kube, namespace)
    compact_etcd(cluster)
    with pytest.raises(errors.Gone):
        for event in kube.watch(CONFIGMAPS, namespace, resource_version=old, timeout_seconds=5):
            obj = event["object"]
            if event["type"] == "ERROR":
                raise errors.from_status(obj["code"], obj.get("reason", ""), obj.get("message", ""))


def test_informer_relists_after_gone(
    kube: Kube, namespace: str, stop: threading.Event, cluster: ClusterHandle
) -> None:
    old = _churn(kube, namespace)
    kube.create(CONFIGMAPS, configmap("before"), namespace)
    compact_etcd(cluster)
    seen: list[Event] = []
    gone_before = WATCH_RESTARTS.labels("configmaps", "gone")._value.get()
    # Resuming from a version etcd no longer has must relist, not miss objects.
    informer = Informer(kube, CONFIGMAPS, seen.append, namespace=namespace, resume_from=old)
    informer.start(stop)
    wait_for(lambda: any(e.object["metadata"]["name"] == "before" for e in seen), what="relist")
    assert WATCH_RESTARTS.labels("configmaps", "gone")._value.get() == gone_before + 1
    kube.create(CONFIGMAPS, configmap("after"), namespace)
    wait_for(lambda: any(e.object["metadata"]["name"] == "after" for e in seen), what="watch")


def test_controller_reconciles_each_change_and_retries_failures(
    kube: Kube, namespace: str, stop: threading.Event
) -> None:
    calls: list[Key] = []
    failures = {"flaky": 2}

    def reconcile(ctx: Context, key: Key) -> Result:
        calls.append(key)
        if failures.get(key.name, 0) > 0:
            failures[key.name] -= 1
            raise RuntimeError("transient")
        return Result.done()

    controller = Controller("test", reconcile)
    controller.watch(CONFIGMAPS, namespace=namespace)
    controller.start_informers(kube, stop)
    controller.start_workers(stop)
    kube.create(CONFIGMAPS, configmap("flaky"), namespace)
    kube.create(CONFIGMAPS, configmap("steady"), namespace)
    key = Key(namespace, "flaky")
    wait_for(lambda: calls.count(key) >= 3, what="two retries of the flaky key")
    assert failures["flaky"] == 0
    # The flaky key's retries (10 ms apart) can all come before the second create's event.
    wait_for(lambda: Key(namespace, "steady") in calls, what="the steady key reconciled")
    controller.queue.shutdown()


ELECTOR_SCRIPT = textwrap.dedent(
    """
    import sys, threading, signal, time
    from kubetune.kube import Kube, connect
    from kubetune.runtime.electing import LeaderElector
    kube = Kube(connect(sys.argv[1]))
    elector = LeaderElector(kube, sys.argv[2], "handover", sys.argv[3],
                            lease_duration=3, renew_deadline=2, retry_period=0.3)
    from kubetune.wakeups import Wakeup
    stop = Wakeup()
    signal.signal(signal.SIGTERM, lambda *a: stop.set())
    thread = elector.start(stop)
    print("candidate", flush=True)
    announced = False
    while not stop.is_set():
        if elector.is_leader.is_set() and not announced:
            print("leader", flush=True)
            announced = True
        time.sleep(0.05)
    thread.join(5)
    print("released", flush=True)
    """
)


def _holder(kube: Kube, namespace: str) -> str:
    lease = kube.get_or_none(LEASES, "handover", namespace)
    return ((lease or {}).get("spec") or {}).get("holderIdentity") or ""


def _renewed_at(kube: Kube, namespace: str) -> tuple[str, float]:
    """The Lease's holder and its last renewTime (seconds since the epoch, 0 when none)."""
    spec = kube.get(LEASES, "handover", namespace).get("spec") or {}
    stamp = spec.get("renewTime")
    return spec.get("holderIdentity") or "", (
        datetime.datetime.fromisoformat(stamp).timestamp() if stamp else 0.0
    )


def test_leader_election_hands_over_between_processes(
    kube: Kube, namespace: str, cluster: ClusterHandle, tmp_path: Path
) -> None:
    script = tmp_path / "elector.py"
    script.write_text(ELECTOR_SCRIPT)

    def candidate(name: str) -> subprocess.Popen[str]:
        command = [sys.executable, str(script), cluster.kubeconfig, namespace, name]
        return subprocess.Popen(command, stdout=subprocess.PIPE, text=True)

    with candidate("first") as first:
        try:
            assert first.stdout is not None
            assert [first.stdout.readline().strip() for _ in "ab"] == ["candidate", "leader"]
            with candidate("second") as second:
                try:
                    assert second.stdout is not None
                    assert second.stdout.readline().strip() == "candidate"
                    # The standby waits while the leader renews: the leader renews past a whole
                    # lease (3 s) after the standby started looking, and keeps the Lease.
                    looking = time.time()
                    holders: set[str] = set()

                    def renewed_past_a_lease() -> bool:
                        holder, renewed = _renewed_at(kube, namespace)
                        holders.add(holder)
                        return holder != "first" or renewed > looking + 3 + 1

                    wait_for(renewed_past_a_lease, 20, "the leader's renewals past a lease")
                    assert holders == {"first"}, f"Lease left its leader: {sorted(holders)}"
                    first.kill()  # no release: the standby must wait for the lease to expire
                    first.wait(10)
                    wait_for(lambda: _holder(kube, namespace) == "second", 20, "take-over")
                    assert second.stdout is not None
                    assert second.stdout.readline().strip() == "leader"
                    second.terminate()  # a clean stop releases the lease at once
                    assert second.wait(10) == 0
                    assert _holder(kube, namespace) == ""
                finally:
                    second.kill()
        finally:
            first.kill()


def test_elector_refuses_a_lease_held_by_a_live_leader(kube: Kube, namespace: str) -> None:
    a = LeaderElector(kube, namespace, "held", "a", lease_duration=30)
    b = LeaderElector(kube, namespace, "held", "b", lease_duration=30)
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    assert a.try_acquire_or_renew()  # renewal by the holder
    a.release()
    assert b.try_acquire_or_renew()


class PausableProxy:
    """A TCP proxy in front of the API server; `pause()` holds every byte (a hung request)."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.flowing = threading.Event()
        self.flowing.set()
        self.closed = threading.Event()
        self.sockets: list[socket.socket] = [self.listener]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            self.sockets += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                while not self.flowing.wait(0.1):
                    if self.closed.is_set():
                        return
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def pause(self) -> None:
        self.flowing.clear()

    def close(self) -> None:
        self.closed.set()
        self.flowing.set()
        for s in self.sockets:
            with contextlib.suppress(OSError):
                s.close()


@pytest.fixture
def proxy(cluster: ClusterHandle) -> Iterator[PausableProxy]:
    api = connect(cluster.kubeconfig)
    url = urllib.parse.urlsplit(api.configuration.host)
    p = PausableProxy((url.hostname or "127.0.0.1", url.port or 443))
    yield p
    p.close()


def _through(cluster: ClusterHandle, proxy: PausableProxy) -> Kube:
    api = connect(cluster.kubeconfig)
    api.configuration.host = f"https://127.0.0.1:{proxy.port}"
    return Kube(api)


def test_a_leader_whose_renewal_hangs_steps_down_before_its_lease_expires(
    cluster: ClusterHandle, namespace: str, proxy: PausableProxy, stop: Wakeup
) -> None:
    """A renew request that never answers must not keep a leader acting past its lease (the
    request timeout was 30 s, the lease 15 s): the request times out within the renew deadline
    and the elector reports the loss before another candidate may take the Lease."""
    elector = LeaderElector(
        _through(cluster, proxy),
        namespace,
        "hang",
        "a",
        lease_duration=3,
        renew_deadline=2,
        retry_period=0.3,
    )
    thread = elector.start(stop)
    assert elector.is_leader.wait(10)
    time.sleep(0.5)  # a renewal or two went through
    proxy.pause()
    paused = time.monotonic()
    assert elector.lost.wait(5), "still leading with a hung API server"
    assert time.monotonic() - paused < 3, "lost only after the lease had expired"
    assert not elector.is_leader.is_set()
    thread.join(5)
    assert not thread.is_alive()


def _process(kube: Kube, namespace: str, lease: str) -> running.Process:
    parser = argparse.ArgumentParser()
    running.add_flags(parser, "test")
    args = parser.parse_args(
        [
            "--probe-port=0",
            "--probe-address=127.0.0.1",
            "--leader-elect",
            f"--leader-election-namespace={namespace}",
            f"--leader-election-id={lease}",
        ]
    )
    controller = Controller("test", lambda ctx, key: Result.done())
    controller.watch(CONFIGMAPS, namespace=namespace)
    return running.Process(kube, [controller], args)


def test_a_process_that_cannot_renew_stops_its_controllers_within_the_lease(
    cluster: ClusterHandle, namespace: str, proxy: PausableProxy
) -> None:
    process = _process(_through(cluster, proxy), namespace, "hang-process")
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(process.run()), daemon=True)
    thread.start()
    try:
        wait_for(process.started.is_set, 30, "the process to lead and start")
        proxy.pause()
        paused = time.monotonic()
        thread.join(20)
        assert codes == [1], "a leader that cannot renew exits with an error"
        # The default lease is 15 s: a standby may take over then, so by then we are gone.
        assert time.monotonic() - paused < 15
        assert not process.leading()
    finally:
        process.stop.set()


class SlowLeaseWrites(Kube):
    """The real API server, with every Lease write taking 0.5 s (a loaded server)."""

    def __init__(self, kube: Kube) -> None:
        super().__init__(kube.api)
        self.releases = 0

    def replace(self, res: Any, body: Any, namespace: str | None = None, **kw: Any) -> Any:
        if res == LEASES:
            if not (body.get("spec") or {}).get("holderIdentity"):
                self.releases += 1
            time.sleep(0.5)
        return super().replace(res, body, namespace, **kw)


def test_sigterm_releases_the_lease_once(
    kube: Kube, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Both the elector thread and the process's shutdown released the Lease, racing (409)."""
    slow = SlowLeaseWrites(kube)
    process = _process(slow, namespace, "release-once")
    thread = threading.Thread(target=process.run, daemon=True)
    thread.start()
    wait_for(process.started.is_set, 30, "the process to lead and start")
    with caplog.at_level(logging.WARNING):
        process.stop.set()  # what the SIGTERM handler does
        thread.join(30)
    assert not thread.is_alive()
    assert slow.releases == 1
    assert not [r for r in caplog.records if "release" in r.getMessage()]
    lease = kube.get(LEASES, "release-once", namespace)
    assert not lease["spec"].get("holderIdentity")


# --- what a reconcile gets: `kubetune.runtime.Context` -----------------------------------------


class CountingKube(Kube):
    """The real API server; counts the GETs of single objects and the patches, per resource."""

    def __init__(self, kube: Kube) -> None:
        super().__init__(kube.api)
        self.gets: Counter[str] = Counter()
        self.patches: Counter[str] = Counter()

    def get(self, res: Resource, name: str, namespace: str | None = None, **kw: Any) -> Obj:
        self.gets[res.plural] += 1
        return super().get(res, name, namespace, **kw)

    def patch(
        self, res: Resource, name: str, patch: Any, namespace: str | None = None, **kw: Any
    ) -> Obj:
        self.patches[res.plural] += 1
        return super().patch(res, name, patch, namespace, **kw)


@pytest.fixture
def counting(kube: Kube) -> CountingKube:
    return CountingKube(kube)


def _done(ctx: Context, key: Key) -> Result:
    return Result.done()


def _started(kube: Kube, stop: threading.Event, namespace: str, *watched: Resource) -> Controller:
    controller = Controller("test", _done, namespace=namespace)
    for resource in watched:
        controller.watch(resource, namespace=namespace)
    controller.start_informers(kube, stop)
    if watched:
        wait_for(controller.synced, what="the caches")
    return controller


def _configmap(kube: Kube, namespace: str, name: str) -> Obj:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {}}
    return kube.create(CONFIGMAPS, body, namespace)


def test_read_serves_a_watched_object_from_the_cache_and_asks_the_server_otherwise(
    counting: CountingKube, namespace: str, stop: threading.Event
) -> None:
    kube = counting
    _configmap(kube, namespace, "cached")
    controller = _started(kube, stop, namespace, CONFIGMAPS)
    ctx = controller.context(Key(namespace, "cached"))
    kube.gets.clear()

    cached = ctx.read(CONFIGMAPS, Key(namespace, "cached"))
    assert cached is not None and cached["metadata"]["name"] == "cached"
    assert kube.gets["configmaps"] == 0, "a cached object costs no request"

    # absent from the synced cache: it may be lag behind a create, so the server answers
    assert ctx.read(CONFIGMAPS, Key(namespace, "absent")) is None
    assert kube.gets["configmaps"] == 1
    # unless the caller says a stale "absent" is harmless
    assert ctx.read(CONFIGMAPS, Key(namespace, "absent"), trust_absent=True) is None
    assert kube.gets["configmaps"] == 1
    # fresh: the server, even for a cached object (about to be status-written)
    assert ctx.read(CONFIGMAPS, Key(namespace, "cached"), fresh=True) is not None
    assert kube.gets["configmaps"] == 2

    # a resource the controller does not watch: a GET
    account = ctx.read(SERVICE_ACCOUNTS, Key(namespace, "default"))
    assert account is not None and kube.gets["serviceaccounts"] == 1
    assert controller.informers_of(SERVICE_ACCOUNTS) == []


def test_read_starts_a_watch_on_demand_and_its_changes_wake_the_reconcile(
    counting: CountingKube, namespace: str, stop: threading.Event
) -> None:
    kube = counting
    _configmap(kube, namespace, "first")
    controller = _started(kube, stop, namespace)  # watches nothing from the start
    ctx = controller.context(Key(namespace, "first"))
    how = OnDemand(own_key)

    # the first read starts the watch (the server answers until its cache has listed)
    assert controller.informers_of(CONFIGMAPS) == []
    assert ctx.read(CONFIGMAPS, Key(namespace, "first"), watch=how) is not None
    (informer,) = controller.informers_of(CONFIGMAPS)
    wait_for(informer.synced.is_set, what="the on-demand cache")
    gets = kube.gets["configmaps"]
    assert ctx.read(CONFIGMAPS, Key(namespace, "first"), watch=how) is not None
    assert kube.gets["configmaps"] == gets, "served from the on-demand cache"
    assert controller.informers_of(CONFIGMAPS) == [informer], "one watch per resource"

    # the listed object's key was queued; a new object's change wakes its key too
    assert Key(namespace, "first") in _queued(controller)
    _configmap(kube, namespace, "second")
    assert Key(namespace, "second") in _queued(controller)
    names = {o["metadata"]["name"] for o in ctx.list(CONFIGMAPS, namespace)}
    assert {"first", "second"} <= names


def _queued(controller: Controller) -> list[Key]:
    """The keys queued until 3 s pass without one (the namespace holds kube-root-ca.crt too)."""
    keys = []
    while (key := controller.queue.get(3)) is not None:
        assert isinstance(key, Key)
        keys.append(key)
        controller.queue.done(key)
    return keys


def test_list_needs_a_watched_and_synced_cache(
    kube: Kube, namespace: str, stop: threading.Event
) -> None:
    controller = Controller("test", _done)
    controller.watch(CONFIGMAPS, namespace=namespace)
    ctx = controller.context(Key(namespace, "x"))
    with pytest.raises(LookupError, match="does not watch"):
        ctx.list(CONFIGMAPS)  # not started: no informer yet
    controller.start_informers(kube, stop)
    controller.informers[0].synced.wait(30)
    assert ctx.list(CONFIGMAPS, namespace, {"absent": "label"}) == []
    controller.informers[0].synced.clear()  # as before the first list
    with pytest.raises(errors.TemporaryError, match="not synced"):
        ctx.list(CONFIGMAPS)


def _suggestion(kube: Kube, namespace: str, name: str) -> Obj:
    body = {
        "apiVersion": "kubeflow.org/v1beta1",
        "kind": "Suggestion",
        "metadata": {"name": name},
        "spec": {"algorithm": {"algorithmName": "random"}, "requests": 1},
    }
    kube.create(SUGGESTIONS, body, namespace)
    # another writer's field (the algorithm's), which a status write must leave alone
    return kube.patch(
        SUGGESTIONS, name, {"status": {"suggestionCount": 1}}, namespace, subresource="status"
    )


def test_write_status_skips_an_unchanged_status_and_leaves_other_fields_alone(
    crds: None, counting: CountingKube, namespace: str, stop: threading.Event
) -> None:
    kube = counting
    obj = _suggestion(kube, namespace, "s")
    ctx = _started(kube, stop, namespace).context(Key(namespace, "s"))
    new = {"startTime": "2026-01-01T00:00:00Z"}
    kube.patches.clear()

    assert ctx.write_status(SUGGESTIONS, obj, new) is True
    stored = kube.get(SUGGESTIONS, "s", namespace)
    assert stored["status"] == {"suggestionCount": 1, **new}
    assert kube.patches["suggestions"] == 1

    # the same status again: no request
    assert ctx.write_status(SUGGESTIONS, stored, new) is False
    assert kube.patches["suggestions"] == 1

    # None removes a field
    assert ctx.write_status(SUGGESTIONS, stored, {"startTime": None}) is True
    assert kube.get(SUGGESTIONS, "s", namespace)["status"] == {"suggestionCount": 1}


def test_a_stale_status_write_conflicts_and_the_key_is_requeued(
    crds: None, kube: Kube, namespace: str, stop: threading.Event
) -> None:
    stale = _suggestion(kube, namespace, "s")
    kube.patch(
        SUGGESTIONS, "s", {"status": {"suggestionCount": 2}}, namespace, subresource="status"
    )
    written: list[bool] = []

    def reconcile(ctx: Context, key: Key) -> Result:
        written.append(ctx.write_status(SUGGESTIONS, stale, {"startTime": "2026-01-01T00:00:00Z"}))
        return Result.done()

    controller = Controller("test", reconcile, namespace=namespace)
    controller.start_informers(kube, stop)
    key = Key(namespace, "s")
    controller.queue.add(key)
    assert controller.queue.get(0) == key
    controller._handle(key)
    controller.queue.done(key)

    assert written == [], "the write raised"
    assert controller.queue.attempts(key) == 1, "requeued with the key's backoff"
    assert controller.queue.get(5) == key
    status = kube.get(SUGGESTIONS, "s", namespace)["status"]
    assert status == {"suggestionCount": 2}, "the newer write was not overwritten"


def test_a_namespace_being_deleted_ends_the_key_quietly(
    kube: Kube, stop: threading.Event, caplog: pytest.LogCaptureFixture
) -> None:
    """Objects of a terminating namespace may still change (the namespace controller deletes
    them one by one); a reconcile that then creates something gets 403 NamespaceTerminating,
    which must neither retry nor log a traceback."""
    ns = f"terminating-{os.getpid()}-{int(time.monotonic() * 1000) % 100000}"
    kube.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    held = configmap("held")
    held["metadata"]["finalizers"] = ["kubetune.test/hold"]  # type: ignore[index]
    kube.create(CONFIGMAPS, held, ns)
    refused: list[errors.ApiError] = []

    def reconcile(ctx: Context, key: Key) -> Result:
        if key.name != "held":
            return Result.done()
        try:
            ctx.kube.create(CONFIGMAPS, configmap(f"copy-{len(refused)}"), ns)
        except errors.AlreadyExists:
            pass
        except errors.Forbidden as e:
            refused.append(e)
            raise
        return Result.done()

    # The queue's clock stands still: a retry, whatever its delay, stays in the queue to be seen.
    controller = Controller("terminating", reconcile, queue=WorkQueue(clock=ManualClock()))
    controller.watch(CONFIGMAPS, namespace=ns)
    controller.start_informers(kube, stop)
    controller.start_workers(stop)
    try:
        wait_for(lambda: kube.get_or_none(CONFIGMAPS, "copy-0", ns) is not None)
        kube.delete(NAMESPACES, ns)
        caplog.set_level(logging.INFO, logger="kubetune.terminating")
        kube.patch(CONFIGMAPS, "held", {"metadata": {"labels": {"touched": "yes"}}}, ns)
        wait_for(lambda: bool(refused), what="the create refused in the terminating namespace")
        assert errors.is_namespace_terminating(refused[0]), refused[0]
        wait_for(lambda: _reconciles("terminating", "namespace-terminating") >= 1, what="handled")
        # Every other event's pass runs at once; a retry would wait in the queue for ever.
        wait_for(lambda: len(controller.queue) == 0, what="an empty queue (no retry scheduled)")
        assert _reconciles("terminating", "error") == 0, "a refusal was taken for a failure"
        lines = [r for r in caplog.records if r.name.startswith("kubetune.terminating")]
        assert not [r for r in lines if r.levelno >= logging.WARNING or r.exc_info], lines
        assert any("is being deleted; nothing to do" in r.getMessage() for r in lines)
    finally:
        controller.queue.shutdown()
        kube.patch(CONFIGMAPS, "held", {"metadata": {"finalizers": None}}, ns)


class PageRecordingKube(Kube):
    """The real API server; records the JSON size and item count of every list page."""

    def __init__(self, kube: Kube) -> None:
        super().__init__(kube.api)
        self.recorded: list[tuple[int, int]] = []

    def list(self, res: Resource, namespace: str | None = None, **kw: Any) -> Obj:
        sizes: list[int] = kw.pop("sizes", None)
        sizes = [] if sizes is None else sizes
        page = super().list(res, namespace, sizes=sizes, **kw)
        self.recorded.append((sizes[-1], len(page.get("items") or [])))
        return page


def test_list_pages_of_large_objects_stay_near_the_byte_budget(
    kube: Kube, namespace: str, stop: threading.Event
) -> None:
    """500 Trials with 64 KiB histories are 35 MiB of JSON in one page: the informer sizes its
    pages by the bytes the last one held (ConfigMaps of 100 KB stand in for them here)."""
    for i in range(16):
        kube.create(CONFIGMAPS, configmap(f"big-{i:02d}", "x" * 100_000), namespace)
    recording = PageRecordingKube(kube)
    informer = Informer(
        recording, CONFIGMAPS, lambda e: None, namespace=namespace, page_size=8, page_bytes=300_000
    )
    informer.start(stop)
    assert informer.synced.wait(30)
    names = {obj["metadata"]["name"] for obj in informer.select(namespace, {})}
    assert {f"big-{i:02d}" for i in range(16)} <= names
    (first_size, first_count), *rest = recording.recorded
    assert first_count == 8 and first_size > 800_000
    assert rest, "one page"
    for size, count in rest:
        assert count <= 3 and size <= 300_000 + 2_000, f"{count} objects, {size} bytes"
