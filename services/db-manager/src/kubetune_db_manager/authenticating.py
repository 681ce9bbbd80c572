"""Who is calling, and may they: the authorization step of every DBManager RPC.

Katib's API carries no credentials, so db-manager proves the caller one of two ways.

Token: gRPC metadata `authorization: Bearer <jwt>`. The pod webhook gives every Push-collector
trial pod a projected service-account token for the audience `kubetune-db-manager` at
`$KUBETUNE_DB_MANAGER_TOKEN_FILE` (the kubelet refreshes it). A TokenReview for that audience
says who it is; a pod-bound token names its pod (user extra `authentication.kubernetes.io/
pod-name` and `.../pod-uid`), and the pod must exist with that uid and not have finished.

Address: Katib's SDK (`report_metrics`) sends nothing but the trial name, over an insecure
channel. Without a token the caller is the pod whose IP is the connection's source address:
exactly one pod cluster-wide may hold it while not finished, that pod must be Running and not
on the host network. Why a source address is evidence here:

* it is a TCP connection: the handshake completes only if the answer routes back to that
  address, so a caller cannot use an address it does not receive traffic for;
* CNI plugins drop pod packets whose source is not the pod's own address (anti-spoofing), so
  one pod cannot send as another;
* an address several pods hold (host network: every such pod has the node's address; a
  stand-in node whose pods share one IP) proves nothing and is refused, naming the token as
  the fix; a node's own processes have the node's address, which only host-network pods hold;
* the pod must be Running (a finished pod's address may already be another's) and its chain
  of controller references must reach the Trial's job (`kubetune.trialpods`), and a report
  on a finished Trial is refused anyway (`storing`);
* the NetworkPolicy shipped with db-manager admits only trial-labelled pods and kubetune's
  namespace to the port, so most pods cannot even connect (defence in depth: labels are
  chosen by pod creators).
What this does not cover: traffic that reaches db-manager through a proxy or SNAT (a service
mesh sidecar, a NodePort) arrives from the proxy's address, which is refused; such callers
send the token.

Rules per RPC:
* ReportObservationLog: only a pod of the Trial (its controller chain reaches the Trial's job),
  running as a service account of the Trial's namespace.
* GetObservationLog: whoever may `get` the Trial (SubjectAccessReview for the token's user, or
  for the service account of the pod that holds the address), and the Trial's own pods.
* DeleteObservationLog: whoever may `delete` the Trial (SubjectAccessReview likewise):
  kubetune's controllers and people who could delete the Trial and its history anyway.

Verdicts that allow are kept for `CACHE_SECONDS` (at most `CACHE_ENTRIES`), so a chatty trial
costs one TokenReview and a few reads every few seconds, not per report; requests that arrive
while the same caller's check for the same Trial runs wait for its verdict instead of
repeating it. Denials are never kept. A lookup that fails is UNAVAILABLE (retry), never an
allow.
"""

from __future__ import annotations

import hashlib
import ipaddress
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kubetune import errors, naming
from kubetune.kube import PODS, SUBJECT_ACCESS_REVIEWS, TOKEN_REVIEWS, TRIALS, Kube
from kubetune.trialpods import (
    POD_NAME,
    POD_UID,
    CannotCheck,
    KubeReader,
    Reader,
    meta,
    one_extra,
    trial_of_pod,
)
from kubetune_db_manager.storing import Code, StoreError

Obj = dict[str, Any]

AUDIENCE = naming.DB_MANAGER_AUDIENCE
TOKEN_FILE_ENV = naming.DB_MANAGER_TOKEN_ENV
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
CACHE_SECONDS = 5.0
CACHE_ENTRIES = 4096
CHECK_WAIT_SECONDS = 30.0
"""Longest a request waits for the same caller's check in progress (the API calls' timeout)."""
FINISHED_PHASES = ("Succeeded", "Failed")
FIX = (
    f"send the pod's token from ${TOKEN_FILE_ENV} as metadata `authorization: Bearer <token>` "
    f"(or any token for audience {AUDIENCE}, e.g. `kubectl create token SA --audience "
    f"{AUDIENCE}`, for reads)"
)


