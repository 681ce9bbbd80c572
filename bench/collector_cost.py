"""Where the pns-collector's CPU goes, per trial, run as a trial pod runs it.

Each trial here is what the node agent runs in a pod: the training command wrapped by
`kubetune.wrapperscript.wrap_argv` (StdOut: teed into the metrics file) and, at the same
time, the collector with the webhook's flags, in-cluster: its own mount namespace with the
ServiceAccount's token, CA and namespace at /var/run/secrets/kubernetes.io/serviceaccount
(a tmpfs over /run, so nothing is written on the host), `KUBERNETES_SERVICE_HOST`/`_PORT`
set, and a token of a ServiceAccount bound to the collector's ClusterRole rules. The Trial is
real (kubetune's CRDs on a local control plane); the collector patches its status.

Two kinds of run, each `--runs` times:

* `command`: the collector exactly as the pod starts it (`--command`, default the sidecar
  image's entrypoint from this interpreter's bin directory). Its CPU-s (user + system, from
  `os.wait4` of the exited process, children included) is the per-trial figure.
* `phases`: the same collector under a harness that times its parts: interpreter start (the
  CPU the process had used when the harness's first line ran), imports, setup (flags,
  logging, the client), the wait (the thread that waits for the training processes), the
  watch loop, reading the log, echoing it to the sidecar's own log, parsing, the running
  summary, the status writes (interim and final) and the rest; the harness's own cost is in
  `other`.

    python bench/collector_cost.py [--runs 10] [--seconds 1] [--kubeconfig K]
    python bench/collector_cost.py --instructions [--runs 3] [--seconds 8] [--command C]

`--instructions` runs only the `command` kind under valgrind's callgrind and prints the
instructions the collector executed (its threads included): a figure that CPU-s on a loaded
machine are not. Each variant of the collector compared at the same `--seconds`. To run it as the
image does, `--command` a script `#!<python> -ISu` that puts the site-packages directory and its
`.zip` (`images/assemble.py zip_pure_packages`) on `sys.path` and calls
`kubetune_pns_collector.main.run()`, the image's entrypoint; `--bare` runs it as the local
overlay's image map does (the same flags, this venv's packages and editable sources on
`sys.path`).

Without `--kubeconfig` it starts a local control plane (no node agent) and stops it after.
Needs root (mount namespaces). Prints medians per phase; no asserts.
"""

from __future__ import annotations

import argparse
import base64
import ctypes
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import uuid
from pathlib import Path
from typing import Any

import yaml

from kubetune import wrapperscript
from kubetune.kube import NAMESPACES, ROLE_BINDINGS, ROLES, SERVICE_ACCOUNTS, TRIALS, Kube, connect
from kubetune_testkit.deploying import collector_start

TRAINING = (
    "import os, sys, time\n"
    "ready = os.environ.get('BENCH_WAIT_FOR_LOG')\n"  # --instructions: start once the collector
    "while ready and b'collecting ' not in open(ready, 'rb').read():\n"  # waits (valgrind is
    "    time.sleep(0.05)\n"  # slow), so the run is the one a pod sees: streamed while it trains
    "print(f't_start={time.time():.6f}', flush=True)\n"
    "time.sleep(float(sys.argv[1]))\n"
    "print('loss=0.25', flush=True)\n"
    "print(f't_end={time.time():.6f}', flush=True)\n"
)
ACCOUNT = "bench-trial"
CALLGRIND = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"]
CLONE_NEWNS = 0x00020000
MS_REC, MS_PRIVATE = 16384, 1 << 18

