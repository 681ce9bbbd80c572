"""Pod status composition: the kubelet's view of containers turned into ``pod.status``.

Kept free of I/O so the rules (phase, conditions, container states) are testable with
real processes but without an API server. The result is sent as a strategic merge patch,
so container states carry explicit nulls for the states they are not in.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

JSON = dict[str, Any]


def now_iso() -> str:
    """RFC 3339 time, second precision, as Kubernetes serialises metav1.Time."""
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class ContainerStatus:
    """What the agent knows about one container."""

    name: str
    image: str
    init: bool = False
    sidecar: bool = False  # an init container with restartPolicy Always
    state: str = "waiting"  # waiting | running | terminated
    reason: str = "ContainerCreating"
    message: str = ""
    started_at: str = ""
    finished_at: str = ""
    exit_code: int = 0
    signal: int = 0
    container_id: str = ""
    restart_count: int = 0
    last_terminated: JSON | None = None
    ready: bool = False
    started: bool = False
    ever_ran: bool = False

    def set_running(self, container_id: str) -> None:
        """The process started."""
        self.state, self.reason, self.message = "running", "", ""
        self.started_at, self.finished_at = now_iso(), ""
        self.container_id = container_id
        self.ever_ran = True

    def set_terminated(self, exit_code: int, reason: str = "", message: str = "") -> None:
        """The process ended with an exit code (128+n for signal n)."""
        self.state = "terminated"
        self.exit_code = exit_code
        self.reason = reason or ("Completed" if exit_code == 0 else "Error")
        self.message = message
        self.finished_at = now_iso()
        self.started_at = self.started_at or self.finished_at
        # as the kubelet shows a finished (non-sidecar) init container
        self.ready = self.init and not self.sidecar and exit_code == 0
        self.started = False
        self.ever_ran = True

    def set_waiting(self, reason: str, message: str = "") -> None:
        """Waiting (creating, config error, back-off); keeps the last termination."""
        if self.state == "terminated":
            self.last_terminated = self.terminated_dict()
        self.state, self.reason, self.message = "waiting", reason, message
        self.ready = False
        self.started = False

    def terminated_dict(self) -> JSON:
        """The ``terminated`` state object."""
        d: JSON = {
            "exitCode": self.exit_code,
            "reason": self.reason,
            "startedAt": self.started_at,
            "finishedAt": self.finished_at,
        }
        if self.signal:
            d["signal"] = self.signal
        if self.message:
            d["message"] = self.message
        if self.container_id:
            d["containerID"] = self.container_id
        return d

    def to_dict(self) -> JSON:
        """The containerStatuses entry, with nulls so stale states are cleared."""
        state: JSON = {"waiting": None, "running": None, "terminated": None}
        if self.state == "waiting":
            w: JSON = {"reason": self.reason}
            if self.message:
                w["message"] = self.message
            state["waiting"] = w
        elif self.state == "running":
            state["running"] = {"startedAt": self.started_at}
        else:
            state["terminated"] = self.terminated_dict()
        last: JSON = {"waiting": None, "running": None, "terminated": None}
        if self.last_terminated:
            last["terminated"] = self.last_terminated
        return {
            "name": self.name,
            "image": self.image,
            "imageID": "",
            "containerID": self.container_id or None,
            "state": state,
            "lastState": last,
            "ready": self.ready,
            "started": self.started,
            "restartCount": self.restart_count,
        }


@dataclass
class PodView:
    """Everything pod-level the status depends on."""

    restart_policy: str
    init: list[ContainerStatus]
    containers: list[ContainerStatus]
    sandbox_ready: bool = False
    terminal_phase: str = ""  # set once the pod is Succeeded/Failed; never changes after
    reason: str = ""
    message: str = ""
    start_time: str = ""
    pod_ip: str = ""
    host_ip: str = ""
    transitions: dict[str, tuple[str, str]] = field(default_factory=dict)
    was_initialized: bool = False


def initialized(view: PodView) -> bool:
    """All init containers succeeded (sidecars: started); once true it stays true."""
    if not view.was_initialized:
        view.was_initialized = all(
            (c.sidecar and c.started) or (c.state == "terminated" and c.exit_code == 0)
            for c in view.init
        )
    return view.was_initialized


def compute_phase(view: PodView) -> str:
    """Pending, Running, Succeeded or Failed, following the kubelet's rules."""
    if view.terminal_phase:
        return view.terminal_phase
    for c in view.init:
        if (
            not c.sidecar
            and c.state == "terminated"
            and c.exit_code != 0
            and view.restart_policy == "Never"
        ):
            return "Failed"
    if not initialized(view):
        return "Pending"
    waiting = running = stopped = succeeded = 0
    for c in view.containers:
        if c.state == "running":
            running += 1
        elif c.state == "terminated":
            stopped += 1
            succeeded += c.exit_code == 0
        elif c.last_terminated is not None:
            stopped += 1  # restarting after a crash
        else:
            waiting += 1
    if waiting:
        return "Pending"
    if running:
        return "Running"
    if view.restart_policy == "Always":
        return "Running"
    if stopped == succeeded:
        return "Succeeded"
    if view.restart_policy == "Never":
        return "Failed"
    return "Running"


