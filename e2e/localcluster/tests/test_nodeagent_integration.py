"""The node agent against a real control plane: Jobs, Deployments, PVCs, shared PID
namespaces, in-cluster RBAC and $(VAR) expansion, all through real controllers."""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kubetune_testkit import skips
from kubetune_testkit.waiting import wait_for

pytestmark = pytest.mark.integration

JSON = dict[str, Any]


def _apply(cluster: Any, ns: str, manifest: str) -> None:
    cluster.kubectl("apply", "-n", ns, "-f", "-", stdin=manifest)


def _get(cluster: Any, ns: str, kind: str, name: str = "", selector: str = "") -> JSON:
    args = ["get", kind, "-n", ns, "-o", "json"]
    if name:
        args.insert(2, name)
    if selector:
        args += ["-l", selector]
    return dict(json.loads(cluster.kubectl(*args).stdout))


def _wait(what: str, check: Callable[[], Any], timeout: float | None = None) -> Any:
    """Poll through kubectl (a process each) a little less often than the default."""
    return wait_for(what, check, timeout, interval=0.3)


def _cond(obj: JSON, ctype: str) -> str:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype:
            return str(c.get("status"))
    return ""


def _with_cond(cluster: Any, ns: str, kind: str, name: str, ctype: str) -> JSON | None:
    obj = _get(cluster, ns, kind, name)
    return obj if _cond(obj, ctype) == "True" else None


def _log(cluster: Any, ns: str, pod: JSON, container: str, previous: bool = False) -> str:
    """The container's log through ``kubectl logs`` (apiserver -> the agent's endpoint)."""
    args = ["logs", "-n", ns, pod["metadata"]["name"], "-c", container]
    if previous:
        args.append("--previous")
    return str(cluster.kubectl(*args).stdout)


def _log_file(cluster: Any, ns: str, pod: JSON, container: str, restart: int = 0) -> Path:
    """Where the agent writes that log (the documented layout)."""
    if cluster.state is None:
        skips.skip("existing cluster", "needs the local node agent's state dir")
    meta = pod["metadata"]
    return (
        Path(cluster.state.state_dir)
        / "nodeagent"
        / "pods"
        / f"{ns}_{meta['name']}_{meta['uid']}"
        / container
        / f"{restart}.log"
    )


def _pods(cluster: Any, ns: str, selector: str) -> list[JSON]:
    return list(_get(cluster, ns, "pods", selector=selector)["items"])


def _pod_phase(cluster: Any, ns: str, name: str, phases: tuple[str, ...]) -> JSON | None:
    pod = _get(cluster, ns, "pod", name)
    return pod if pod["status"].get("phase") in phases else None


PY = "python:3.11"


def test_job_runs_to_completion(cluster: Any, namespace: str) -> None:
    _apply(
        cluster,
        namespace,
        f"""
apiVersion: batch/v1
kind: Job
metadata: {{name: ok}}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: {PY}
        command: [python3, -c, "import os; print('hello from', os.environ['HOSTNAME'])"]
""",
    )
    job = _wait("Job Complete", lambda: _with_cond(cluster, namespace, "job", "ok", "Complete"))
    assert job["status"]["succeeded"] == 1
    pod = _pods(cluster, namespace, "job-name=ok")[0]
    assert pod["status"]["phase"] == "Succeeded"
    cs = pod["status"]["containerStatuses"][0]
    assert cs["state"]["terminated"]["exitCode"] == 0
    assert cs["state"]["terminated"]["reason"] == "Completed"
    assert pod["status"]["podIP"] and not pod["status"]["podIP"].startswith("127.")
    assert pod["status"]["startTime"]
    want = f"hello from {pod['metadata']['name']}"
    assert _log(cluster, namespace, pod, "main").strip() == want
    assert _log_file(cluster, namespace, pod, "main").read_text().strip() == want


