"""One thread per pod: sandbox, volumes, containers, probes, restarts, status, deletion.

Container logs (stdout and stderr, interleaved, plain text) go to
``<state-dir>/pods/<namespace>_<pod>_<uid>/<container>/<restartCount>.log``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import os
import queue
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import IO, Any, Protocol

from .envvars import ConfigError, build_env
from .events import EventRecorder
from .expansion import expand, expand_all, mapping_for
from .images import ImageMap, ImageMapError
from .kube import ApiError, Kube, pod_path
from .names import NameTable, write_in_place
from .probes import ProbeState, run_probe
from .sandbox import ContainerProcess, Sandbox
from .status import ContainerStatus, PodView, compose, compute_phase, now_iso
from .volumes import MountError, Volume, VolumeManager

log = logging.getLogger(__name__)
JSON = dict[str, Any]
VOLUME_REFRESH_SECONDS = 60.0


class AgentContext(Protocol):
    """What a pod worker needs from the agent."""

    kube: Kube
    node_name: str
    node_ip: str
    state_dir: str
    image_map: ImageMap
    service_env: dict[str, str]
    allocatable: dict[str, str]
    backoff_initial: float
    backoff_max: float
    events: EventRecorder
    names: NameTable

    def get_configmap(self, ns: str, name: str) -> JSON | None:
        """A ConfigMap or None."""

    def get_secret(self, ns: str, name: str) -> JSON | None:
        """A Secret or None."""


@dataclass
class Run:
    """A container slot: its spec, its status and its current process."""

    spec: JSON
    status: ContainerStatus
    init: bool
    proc: ContainerProcess | None = None
    log: IO[bytes] | None = None
    env: dict[str, str] = field(default_factory=dict)
    restart_at: float | None = None
    backoff: float = 0.0
    done: bool = False
    start_error_file: str = ""
    probes: dict[str, ProbeState] = field(default_factory=dict)
    ran_since: float = 0.0


class PodWorker(threading.Thread):
    """Runs one pod to completion (or deletion) and reports its status."""

    def __init__(self, ctx: AgentContext, pod: JSON) -> None:
        meta = pod["metadata"]
        super().__init__(name=f"pod-{meta['namespace']}/{meta['name']}", daemon=True)
        self.ctx = ctx
        self.pod = pod
        self.uid: str = meta["uid"]
        self.ns: str = meta["namespace"]
        self.pod_name: str = meta["name"]
        self.events: queue.Queue[tuple[str, Any]] = queue.Queue()
        spec = pod.get("spec") or {}
        self.restart_policy: str = spec.get("restartPolicy") or "Always"
        self.share_pid = bool(spec.get("shareProcessNamespace"))
        has_init = bool(spec.get("initContainers"))
        self.init_runs = [self._new_run(c, True, False) for c in spec.get("initContainers") or []]
        self.app_runs = [self._new_run(c, False, has_init) for c in spec.get("containers") or []]
        self.view = PodView(
            restart_policy=self.restart_policy,
            init=[r.status for r in self.init_runs],
            containers=[r.status for r in self.app_runs],
            pod_ip=ctx.node_ip,
            host_ip=ctx.node_ip,
        )
        self.pod_dir = os.path.join(ctx.state_dir, "pods", f"{self.ns}_{self.pod_name}_{self.uid}")
        self.hosts_file = os.path.join(self.pod_dir, "etc-hosts")
        self.hosts_lock = threading.Lock()
        self.sandbox: Sandbox | None = None
        self.volumes: VolumeManager | None = None
        self.mounted: dict[str, Volume] = {}
        self.setup_retry_at = 0.0
        self.last_refresh = 0.0
        self.started_mono = time.monotonic()
        self.deleting = False
        self.gone = False
        self.stop_now = False
        self.deleted_sent = False
        self.last_sent: JSON | None = None
        self.report_retry_at: float | None = None

    # ---- interface for the agent -------------------------------------------------
    def update(self, pod: JSON) -> None:
        """A newer version of the pod from the watch."""
        self.events.put(("pod", pod))

    def removed(self) -> None:
        """The pod object is gone from the API."""
        self.events.put(("gone", None))

    def shutdown(self) -> None:
        """Agent shutdown: kill everything now, write nothing."""
        self.events.put(("shutdown", None))

    def write_hosts(self) -> None:
        """(Re)write the pod's /etc/hosts from the agent's current names (any thread)."""
        with self.hosts_lock:
            if os.path.isdir(self.pod_dir):
                write_in_place(self.hosts_file, self.ctx.names.render(self.pod, self.ctx.node_ip))

    def container_running(self, name: str) -> bool:
        """A container of this pod has a live process (read from other threads)."""
        return any(r.spec["name"] == name and r.proc is not None for r in self._all_runs())

    # ---- main loop -----------------------------------------------------------------
    def _new_run(self, spec: JSON, init: bool, after_init: bool) -> Run:
        st = ContainerStatus(
            name=spec["name"],
            image=spec.get("image", ""),
            init=init,
            sidecar=init and spec.get("restartPolicy") == "Always",
        )
        st.reason = "PodInitializing" if after_init else "ContainerCreating"
        return Run(spec=spec, status=st, init=init)

    def run(self) -> None:
        """Thread body."""
        try:
            self._loop()
        except Exception:
            log.exception("pod worker %s/%s crashed", self.ns, self.pod_name)
        finally:
            self._kill_all()
            if self.gone and self.volumes is not None:
                self.volumes.cleanup()

    def _loop(self) -> None:
        self.view.start_time = (self.pod.get("status") or {}).get("startTime") or now_iso()
        with contextlib.suppress(ValueError):  # activeDeadlineSeconds counts from startTime
            started = dt.datetime.fromisoformat(self.view.start_time.replace("Z", "+00:00"))
            age = (dt.datetime.now(dt.UTC) - started).total_seconds()
            self.started_mono = time.monotonic() - max(0.0, age)
        self._adopt_previous_status()
        self._apply_pod(self.pod)
        while True:
            if self.stop_now or self.gone:
                return
            if self.deleting and not self.deleted_sent:
                self._terminate_for_deletion()
                continue
            if not self.view.terminal_phase and not self.deleting:
                self._progress()
            self._report()
            self._wait_event(self._next_wakeup())

    def _adopt_previous_status(self) -> None:
        """Continue a pod an earlier agent ran: its processes died with that agent.

        Finished containers keep their result; a container that was running counts as
        lost (137, ContainerStatusUnknown) and then follows the restart policy, so
        restartCount keeps growing across agent restarts as it would under a kubelet.
        """
        status = self.pod.get("status") or {}
        old = {
            s.get("name"): s
            for s in (status.get("initContainerStatuses") or [])
            + (status.get("containerStatuses") or [])
        }
        for run in self._all_runs():
            prev = old.get(run.spec["name"])
            state = (prev or {}).get("state") or {}
            if not prev or not (state.get("running") or state.get("terminated")):
                continue
            st = run.status
            st.restart_count = int(prev.get("restartCount") or 0)
            st.container_id = str(prev.get("containerID") or "")
            st.ever_ran = True
            term = state.get("terminated")
            if term:
                st.started_at = str(term.get("startedAt") or "")
                st.set_terminated(
                    int(term.get("exitCode", 0)),
                    str(term.get("reason") or ""),
                    str(term.get("message") or ""),
                )
                st.finished_at = str(term.get("finishedAt") or st.finished_at)
                run.done = self._finished_for_good(run, st.exit_code)
            else:
                st.started_at = str(state["running"].get("startedAt") or "")
                st.set_terminated(
                    137,
                    "ContainerStatusUnknown",
                    "The container could not be located when the node agent restarted",
                )
                run.done = self._finished_for_good(run, 137)

    def _finished_for_good(self, run: Run, code: int) -> bool:
        policy = self.restart_policy
        if run.status.sidecar:
            return False
        if run.init:
            return code == 0 or policy == "Never"
        return not (policy == "Always" or (policy == "OnFailure" and code != 0))

    def _next_wakeup(self) -> float:
        now = time.monotonic()
        times = [now + 30.0]
        if not self.view.terminal_phase:
            if self.sandbox is None:
                times.append(self.setup_retry_at)
            else:
                times.append(self.last_refresh + VOLUME_REFRESH_SECONDS)
            for r in self.init_runs + self.app_runs:
                if r.restart_at is not None and r.proc is None and not r.done:
                    times.append(r.restart_at)
                if r.proc is not None:
                    times.extend(p.next_at for p in self._scheduled_probes(r))
            ads = (self.pod.get("spec") or {}).get("activeDeadlineSeconds")
            if ads is not None:
                times.append(self.started_mono + float(ads))
        if self.report_retry_at is not None:
            times.append(self.report_retry_at)
        return max(0.0, min(times) - now)

    @staticmethod
    def _scheduled_probes(run: Run) -> list[ProbeState]:
        """The probes `_probe` will run next: the startup probe until it passed, then the
        others (a passed startup probe's past `next_at` would wake the worker at once, for
        ever)."""
        startup = run.probes.get("startup")
        if startup is not None and not run.status.started:
            return [startup]
        return [p for kind, p in run.probes.items() if kind != "startup"]

    def _wait_event(self, timeout: float) -> None:
        try:
            ev = self.events.get(timeout=timeout)
        except queue.Empty:
            return
        self._handle(ev)
        while True:  # drain whatever else is queued before acting
            try:
                ev = self.events.get_nowait()
            except queue.Empty:
                return
            self._handle(ev)

    def _handle(self, ev: tuple[str, Any]) -> None:
        kind, data = ev
        if kind == "pod":
            self._apply_pod(data)
        elif kind == "gone":
            self.gone = True
        elif kind == "shutdown":
            self.stop_now = True
        elif kind == "exit":
            run, proc, code = data
            self._on_exit(run, proc, code)

    def _apply_pod(self, pod: JSON) -> None:
        self.pod = pod
        if (pod.get("metadata") or {}).get("deletionTimestamp"):
            self.deleting = True

    def _event(self, etype: str, reason: str, message: str, run: Run | None = None) -> None:
        name = run.spec["name"] if run else ""
        self.ctx.events.pod_event(self.pod, etype, reason, message, name, bool(run and run.init))

    # ---- starting things -------------------------------------------------------------
    def _all_runs(self) -> list[Run]:
        return self.init_runs + self.app_runs

    def _progress(self) -> None:
        now = time.monotonic()
        if self.sandbox is None:
            if now < self.setup_retry_at or not self._setup():
                return
        elif now - self.last_refresh >= VOLUME_REFRESH_SECONDS and self.volumes is not None:
            self.volumes.refresh()
            self.last_refresh = now
        ads = (self.pod.get("spec") or {}).get("activeDeadlineSeconds")
        if ads is not None and now - self.started_mono >= float(ads):
            self.view.reason = "DeadlineExceeded"
            self.view.message = "Pod was active on the node longer than the specified deadline"
            self._set_terminal("Failed")
            return
        for run in self.init_runs:
            if run.status.sidecar:
                if (
                    run.proc is None
                    and not run.done
                    and (run.restart_at is None or now >= run.restart_at)
                ):
                    self._start(run)
                if not run.status.started and not self.view.was_initialized:
                    break  # the next init container waits until this sidecar started
                continue
            if run.status.state == "terminated" and run.status.exit_code == 0 and run.done:
                continue
            if run.proc is not None:
                break
            if run.done:  # failed for good
                break
            if run.restart_at is None or now >= run.restart_at:
                self._start(run)
            break
        else:
            for run in self.app_runs:
                if (
                    run.proc is None
                    and not run.done
                    and (run.restart_at is None or now >= run.restart_at)
                ):
                    self._start(run)
        self._probe(now)
        phase = compute_phase(self.view)
        if phase in ("Succeeded", "Failed"):
            self._set_terminal(phase)

    def _set_terminal(self, phase: str) -> None:
        self.view.terminal_phase = phase
        # Sidecars still run when the main containers are done: stop them gracefully.
        grace = (self.pod.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
        sidecars = any(r.status.sidecar and r.proc is not None for r in self.init_runs)
        self._stop_containers(grace=float(grace) if sidecars else 0)

    def _setup(self) -> bool:
        os.makedirs(self.pod_dir, exist_ok=True)
        self.write_hosts()
        try:
            if self.volumes is None:
                self.volumes = VolumeManager(
                    self.ctx.kube,
                    self.ctx.state_dir,
                    self.pod,
                    self.ctx.node_ip,
                    self.ctx.node_ip,
                    self.ctx.allocatable,
                    self.ctx.get_configmap,
                    self.ctx.get_secret,
                )
            self.mounted = self.volumes.setup()
        except (MountError, ApiError, OSError) as exc:
            msg = f"MountVolume.SetUp failed: {exc}"
            log.info("pod %s/%s: %s", self.ns, self.pod_name, msg)
            if self.setup_retry_at == 0.0:
                self._event("Warning", "FailedMount", msg)
            for r in self._all_runs():
                if r.status.state == "waiting" and not r.status.ever_ran:
                    r.status.message = msg
            self.setup_retry_at = time.monotonic() + 2.0
            return False
        self.last_refresh = time.monotonic()
        sb_dir = os.path.join(self.ctx.state_dir, "sandboxes")
        os.makedirs(sb_dir, exist_ok=True)
        self.sandbox = Sandbox.create(os.path.join(sb_dir, f"{self.uid}.json"))
        self.view.sandbox_ready = True
        for r in self._all_runs():
            r.status.message = ""
        return True

    def _container_env(self, run: Run) -> tuple[dict[str, str], dict[str, str]]:
        """(declared env + service env for expansion, full process env)."""
        declared = build_env(
            self.pod,
            run.spec,
            self.ctx.service_env,
            self.ctx.get_configmap,
            self.ctx.get_secret,
            self.ctx.node_ip,
            self.ctx.node_ip,
            self.ctx.allocatable,
        )
        expansion_env = dict(self.ctx.service_env)
        expansion_env.update(declared)
        full = self.ctx.image_map.base_env(run.spec.get("image", ""))
        full["HOSTNAME"] = self.pod_name
        full.setdefault("HOME", "/root")
        full.update(expansion_env)
        return expansion_env, full

    def _mounts(self, run: Run, env: dict[str, str]) -> list[JSON]:
        mounts: list[JSON] = []
        for vm in run.spec.get("volumeMounts") or []:
            vol = self.mounted.get(vm["name"])
            if vol is None:
                raise ConfigError(f'cannot find volume "{vm["name"]}" to mount')
            source = vol.path
            sub = vm.get("subPath") or ""
            if vm.get("subPathExpr"):
                sub = expand(vm["subPathExpr"], mapping_for(env))
            if sub:
                if sub.startswith("/") or ".." in sub.split("/"):
                    raise ConfigError(f"invalid subPath {sub!r}")
                source = os.path.join(source, sub)
                if not os.path.exists(source):
                    os.makedirs(source, exist_ok=True)
            mounts.append(
                {
                    "source": source,
                    "target": vm["mountPath"],
                    "readOnly": bool(vm.get("readOnly")) or vol.read_only,
                    "file": os.path.isfile(source),
                }
            )
        if not any(os.path.normpath(str(m["target"])) == "/etc/hosts" for m in mounts):
            # The kubelet's per-pod hosts file, here also the cluster's names (names.py).
            mounts.append({"source": self.hosts_file, "target": "/etc/hosts", "file": True})
        mounts.sort(key=lambda m: str(m["target"]).rstrip("/").count("/"))
        return mounts

    def _security(self, run: Run) -> tuple[int | None, int | None]:
        psc = (self.pod.get("spec") or {}).get("securityContext") or {}
        csc = run.spec.get("securityContext") or {}
        uid = csc.get("runAsUser", psc.get("runAsUser"))
        gid = csc.get("runAsGroup", psc.get("runAsGroup"))
        return uid, gid

    def _start(self, run: Run) -> None:
        st = run.status
        now = time.monotonic()
        if st.ever_ran:
            if st.state == "terminated":
                st.last_terminated = st.terminated_dict()
            st.restart_count += 1
        try:
            exp_env, full_env = self._container_env(run)
            command = expand_all(run.spec.get("command"), exp_env)
            args = expand_all(run.spec.get("args"), exp_env)
            argv = self.ctx.image_map.argv(run.spec.get("image", ""), command, args)
            mounts = self._mounts(run, exp_env)
        except ImageMapError as exc:
            if st.reason != "ErrImagePull":
                self._event("Warning", "Failed", f"Error: ErrImagePull: {exc}", run)
            st.set_waiting("ErrImagePull", str(exc))
            run.restart_at = now + 10.0
            return
        except (ConfigError, ApiError, OSError, ValueError) as exc:
            if st.reason != "CreateContainerConfigError":
                self._event("Warning", "Failed", f"Error: {exc}", run)
            st.set_waiting("CreateContainerConfigError", str(exc))
            run.restart_at = now + 2.0
            return
        cdir = os.path.join(self.pod_dir, run.spec["name"])
        os.makedirs(cdir, exist_ok=True)
        n = st.restart_count
        run.start_error_file = os.path.join(cdir, f"{n}.start-error")
        uid, gid = self._security(run)
        spec = {
            "argv": argv,
            "env": full_env,
            "mounts": mounts,
            "workingDir": run.spec.get("workingDir") or "",
            "uid": uid,
            "gid": gid,
            "startError": run.start_error_file,
        }
        logf = open(os.path.join(cdir, f"{n}.log"), "ab")  # noqa: SIM115 - closed on exit
        assert self.sandbox is not None
        try:
            proc = ContainerProcess(
                self.sandbox, self.share_pid, spec, os.path.join(cdir, f"{n}.spec.json"), logf
            )
        except OSError as exc:
            logf.close()
            st.set_waiting("RunContainerError", str(exc))
            run.restart_at = now + 2.0
            return
        run.proc, run.log, run.env = proc, logf, full_env
        run.restart_at = None
        run.ran_since = now
        st.set_running(proc.id)
        run.probes = {}
        for kind in ("startup", "readiness", "liveness"):
            probe = run.spec.get(f"{kind}Probe")
            if probe:
                run.probes[kind] = ProbeState(probe, kind)
        st.started = "startup" not in run.probes
        st.ready = st.started and "readiness" not in run.probes and (not run.init or st.sidecar)
        threading.Thread(
            target=lambda: self.events.put(("exit", (run, proc, proc.wait()))),
            name=f"wait-{self.pod_name}-{run.spec['name']}",
            daemon=True,
        ).start()
        log.info("pod %s/%s: started %s %s", self.ns, self.pod_name, run.spec["name"], argv)
        self._event("Normal", "Started", f"Started container {run.spec['name']}", run)

    # ---- exits, restarts, probes -----------------------------------------------------------
    def _on_exit(self, run: Run, proc: ContainerProcess, code: int) -> None:
        if run.proc is not proc:
            return
        run.proc = None
        if run.log is not None:
            run.log.close()
            run.log = None
        st = run.status
        reason, message = "", ""
        if code == 128 and os.path.exists(run.start_error_file):
            with open(run.start_error_file, encoding="utf-8") as fh:
                message = fh.read()
            reason = "StartError"
        elif code != 0 and run.spec.get("terminationMessagePolicy") == "FallbackToLogsOnError":
            message = self._log_tail(run)
        st.set_terminated(code, reason, message)
        log.info("pod %s/%s: %s exited %d", self.ns, self.pod_name, run.spec["name"], code)
        if self.deleting or self.view.terminal_phase or self.stop_now:
            run.done = True
            return
        if self._finished_for_good(run, code):
            run.done = True
            return
        now = time.monotonic()
        if now - run.ran_since > 600:
            run.backoff = 0.0
        delay = run.backoff
        run.backoff = min(self.ctx.backoff_max, max(self.ctx.backoff_initial, run.backoff * 2))
        run.restart_at = now + delay
        if delay > 0:
            self._event(
                "Warning",
                "BackOff",
                "Back-off restarting failed container "
                f"{run.spec['name']} in pod {self.pod_name}_{self.ns}({self.uid})",
                run,
            )
            st.set_waiting(
                "CrashLoopBackOff",
                f"back-off {int(delay)}s restarting failed container={run.spec['name']} "
                f"pod={self.pod_name}_{self.ns}({self.uid})",
            )

    def _log_tail(self, run: Run) -> str:
        path = os.path.join(self.pod_dir, run.spec["name"], f"{run.status.restart_count}.log")
        try:
            with open(path, "rb") as fh:
                fh.seek(0, os.SEEK_END)
                fh.seek(max(0, fh.tell() - 2048))
                lines = fh.read().decode(errors="replace").splitlines()[-80:]
                return "\n".join(lines)
        except OSError:
            return ""

    @staticmethod
    def _entering(run: Run, cmd: list[str]) -> list[str] | None:
        """argv that runs cmd inside the container's namespaces and root, with its env."""
        proc = run.proc
        pid = proc.main_pid() if proc else None
        if pid is None or not cmd:
            return None
        return ["nsenter", "-t", str(pid), "--pid", "--mount", "--root", "--wd", "--", *cmd]

    def start_exec(self, container: str, cmd: list[str]) -> subprocess.Popen[bytes] | None:
        """``kubectl exec``: the command started in a running container, output piped."""
        for run in self._all_runs():
            if run.spec["name"] == container and (argv := self._entering(run, cmd)):
                return subprocess.Popen(
                    argv,
                    env=run.env,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                )
        return None

    def _exec_in(self, run: Run) -> Any:
        def runner(cmd: list[str], timeout: float) -> int:
            argv = self._entering(run, cmd)
            if argv is None:
                return 1
            res = subprocess.run(
                argv,
                env=run.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=timeout,
                check=False,
            )
            return res.returncode

        return runner

    def _probe(self, now: float) -> None:
        for run in self._all_runs():
            if run.proc is None or not run.probes:
                continue
            st = run.status
            startup = run.probes.get("startup")
            if startup is not None and not st.started:
                if startup.due(now):
                    ok = startup.record(run_probe(startup.probe, run.spec, self._exec_in(run)), now)
                    if ok:
                        st.started = True
                        st.ready = "readiness" not in run.probes and (not run.init or st.sidecar)
                    elif startup.failed_out():
                        self._kill_for_restart(run, "startup")
                continue
            ready = run.probes.get("readiness")
            if ready is not None and ready.due(now):
                st.ready = ready.record(run_probe(ready.probe, run.spec, self._exec_in(run)), now)
            live = run.probes.get("liveness")
            if live is not None and live.due(now):
                live.record(run_probe(live.probe, run.spec, self._exec_in(run)), now)
                if live.failed_out():
                    self._kill_for_restart(run, "liveness")

    def _kill_for_restart(self, run: Run, kind: str) -> None:
        log.info(
            "pod %s/%s: %s probe failed for %s, killing",
            self.ns,
            self.pod_name,
            kind,
            run.spec["name"],
        )
        run.probes = {}
        self._event(
            "Normal",
            "Killing",
            f"Container {run.spec['name']} failed {kind} probe, will be restarted",
            run,
        )
        if run.proc is not None:
            run.proc.signal(signal.SIGKILL)

    # ---- stopping ----------------------------------------------------------------------------
    def _stop_containers(self, grace: float) -> None:
        """SIGTERM running containers, wait up to grace, then kill the sandbox."""
        running = [r for r in self._all_runs() if r.proc is not None]
        for r in running:
            self._event("Normal", "Killing", f"Stopping container {r.spec['name']}", r)
            r.restart_at = None
            assert r.proc is not None
            r.proc.signal(signal.SIGTERM if grace > 0 else signal.SIGKILL)
        deadline = time.monotonic() + grace
        while any(r.proc is not None for r in running) and not (self.stop_now or self.gone):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self._wait_event(left)
            new_grace = (self.pod.get("metadata") or {}).get("deletionGracePeriodSeconds")
            if new_grace is not None and new_grace == 0:
                break
        self._kill_sandbox()
        end = time.monotonic() + 5
        while any(r.proc is not None for r in running) and time.monotonic() < end:
            self._wait_event(0.1)
        for r in self._all_runs():
            r.done = True
            if r.proc is not None:  # never reported back: count it as killed
                r.proc = None
                r.status.set_terminated(137)

    def _kill_sandbox(self) -> None:
        if self.sandbox is not None:
            self.sandbox.kill()
            self.view.sandbox_ready = False
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(self.ctx.state_dir, "sandboxes", f"{self.uid}.json"))

    def _kill_all(self) -> None:
        for r in self._all_runs():
            if r.proc is not None:
                r.proc.signal(signal.SIGKILL)
        self._kill_sandbox()
        for r in self._all_runs():
            if r.proc is not None:
                try:
                    r.proc.popen.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    r.proc.popen.kill()
            if r.log is not None:
                r.log.close()
                r.log = None

    def _terminate_for_deletion(self) -> None:
        meta = self.pod.get("metadata") or {}
        grace = meta.get("deletionGracePeriodSeconds")
        if grace is None:
            grace = (self.pod.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
        if not self.view.terminal_phase:
            self._stop_containers(float(grace))
            if self.stop_now or self.gone:
                return
            ok = all(
                r.status.state == "terminated" and r.status.exit_code == 0 for r in self.app_runs
            )
            self.view.terminal_phase = "Succeeded" if ok else "Failed"
            for r in self._all_runs():
                if r.status.state == "waiting" and not r.status.ever_ran:
                    r.status.reason = r.status.reason or "ContainerCreating"
        self._report()
        try:
            self.ctx.kube.delete(
                pod_path(self.ns, self.pod_name),
                {
                    "apiVersion": "v1",
                    "kind": "DeleteOptions",
                    "gracePeriodSeconds": 0,
                    "preconditions": {"uid": self.uid},
                },
            )
        except ApiError as exc:
            if exc.status not in (404, 409):
                log.warning("pod %s/%s: final delete failed: %s", self.ns, self.pod_name, exc)
                self.report_retry_at = time.monotonic() + 1
                self._wait_event(1.0)
                return
        self.deleted_sent = True

    # ---- status --------------------------------------------------------------------------------
    def _report(self) -> None:
        status = compose(self.view)
        if status == self.last_sent:
            self.report_retry_at = None
            return
        try:
            self.ctx.kube.patch(pod_path(self.ns, self.pod_name, "status"), {"status": status})
        except ApiError as exc:
            if exc.status == 404:
                self.gone = True
                return
            log.warning("pod %s/%s: status patch failed: %s", self.ns, self.pod_name, exc)
            self.report_retry_at = time.monotonic() + 1.0
            return
        except Exception as exc:  # noqa: BLE001 - connection errors: try again soon
            log.warning("pod %s/%s: status patch failed: %s", self.ns, self.pod_name, exc)
            self.report_retry_at = time.monotonic() + 1.0
            return
        self.report_retry_at = None
        self.last_sent = status