# The harness: the collector's `main`, with its parts timed (thread CPU time, so the waiter
# thread's share is its own). At the end it writes a JSON line of phase -> CPU-s to the pipe
# `BENCH_PHASES_FD`.
HARNESS = r"""
import time
_c0 = time.process_time()
import json, os, sys, threading
from collections import defaultdict
acc = defaultdict(float)
_c1 = time.process_time()
from kubetune_pns_collector import collecting, main, parsing, reporting, summaries, tailing
acc["imports"] = time.process_time() - _c1
acc["interpreter start"] = _c0

def timed(name, fn):
    def wrapper(*a, **k):
        t = time.thread_time()
        try:
            return fn(*a, **k)
        finally:
            acc[name] += time.thread_time() - t
    return wrapper

def timed_gen(name, fn):
    def wrapper(*a, **k):
        it = fn(*a, **k)
        while True:
            t = time.thread_time()
            try:
                item = next(it)
            except StopIteration:
                acc[name] += time.thread_time() - t
                return
            acc[name] += time.thread_time() - t
            yield item
    return wrapper

started = {}
_run = collecting.Collector.run
def run(self):
    acc["setup (flags, logging, client)"] = time.process_time() - _c1 - acc["imports"]
    return _run(self)
collecting.Collector.run = run
collecting.Collector._wait = timed("wait (waiter thread)", collecting.Collector._wait)
collecting.Collector._watch = timed("watch loop (all)", collecting.Collector._watch)
collecting.Collector._finish = timed("finish (all)", collecting.Collector._finish)
collecting.TextSource.read = timed_gen("log source (all)", collecting.TextSource.read)
tailing.FileTail.read = timed_gen("read log", tailing.FileTail.read)
parsing.TextParser.parse_runs = timed("parse", parsing.TextParser.parse_runs)
summaries.RunningSummary.add_runs = timed("summary", summaries.RunningSummary.add_runs)
reporting.Reporter._patch = timed("status writes", reporting.Reporter._patch)
code = main.main(sys.argv[1:])
acc["process_time"] = time.process_time()
os.write(int(os.environ["BENCH_PHASES_FD"]), (json.dumps(acc) + "\n").encode())
sys.stdout.flush()
os._exit(code)
"""


def _mount_namespace_with(files: dict[str, bytes]) -> Any:
    """A preexec function: a private mount namespace whose /run is a tmpfs holding `files`
    (paths under /run), so the collector finds the ServiceAccount files where a pod has them."""

    def setup() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.unshare(CLONE_NEWNS) != 0:
            raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS) (needs root)")
        if libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0:
            raise OSError(ctypes.get_errno(), "mount --make-rprivate /")
        if libc.mount(b"tmpfs", b"/run", b"tmpfs", 0, None) != 0:
            raise OSError(ctypes.get_errno(), "mount tmpfs /run")
        for path, data in files.items():
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as fh:
                fh.write(data)

    return setup


def _cluster_ca_and_server(kubeconfig: str) -> tuple[bytes, str]:
    config = yaml.safe_load(Path(kubeconfig).read_text())
    cluster = config["clusters"][0]["cluster"]
    if "certificate-authority-data" in cluster:
        ca = base64.b64decode(cluster["certificate-authority-data"])
    else:
        ca = Path(cluster["certificate-authority"]).read_bytes()
    return ca, str(cluster["server"])


def prepare(kube: Kube, namespace: str) -> str:
    """The namespace, a ServiceAccount with the collector's rights; its token."""
    kube.create(
        NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    )
    kube.create(
        SERVICE_ACCOUNTS,
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": ACCOUNT}},
        namespace,
    )
    rbac = "rbac.authorization.k8s.io/v1"
    kube.create(
        ROLES,
        {
            "apiVersion": rbac,
            "kind": "Role",
            "metadata": {"name": ACCOUNT},
            "rules": [
                {
                    "apiGroups": ["kubeflow.org"],
                    "resources": ["trials/status"],
                    "verbs": ["get", "patch"],
                }
            ],
        },
        namespace,
    )
    kube.create(
        ROLE_BINDINGS,
        {
            "apiVersion": rbac,
            "kind": "RoleBinding",
            "metadata": {"name": ACCOUNT},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": ACCOUNT},
            "subjects": [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": namespace}],
        },
        namespace,
    )
    answer = kube.request(
        "POST",
        SERVICE_ACCOUNTS.path(namespace, ACCOUNT, "token"),
        body={
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 3600},
        },
    )
    return str(answer["status"]["token"])