def test_failing_job_reaches_failed_after_backoff(cluster: Any, namespace: str) -> None:
    _apply(
        cluster,
        namespace,
        f"""
apiVersion: batch/v1
kind: Job
metadata: {{name: bad}}
spec:
  backoffLimit: 1
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: {PY}
        command: [python3, -c, "import sys; print('failing'); sys.exit(3)"]
""",
    )
    job = _wait(
        "Job Failed", lambda: _with_cond(cluster, namespace, "job", "bad", "Failed"), timeout=120
    )
    failed = next(c for c in job["status"]["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "BackoffLimitExceeded"
    pods = _wait(
        "two failed pods",
        lambda: (
            [
                p
                for p in _pods(cluster, namespace, "job-name=bad")
                if p["status"]["phase"] == "Failed"
            ]
            if len(_pods(cluster, namespace, "job-name=bad")) >= 2
            else None
        ),
    )
    assert len(pods) == 2
    for p in pods:
        term = p["status"]["containerStatuses"][0]["state"]["terminated"]
        assert (term["exitCode"], term["reason"]) == (3, "Error")


def test_onfailure_restarts_count_against_backoff(cluster: Any, namespace: str) -> None:
    _apply(
        cluster,
        namespace,
        f"""
apiVersion: v1
kind: Pod
metadata: {{name: flaky}}
spec:
  restartPolicy: OnFailure
  containers:
  - name: main
    image: {PY}
    volumeMounts: [{{name: scratch, mountPath: /mnt/nat/scratch}}]
    command: [python3, -c]
    args:
    - |
      import os, sys
      n = len(os.listdir('/mnt/nat/scratch'))
      print('run', n)
      open(f'/mnt/nat/scratch/run{{n}}', 'w').close()
      sys.exit(0 if n >= 1 else 5)
  volumes: [{{name: scratch, emptyDir: {{}}}}]
""",
    )
    pod = _wait(
        "flaky Succeeded", lambda: _pod_phase(cluster, namespace, "flaky", ("Succeeded", "Failed"))
    )
    assert pod["status"]["phase"] == "Succeeded"
    cs = pod["status"]["containerStatuses"][0]
    assert cs["restartCount"] == 1
    assert cs["lastState"]["terminated"]["exitCode"] == 5
    assert _log(cluster, namespace, pod, "main").strip() == "run 1"
    assert _log(cluster, namespace, pod, "main", previous=True).strip() == "run 0"


def test_deployment_available_and_pod_replaced(cluster: Any, namespace: str) -> None:
    _apply(
        cluster,
        namespace,
        f"""
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      terminationGracePeriodSeconds: 5
      containers:
      - name: main
        image: {PY}
        command:
        - python3
        - -c
        - "import signal, sys, time; signal.signal(signal.SIGTERM, lambda *a: sys.exit(0));
          time.sleep(3600)"
        readinessProbe:
          exec: {{command: [python3, -c, "print('ok')"]}}
          periodSeconds: 1
""",
    )
    _wait(
        "Deployment Available",
        lambda: _cond(_get(cluster, namespace, "deploy", "web"), "Available") == "True",
    )
    first = _wait(
        "one ready pod",
        lambda: [p for p in _pods(cluster, namespace, "app=web") if _cond(p, "Ready") == "True"],
    )[0]
    assert first["status"]["containerStatuses"][0]["ready"] is True
    t0 = time.monotonic()
    cluster.kubectl("delete", "pod", "-n", namespace, first["metadata"]["name"], "--wait=true")
    assert time.monotonic() - t0 < 5, "the SIGTERM handler exits at once; no grace wait"
    new = _wait(
        "replacement ready",
        lambda: [
            p
            for p in _pods(cluster, namespace, "app=web")
            if p["metadata"]["uid"] != first["metadata"]["uid"] and _cond(p, "Ready") == "True"
        ],
    )
    assert len(new) == 1
    _wait(
        "Deployment Available again",
        lambda: _cond(_get(cluster, namespace, "deploy", "web"), "Available") == "True",
    )


def test_pvc_data_survives_the_pod(cluster: Any, namespace: str, tmp_path: Path) -> None:
    host_dir = f"/tmp/nodeagent-pv-{uuid.uuid4().hex[:8]}"
    pv = f"pv-{namespace}"
    cluster.kubectl(
        "apply",
        "-f",
        "-",
        stdin=f"""
apiVersion: v1
kind: PersistentVolume
metadata: {{name: {pv}}}
spec:
  capacity: {{storage: 1Gi}}
  accessModes: [ReadWriteOnce]
  storageClassName: nodeagent-test
  persistentVolumeReclaimPolicy: Retain
  hostPath: {{path: {host_dir}, type: DirectoryOrCreate}}
  claimRef: {{namespace: {namespace}, name: data}}
""",
    )
    try:
        _apply(
            cluster,
            namespace,
            """
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: nodeagent-test
  resources: {requests: {storage: 1Gi}}
""",
        )
        _wait(
            "PVC Bound",
            lambda: _get(cluster, namespace, "pvc", "data")["status"].get("phase") == "Bound",
        )
        for name, code in (
            ("writer", "open('/opt/katib/data/state.txt', 'w').write('42')"),
            (
                "reader",
                (
                    "import sys; sys.exit(0 if open('/opt/katib/data/state.txt')"
                    ".read() == '42' else 7)"
                ),
            ),
        ):
            _apply(
                cluster,
                namespace,
                f"""
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: {PY}
    command: [python3, -c, "{code}"]
    volumeMounts: [{{name: data, mountPath: /opt/katib/data}}]
  volumes: [{{name: data, persistentVolumeClaim: {{claimName: data}}}}]
""",
            )
            pod = _wait(
                f"{name} done",
                lambda n=name: _pod_phase(  # type: ignore[misc]
                    cluster, namespace, n, ("Succeeded", "Failed")
                ),
            )
            assert pod["status"]["phase"] == "Succeeded", pod["status"]
            cluster.kubectl("delete", "pod", "-n", namespace, name, "--wait=true")
        assert Path(host_dir, "state.txt").read_text() == "42"
        assert not os.path.exists("/opt/katib/data/state.txt")  # never on the host's path
    finally:
        cluster.kubectl("delete", "pvc", "-n", namespace, "data", "--wait=true", check=False)
        cluster.kubectl("delete", "pv", pv, "--wait=false", check=False)


def test_emptydirs_are_per_pod(cluster: Any, namespace: str) -> None:
    for name in ("a", "b"):
        _apply(
            cluster,
            namespace,
            f"""
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: {PY}
    command:
    - python3
    - -c
    - "import os, sys; seen = os.listdir('/mnt/nat/scratch');
      open('/mnt/nat/scratch/{name}', 'w').close(); print(seen); sys.exit(1 if seen else 0)"
    volumeMounts: [{{name: s, mountPath: /mnt/nat/scratch}}]
  volumes: [{{name: s, emptyDir: {{}}}}]
""",
        )
        pod = _wait(
            f"{name} done",
            lambda n=name: _pod_phase(  # type: ignore[misc]
                cluster, namespace, n, ("Succeeded", "Failed")
            ),
        )
        assert pod["status"]["phase"] == "Succeeded", _log(cluster, namespace, pod, "main")


def test_share_process_namespace(cluster: Any, namespace: str) -> None:
    watcher = (
        "import os, sys, time\n"
        "me = os.getpid()\n"
        "def ppid(p):\n"
        "    try:\n"
        "        return int(open(f'/proc/{p}/stat').read().rsplit(')', 1)[1].split()[1])\n"
        "    except OSError:\n"
        "        return -1\n"
        "deadline = time.time() + 20\n"
        "others = []\n"
        "while not others and time.time() < deadline:\n"
        "    others = [int(p) for p in os.listdir('/proc') if p.isdigit()\n"
        "              and int(p) not in (1, me) and ppid(p) == 0]\n"
        "    time.sleep(0.1)\n"
        "if not others:\n"
        "    sys.exit('no other container process visible')\n"
        "cmd = open(f'/proc/{others[0]}/cmdline').read().replace(chr(0), ' ')\n"
        "print('found', others[0], cmd, flush=True)\n"
        "while os.path.exists(f'/proc/{others[0]}'):\n"
        "    time.sleep(0.05)\n"
        "print('training process ended', flush=True)\n"
    )
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "pns"},
        "spec": {
            "restartPolicy": "Never",
            "shareProcessNamespace": True,
            "containers": [
                {
                    "name": "train",
                    "image": PY,
                    "command": ["python3", "-c", "import time; time.sleep(3); print('trained')"],
                },
                {"name": "collector", "image": PY, "command": ["python3", "-c", watcher]},
            ],
        },
    }
    _apply(cluster, namespace, json.dumps(manifest))
    pod = _wait(
        "pns done",
        lambda: _pod_phase(cluster, namespace, "pns", ("Succeeded", "Failed")),
        timeout=60,
    )
    log = _log(cluster, namespace, pod, "collector")
    assert pod["status"]["phase"] == "Succeeded", log
    assert "found" in log and "time.sleep(3)" in log and "training process ended" in log
    st = {c["name"]: c["state"]["terminated"] for c in pod["status"]["containerStatuses"]}
    assert st["collector"]["finishedAt"] >= st["train"]["finishedAt"]