def _condition(view: PodView, ctype: str, ok: bool, reason: str = "") -> JSON:
    status = "True" if ok else "False"
    prev = view.transitions.get(ctype)
    if prev is None or prev[0] != status:
        view.transitions[ctype] = (status, now_iso())
    cond: JSON = {
        "type": ctype,
        "status": status,
        "lastProbeTime": None,
        "lastTransitionTime": view.transitions[ctype][1],
    }
    if not ok and reason:
        cond["reason"] = reason
        cond["message"] = None
    else:
        cond["reason"] = None
        cond["message"] = None
    return cond


def compose(view: PodView) -> JSON:
    """The full ``status`` for a strategic merge patch."""
    phase = compute_phase(view)
    init_ok = initialized(view)
    terminal = phase in ("Succeeded", "Failed")
    sidecars = [c for c in view.init if c.sidecar]
    ready = (
        init_ok
        and not terminal
        and all(c.ready for c in view.containers + sidecars)
        and bool(view.containers)
    )
    not_ready = [c.name for c in sidecars + view.containers if not c.ready]
    conditions = [
        _condition(view, "PodReadyToStartContainers", view.sandbox_ready and not terminal),
        _condition(
            view,
            "Initialized",
            init_ok or (terminal and not view.init),
            "ContainersNotInitialized",
        ),
        _condition(
            view, "ContainersReady", ready, "PodCompleted" if terminal else "ContainersNotReady"
        ),
        _condition(view, "Ready", ready, "PodCompleted" if terminal else "ContainersNotReady"),
    ]
    if not ready and not terminal and not_ready:
        msg = f"containers with unready status: [{' '.join(not_ready)}]"
        conditions[2]["message"] = msg
        conditions[3]["message"] = msg
    if not init_ok and not terminal:
        pending = [
            c.name
            for c in view.init
            if not ((c.sidecar and c.started) or (c.state == "terminated" and c.exit_code == 0))
        ]
        conditions[1]["message"] = f"containers with incomplete status: [{' '.join(pending)}]"
    status: JSON = {
        "phase": phase,
        "conditions": conditions,
        "containerStatuses": [c.to_dict() for c in view.containers],
        "reason": view.reason or None,
        "message": view.message or None,
    }
    if view.init:
        status["initContainerStatuses"] = [c.to_dict() for c in view.init]
    if view.start_time:
        status["startTime"] = view.start_time
    if view.host_ip:
        status["hostIP"] = view.host_ip
        status["hostIPs"] = [{"ip": view.host_ip}]
    if view.pod_ip:
        status["podIP"] = view.pod_ip
        status["podIPs"] = [{"ip": view.pod_ip}]
    return status