def trial(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1beta1",
        "kind": "Trial",
        "metadata": {"name": name},
        "spec": {
            "objective": {
                "type": "minimize",
                "objectiveMetricName": "loss",
                "additionalMetricNames": ["t_start", "t_end"],
            }
        },
    }


def collector_flags(trial_name: str, namespace: str, log_dir: Path) -> list[str]:
    """The flags the webhook gives the sidecar for a StdOut trial (its log dir moved)."""
    return [
        "--trial-name", trial_name, "--namespace", namespace,
        "--objective-metric", "loss", "--objective-type", "minimize",
        "--additional-metrics", "t_start;t_end",
        "--collector-kind", "StdOut", "--metrics-path", str(log_dir / "metrics.log"),
        "--format", "TEXT", "--log-dir", str(log_dir), "--expected-processes", "1",
    ]  # fmt: skip


def one_trial(
    kube: Kube,
    namespace: str,
    env: dict[str, str],
    files: dict[str, bytes],
    command: list[str],
    seconds: float,
    phases: bool,
) -> dict[str, float]:
    """Run one trial (training + collector at once); the collector's CPU-s (and phases)."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    kube.create(TRIALS, trial(name), namespace)
    with tempfile.TemporaryDirectory(prefix="bench-collector-") as tmp:
        log_dir = Path(tmp)
        script = log_dir.parent / f"{name}.train.py"  # a file: the wrapper joins argv into one
        script.write_text(TRAINING)  # shell line, as Katib does, where code would not survive
        training = wrapperscript.wrap_argv(
            [sys.executable, str(script), str(seconds)],
            str(log_dir),
            metrics_file=str(log_dir / "metrics.log"),
        )
        flags = collector_flags(name, namespace, log_dir)
        read_fd, write_fd = os.pipe()
        argv = [sys.executable, "-c", HARNESS, *flags] if phases else [*command, *flags]
        sidecar_log = open(log_dir.parent / f"{name}.sidecar.log", "wb")  # noqa: SIM115
        try:
            collector = subprocess.Popen(
                argv,
                env={**env, "BENCH_PHASES_FD": str(write_fd)},
                stdin=subprocess.DEVNULL,
                stdout=sidecar_log,
                stderr=subprocess.STDOUT,
                preexec_fn=_mount_namespace_with(files),
                pass_fds=(write_fd,) if phases else (),
                close_fds=True,
            )
            ready = {"BENCH_WAIT_FOR_LOG": sidecar_log.name} if command[0] == "valgrind" else {}
            main = subprocess.Popen(
                training,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.STDOUT,
                env={**os.environ, **ready},
            )
            main.wait()
            _, status, usage = os.wait4(collector.pid, 0)
            collector.returncode = os.waitstatus_to_exitcode(status)
        finally:
            sidecar_log.close()
            os.close(write_fd)
        result = {"total": usage.ru_utime + usage.ru_stime}
        with os.fdopen(read_fd, "rb") as fh:
            data = fh.read()
        log_text = (log_dir.parent / f"{name}.sidecar.log").read_text(errors="replace")
        (log_dir.parent / f"{name}.sidecar.log").unlink()
        script.unlink()
        if collector.returncode != 0:
            raise SystemExit(f"collector exited {collector.returncode}:\n{log_text}")
        counted = re.search(r"==\d+== Collected : (\d+)", log_text)
        if counted:  # run under callgrind (`--instructions`)
            result["instructions"] = float(counted.group(1))
        if phases:
            result.update(json.loads(data))
    observed = kube.get(TRIALS, name, namespace).get("status", {}).get("observation")
    if not observed:
        raise SystemExit(f"trial {name}: no observation written; sidecar log:\n{log_text}")
    return result


def measure(kubeconfig: str, args: argparse.Namespace) -> None:
    kube = Kube(connect(kubeconfig))
    from kubetune_testkit.crds import install_kubetune_crds

    install_kubetune_crds(kube)
    namespace = f"bench-collector-{uuid.uuid4().hex[:6]}"
    token = prepare(kube, namespace)
    ca, server = _cluster_ca_and_server(kubeconfig)
    url = urllib.parse.urlsplit(server)
    sa = "/run/secrets/kubernetes.io/serviceaccount"
    files = {
        f"{sa}/token": token.encode(),
        f"{sa}/ca.crt": ca,
        f"{sa}/namespace": namespace.encode(),
    }
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONUNBUFFERED": "1",  # as the node agent's image map (and the image) set it
        "KUBERNETES_SERVICE_HOST": url.hostname or "127.0.0.1",
        "KUBERNETES_SERVICE_PORT": str(url.port or 443),
        "HOME": "/nonexistent",
    }
    if os.environ.get("PYTHONPATH"):  # a checkout's sources over the installed ones
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    bin_dir = str(Path(sys.executable).parent)
    if args.command:
        command = args.command.split()
    elif args.bare:
        command = [f"{bin_dir}/python3", "-I", "-S", "-u", "-c", collector_start(bin_dir)]
    else:
        command = [f"{bin_dir}/pns-collector"]
    if args.instructions:
        counts = [
            one_trial(kube, namespace, env, files, [*CALLGRIND, *command], args.seconds, False)
            for _ in range(args.runs)
        ]
        kube.delete(NAMESPACES, namespace)
        values = [c["instructions"] for c in counts]
        print(
            f"collector instructions per trial ({' '.join(command)}; StdOut, {args.seconds:g} s "
            f"trials, {args.runs} runs, under callgrind): median "
            f"{statistics.median(values) / 1e6:.1f} M, min {min(values) / 1e6:.1f} M, "
            f"max {max(values) / 1e6:.1f} M"
        )
        return
    try:
        totals = [
            one_trial(kube, namespace, env, files, command, args.seconds, False)["total"]
            for _ in range(args.runs)
        ]
        phased = [
            one_trial(kube, namespace, env, files, command, args.seconds, True)
            for _ in range(args.runs)
        ]
    finally:
        kube.delete(NAMESPACES, namespace)
    print(
        f"collector CPU-s per trial ({' '.join(command)}; StdOut, {args.seconds:g} s trials, "
        f"{args.runs} runs, load average {os.getloadavg()[0]:.2f}): median "
        f"{statistics.median(totals):.4f}, min {min(totals):.4f}, max {max(totals):.4f}"
    )
    print(f"phases (harness, median of {args.runs}; `all` rows include the rows under them):")
    keys = [k for k in phased[0] if k not in ("process_time",)]
    for key in keys:
        print(f"  {key:<34}{statistics.median(p.get(key, 0.0) for p in phased):>9.4f}")
    named = (
        "interpreter start", "imports", "setup (flags, logging, client)",
        "wait (waiter thread)", "watch loop (all)", "finish (all)",
    )  # fmt: skip
    other = [p["total"] - sum(p.get(k, 0.0) for k in named) for p in phased]
    print(f"  {'other (outside the rows above)':<34}{statistics.median(other):>9.4f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="collector_cost", description=__doc__)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--kubeconfig", help="a local cluster (kubetune's CRDs are applied)")
    parser.add_argument("--command", help="the collector's command (default: pns-collector)")
    parser.add_argument(
        "--bare",
        action="store_true",
        help="start it as the local overlay's image map does (python -I -S, as the image)",
    )
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="count the collector's instructions under valgrind's callgrind instead (the "
        "machine's load leaves them alone; slow: use --seconds 8 so it streams while training)",
    )
    parser.add_argument("--state-dir", help="where the started cluster keeps its state")
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        raise SystemExit("collector_cost needs root: each collector gets its own mount namespace")
    if args.kubeconfig:
        measure(args.kubeconfig, args)
        return 0
    from localcluster import build
    from localcluster import cluster as localcluster

    build.build_all()
    state_dir = Path(args.state_dir or tempfile.mkdtemp(prefix="kubetune-bench-collector-"))
    state = localcluster.up(state_dir, with_nodeagent=False)
    try:
        measure(state.kubeconfig, args)
    finally:
        localcluster.down(state_dir, quiet=True)
        shutil.rmtree(state_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    start = time.monotonic()
    code = main()
    print(f"({time.monotonic() - start:.0f} s)")
    sys.exit(code)