def test_in_cluster_config_follows_rbac(cluster: Any, namespace: str) -> None:
    script = (
        "from kubernetes import client, config\n"
        "config.load_incluster_config()\n"
        "v1 = client.CoreV1Api()\n"
        "ns = open('/var/run/secrets/kubernetes.io/serviceaccount/namespace').read()\n"
        "pods = v1.list_namespaced_pod(ns)\n"
        "print('pods', len(pods.items))\n"
        "try:\n"
        "    v1.list_namespaced_secret(ns)\n"
        "    print('secrets allowed')\n"
        "except client.ApiException as e:\n"
        "    print('secrets', e.status)\n"
        "try:\n"
        "    v1.list_namespaced_pod('default')\n"
        "    print('other namespace allowed')\n"
        "except client.ApiException as e:\n"
        "    print('other', e.status)\n"
    )
    manifest = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "reader"}},
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": {"name": "pod-reader"},
                "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}],
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {"name": "pod-reader"},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "Role",
                    "name": "pod-reader",
                },
                "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": namespace}],
            },
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "rbac"},
                "spec": {
                    "restartPolicy": "Never",
                    "serviceAccountName": "reader",
                    "containers": [
                        {"name": "main", "image": PY, "command": ["python3", "-c", script]}
                    ],
                },
            },
        ],
    }
    _apply(cluster, namespace, json.dumps(manifest))
    pod = _wait(
        "rbac pod done", lambda: _pod_phase(cluster, namespace, "rbac", ("Succeeded", "Failed"))
    )
    log = _log(cluster, namespace, pod, "main")
    assert pod["status"]["phase"] == "Succeeded", log
    assert log.splitlines() == ["pods 1", "secrets 403", "other 403"]