@dataclass(frozen=True)
class Caller:
    """What the connection tells: the peer (`ipv4:10.1.2.3:5678`) and the bearer token, if any
    (`authorization` metadata)."""

    peer: str
    authorization: str | None = None

    @classmethod
    def of(cls, peer: str, metadata: Sequence[tuple[str, Any]] | None) -> Caller:
        values = [str(v) for k, v in metadata or () if k.lower() == "authorization"]
        return cls(peer, values[0] if values else None)


@dataclass(frozen=True)
class User:
    """Who the caller is to RBAC, and the pod it runs in when known."""

    username: str
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()
    uid: str = ""
    pod: Obj | None = None


def peer_ip(peer: str) -> str | None:
    """The address of `ipv4:10.1.2.3:5678` or `ipv6:[fd00::1]:5678`; None for anything else
    (a Unix socket, an unparsable peer)."""
    kind, _, rest = peer.partition(":")
    if kind == "ipv4":
        host = rest.rsplit(":", 1)[0]
    elif kind == "ipv6":
        host = rest.rsplit(":", 1)[0].strip("[]")
    else:
        return None
    try:
        return str(ipaddress.ip_address(host.split("%", 1)[0]))
    except ValueError:
        return None


def _service_account_user(pod: Obj) -> User:
    namespace = meta(pod).get("namespace") or ""
    account = (pod.get("spec") or {}).get("serviceAccountName") or "default"
    groups = (
        "system:serviceaccounts",
        f"system:serviceaccounts:{namespace}",
        "system:authenticated",
    )
    return User(f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{account}", groups, pod=pod)


class Authorizer:
    """The checks of the module docstring over the API server, with the short verdict cache."""

    def __init__(
        self,
        kube: Kube,
        reader: Reader | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kube = kube
        self.reader = reader or KubeReader(kube)
        self.clock = clock
        self._allowed: OrderedDict[tuple[str, str, str], float] = OrderedDict()
        self._checking: dict[tuple[str, str, str], threading.Event] = {}
        self._lock = threading.Lock()

    def report(self, caller: Caller, trial: str, find: Callable[[], Obj]) -> None:
        """May `caller` report observations for the Trial named `trial` (`find` reads it, only
        when no recent verdict answers)? Raises StoreError when not."""
        self._check("report", caller, trial, find, self._may_report)

    def read(self, caller: Caller, trial: str, find: Callable[[], Obj]) -> None:
        self._check("get", caller, trial, find, lambda user, t: self._may(user, t, "get"))

    def delete(self, caller: Caller, trial: str, find: Callable[[], Obj]) -> None:
        self._check("delete", caller, trial, find, lambda user, t: self._may(user, t, "delete"))

    def _check(
        self,
        verb: str,
        caller: Caller,
        trial: str,
        find: Callable[[], Obj],
        decide: Callable[[User, Obj], None],
    ) -> None:
        identity = (
            "token:" + hashlib.sha256(caller.authorization.encode()).hexdigest()
            if caller.authorization is not None
            else "peer:" + (peer_ip(caller.peer) or caller.peer)
        )
        key = (verb, identity, trial)
        while True:
            with self._lock:
                until = self._allowed.get(key)
                if until is not None and until > self.clock():
                    return
                self._allowed.pop(key, None)
                checking = self._checking.get(key)
                if checking is None:
                    checking = self._checking[key] = threading.Event()
                    break
            # Another request of this caller for this Trial is being checked: its verdict, if
            # an allow, answers this one too (no stampede of TokenReviews when one expires).
            checking.wait(CHECK_WAIT_SECONDS)
        try:
            user = self._user(caller, trial)  # who, before saying whether the Trial exists
            decide(user, find())
            with self._lock:
                self._allowed[key] = self.clock() + CACHE_SECONDS
                self._allowed.move_to_end(key)
                while len(self._allowed) > CACHE_ENTRIES:
                    self._allowed.popitem(last=False)
        except CannotCheck as e:
            raise StoreError(Code.UNAVAILABLE, f"cannot check the caller: {e}; retry") from e
        finally:
            with self._lock:
                del self._checking[key]
            checking.set()

    # -- who is calling --------------------------------------------------------------------

    def _user(self, caller: Caller, trial: str) -> User:
        if caller.authorization is not None:
            return self._token_user(caller.authorization)
        return self._address_user(caller.peer, trial)

    def _token_user(self, authorization: str) -> User:
        scheme, _, token = authorization.strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise StoreError(
                Code.UNAUTHENTICATED,
                "metadata `authorization` must be `Bearer <token>`: " + FIX,
            )
        review = {
            "apiVersion": TOKEN_REVIEWS.api_version,
            "kind": "TokenReview",
            "spec": {"token": token, "audiences": [AUDIENCE]},
        }
        try:
            status = self.kube.create(TOKEN_REVIEWS, review).get("status") or {}
        except errors.ApiError as e:
            raise StoreError(Code.UNAVAILABLE, f"cannot review the token: {e}; retry") from e
        if not status.get("authenticated") or AUDIENCE not in (status.get("audiences") or []):
            why = status.get("error") or "not accepted"
            raise StoreError(
                Code.UNAUTHENTICATED,
                f"the bearer token is not valid for audience {AUDIENCE} ({why}); " + FIX,
            )
        user = status.get("user") or {}
        extra = user.get("extra") or {}
        pod = None
        pod_name, pod_uid = one_extra(extra, POD_NAME), one_extra(extra, POD_UID)
        username = str(user.get("username") or "")
        if pod_name and pod_uid and username.startswith(SERVICE_ACCOUNT_PREFIX):
            namespace = username[len(SERVICE_ACCOUNT_PREFIX) :].split(":", 1)[0]
            found = self.reader.pod(namespace, pod_name)
            if found is None or meta(found).get("uid") != pod_uid:
                raise StoreError(
                    Code.DENIED,
                    f"the token's pod {namespace}/{pod_name} (uid {pod_uid}) no longer exists",
                )
            if (found.get("status") or {}).get("phase") in FINISHED_PHASES:
                raise StoreError(
                    Code.DENIED,
                    f"the token's pod {namespace}/{pod_name} has finished; a finished pod "
                    "reports nothing",
                )
            pod = found
        return User(
            username,
            tuple(str(g) for g in user.get("groups") or []),
            tuple(
                (str(k), tuple(str(v) for v in vs))
                for k, vs in sorted(extra.items())
                if isinstance(vs, list)
            ),
            str(user.get("uid") or ""),
            pod,
        )

    def _address_user(self, peer: str, trial: str) -> User:
        ip = peer_ip(peer)
        if ip is None:
            raise StoreError(
                Code.UNAUTHENTICATED,
                f"the caller's address ({peer}) is not an IP address of a pod: " + FIX,
            )
        try:
            holders = self.kube.list_all(PODS, None, field_selector=f"status.podIP={ip}")
        except errors.ApiError as e:
            raise StoreError(Code.UNAVAILABLE, f"cannot look up address {ip}: {e}; retry") from e
        live = [
            p
            for p in holders
            if (p.get("status") or {}).get("phase") not in FINISHED_PHASES and ip in _pod_ips(p)
        ]
        if len(live) != 1:
            what = (
                f"address {ip} is shared by {len(live)} pods (host network?)"
                if live
                else f"address {ip} belongs to no running pod"
            )
            raise StoreError(
                Code.UNAUTHENTICATED,
                f"{what}, so it does not prove which pod calls for trial {trial}: " + FIX,
            )
        (pod,) = live
        where = f"{meta(pod).get('namespace')}/{meta(pod).get('name')}"
        if (pod.get("spec") or {}).get("hostNetwork"):
            raise StoreError(
                Code.UNAUTHENTICATED,
                f"address {ip} is the node's (pod {where} uses the host network): " + FIX,
            )
        if (pod.get("status") or {}).get("phase") != "Running":
            raise StoreError(
                Code.UNAUTHENTICATED,
                f"pod {where} holding address {ip} is not Running: " + FIX,
            )
        return _service_account_user(pod)

    # -- what they may do ------------------------------------------------------------------

    def _may_report(self, user: User, trial: Obj) -> None:
        namespace, name = meta(trial).get("namespace") or "", meta(trial).get("name") or ""
        if not user.username.startswith(f"{SERVICE_ACCOUNT_PREFIX}{namespace}:"):
            raise StoreError(
                Code.DENIED,
                f"{user.username or 'the caller'} may not report for trial {namespace}/{name}: "
                "only the trial's own pods report, as a service account of its namespace",
            )
        if user.pod is None:
            raise StoreError(
                Code.DENIED,
                f"the token of {user.username} names no pod (e.g. one from `kubectl create "
                f"token`): only the pods of trial {namespace}/{name} report, with "
                f"${TOKEN_FILE_ENV}",
            )
        self._own_pod(user.pod, trial)

    def _own_pod(self, pod: Obj, trial: Obj) -> None:
        namespace, name = meta(trial).get("namespace") or "", meta(trial).get("name") or ""
        pod_name = meta(pod).get("name")
        if meta(pod).get("namespace") != namespace:
            raise StoreError(
                Code.DENIED,
                f"pod {meta(pod).get('namespace')}/{pod_name} is not in the namespace of "
                f"trial {namespace}/{name} and may not report for it",
            )
        owner = trial_of_pod(pod, namespace, self.reader)
        if owner is None or owner[1] != meta(trial).get("uid"):
            whose = f"of trial {owner[0]}" if owner else "of no trial"
            raise StoreError(
                Code.DENIED,
                f"pod {namespace}/{pod_name} is {whose} (its controller chain does not reach "
                f"the job of trial {name}) and may not report for trial {namespace}/{name}",
            )

    def _may(self, user: User, trial: Obj, verb: str) -> None:
        namespace, name = meta(trial).get("namespace") or "", meta(trial).get("name") or ""
        spec: Obj = {
            "user": user.username,
            "groups": list(user.groups),
            "resourceAttributes": {
                "namespace": namespace,
                "verb": verb,
                "group": TRIALS.group,
                "resource": TRIALS.plural,
                "name": name,
            },
        }
        if user.extra:
            spec["extra"] = {k: list(v) for k, v in user.extra}
        if user.uid:
            spec["uid"] = user.uid
        review = {
            "apiVersion": SUBJECT_ACCESS_REVIEWS.api_version,
            "kind": "SubjectAccessReview",
            "spec": spec,
        }
        try:
            answer = self.kube.create(SUBJECT_ACCESS_REVIEWS, review)
        except errors.ApiError as e:
            raise StoreError(Code.UNAVAILABLE, f"cannot check the caller's rights: {e}") from e
        if (answer.get("status") or {}).get("allowed"):
            return
        if verb == "get" and user.pod is not None:
            self._own_pod(user.pod, trial)  # a trial's pods read their own trial
            return
        raise StoreError(
            Code.DENIED,
            f"{user.username} may not {verb} trial {namespace}/{name} (RBAC: {verb} "
            f"trials.{TRIALS.group} in namespace {namespace})",
        )


def _pod_ips(pod: Obj) -> set[str]:
    status = pod.get("status") or {}
    ips = {str(entry.get("ip")) for entry in status.get("podIPs") or [] if isinstance(entry, dict)}
    if status.get("podIP"):
        ips.add(str(status["podIP"]))
    return ips