def test_var_expansion_like_the_kubelet(cluster: Any, namespace: str) -> None:
    code = (
        "import json, os, sys; print(json.dumps([os.getcwd(), os.environ['B'], "
        "os.environ['ESC'], *sys.argv[1:]]))"
    )
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "expand"},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "main",
                    "image": PY,
                    "workingDir": "/tmp/nodeagent-wd",
                    "env": [
                        {"name": "A", "value": "alpha"},
                        {"name": "B", "value": "$(A)-beta-$(LATER)"},
                        {"name": "LATER", "value": "later"},
                        {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                        {"name": "ESC", "value": "$$(A)"},
                    ],
                    "command": ["python3", "-c", code],
                    "args": [
                        "$(B)",
                        "$(POD)",
                        "$$(A)",
                        "$(NOPE)",
                        "$$$$",
                        "$(LATER)",
                        "$(KUBERNETES_SERVICE_HOST)",
                        "$(A",
                        "$A",
                    ],
                }
            ],
        },
    }
    _apply(cluster, namespace, json.dumps(manifest))
    pod = _wait(
        "expand done", lambda: _pod_phase(cluster, namespace, "expand", ("Succeeded", "Failed"))
    )
    out = _log(cluster, namespace, pod, "main")
    assert pod["status"]["phase"] == "Succeeded", out
    server_host = cluster.server.split("//")[-1].rsplit(":", 1)[0] or "127.0.0.1"
    assert json.loads(out) == [
        "/tmp/nodeagent-wd",
        "alpha-beta-$(LATER)",
        "$(A)",
        "alpha-beta-$(LATER)",
        "expand",
        "$(A)",
        "$(NOPE)",
        "$$",
        "later",
        server_host,
        "$(A",
        "$A",
    ]
