"""Deploy kustomize/overlays/local and check every Deployment becomes Available, then RBAC.

The node agent runs each pod as host processes of this repository's console scripts (the
session's image map, see conftest.py). When a Deployment does not become Available the failure
names it and says why: its conditions, each pod's phase and container states, the pod's
warning events and the tail of each container's log.

Against an existing cluster (KUBETUNE_E2E_EXISTING_CLUSTER=1) this module is skipped unless
KUBETUNE_E2E_LOCAL_OVERLAY=1: deploying kubetune there would reconcile everyone's objects, and
the cluster must have been started with the rendered image map. KUBETUNE_E2E_KEEP=1 leaves the
deployment in place afterwards; KUBETUNE_E2E_AVAILABLE_TIMEOUT (seconds, default 180) bounds
the wait for the Deployments, KUBETUNE_E2E_EXPERIMENT_TIMEOUT (default 300) an Experiment's.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetune_testkit import builders, deploying, skips
from kubetune_testkit.conditions import is_true
from kubetune_testkit.examples import MANIFESTS
from kubetune_testkit.kubectl import get_json
from kubetune_testkit.paths import KUSTOMIZE
from localcluster.pytest_plugin import ClusterHandle

pytestmark = pytest.mark.integration

OVERLAY = KUSTOMIZE / "overlays" / "local"
NAMESPACE = "kubeflow"
AVAILABLE_TIMEOUT = float(os.environ.get("KUBETUNE_E2E_AVAILABLE_TIMEOUT", "180"))
EXPERIMENT_TIMEOUT = float(os.environ.get("KUBETUNE_E2E_EXPERIMENT_TIMEOUT", "300"))
# Actions no kubetune service may perform (checked for every service account).
FORBIDDEN_FOR_ALL = [
    ("create", "pods", "default"),
    ("delete", "experiments.kubeflow.org", "default"),
    ("get", "secrets", "default"),
    ("delete", "customresourcedefinitions.apiextensions.k8s.io", ""),
    ("create", "clusterrolebindings.rbac.authorization.k8s.io", ""),
]
# What a service's own role grants on purpose, out of FORBIDDEN_FOR_ALL, and why.
GRANTED_ON_PURPOSE = {
    # The image's ENTRYPOINT and CMD are read with the admitted pod's pull secrets (`get` only,
    # no list or watch; katib-config init.controller.imageCommandLookup).
    ("kubetune-webhook", "get", "secrets"),
}
Obj = dict[str, Any]
KEPT_KINDS = ("CustomResourceDefinition", "Namespace")


def _render(cluster: ClusterHandle) -> list[Obj]:
    settings = deploying.local_settings(deploying.state_dir_of(cluster))
    return [d for d in yaml.safe_load_all(deploying.render_overlay(cluster, settings)) if d]


def _skip_on_shared_cluster() -> None:
    if (
        os.environ.get("KUBETUNE_E2E_EXISTING_CLUSTER") == "1"
        and os.environ.get("KUBETUNE_E2E_LOCAL_OVERLAY") != "1"
    ):
        skips.skip(
            "existing cluster", "set KUBETUNE_E2E_LOCAL_OVERLAY=1 to deploy the local overlay there"
        )


@pytest.fixture(scope="module")
def another_cluster_ports() -> Iterator[list[int]]:
    """The overlay's default host ports held open, as another local cluster's kubetune on this
    machine would hold them (a port some other process holds already is just as taken)."""
    held: list[socket.socket] = []
    for port in deploying.DEFAULT_PORTS.values():
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
            s.listen()
            held.append(s)
        except OSError:
            s.close()
    try:
        yield list(deploying.DEFAULT_PORTS.values())
    finally:
        for s in held:
            s.close()


@pytest.fixture(scope="module")
def rendered(cluster: ClusterHandle, another_cluster_ports: list[int]) -> list[Obj]:
    _skip_on_shared_cluster()
    return _render(cluster)


@pytest.fixture(scope="module")
def deployed(cluster: ClusterHandle, rendered: list[Obj]) -> Iterator[list[Obj]]:
    """The overlay applied (server-side), with this cluster's own ports while the defaults are
    taken (`another_cluster_ports`); afterwards its objects are deleted again, except the CRDs
    and the namespace (on a shared cluster deleting them would delete others' objects)."""
    try:
        deploying.apply_overlay(cluster)
    except RuntimeError as e:
        pytest.fail(str(e))
    try:
        yield rendered
    finally:
        if os.environ.get("KUBETUNE_E2E_KEEP") != "1":
            ours = [o for o in rendered if o["kind"] not in KEPT_KINDS]
            cluster.kubectl(
                "delete", "--ignore-not-found", "--wait=false", "-f", "-",
                stdin=yaml.safe_dump_all(ours), check=False,
            )  # fmt: skip


def _available(dep: Obj) -> bool:
    return is_true(dep, "Available") and int(
        (dep.get("status") or {}).get("availableReplicas") or 0
    ) >= int((dep.get("spec") or {}).get("replicas", 1))


def _state(status: Obj) -> str:
    for key, val in (status.get("state") or {}).items():
        shown = [k for k in ("reason", "exitCode", "message") if val.get(k) not in (None, "")]
        detail = " ".join(f"{k}={val[k]}" for k in shown)
        return f"{key} {detail}".strip()
    return "unknown"


def _logs(cluster: ClusterHandle, pod: str, container: str, previous: bool) -> str:
    args = ["logs", "-n", NAMESPACE, pod, "-c", container, "--tail=25"]
    if previous:
        args.append("--previous")
    out = cluster.kubectl(*args, check=False)
    return (out.stdout or out.stderr).rstrip()


def explain(cluster: ClusterHandle, name: str) -> str:
    """Why Deployment `name` is not Available: conditions, pods, events, log tails."""
    lines = [f"Deployment {NAMESPACE}/{name} is not Available"]
    got = cluster.kubectl("get", "deployment", "-n", NAMESPACE, name, "-o", "json", check=False)
    if got.returncode != 0:
        return f"{lines[0]}: it does not exist ({got.stderr.strip()})"
    dep = json.loads(got.stdout)
    for c in (dep.get("status") or {}).get("conditions") or []:
        lines.append(f"  condition {c['type']}={c['status']} {c.get('reason')}: {c.get('message')}")
    selector = ",".join(f"{k}={v}" for k, v in dep["spec"]["selector"]["matchLabels"].items())
    pods = get_json(cluster, "pods", "-n", NAMESPACE, "-l", selector)["items"]
    if not pods:
        lines.append("  no pods (see the ReplicaSet events: quota, admission, service account?)")
        rs = get_json(cluster, "events", "-n", NAMESPACE)["items"]
        for ev in rs:
            if ev.get("type") == "Warning" and name in ev["involvedObject"].get("name", ""):
                lines.append(f"    event {ev.get('reason')}: {ev.get('message')}")
    for pod in pods:
        pname = pod["metadata"]["name"]
        status = pod.get("status") or {}
        lines.append(f"  pod {pname}: phase {status.get('phase')}")
        for c in (status.get("initContainerStatuses") or []) + (
            status.get("containerStatuses") or []
        ):
            last = c.get("lastState") or {}
            lines.append(
                f"    container {c['name']}: ready={c.get('ready')} "
                f"restarts={c.get('restartCount')} state: {_state(c)}"
                + (f"; last: {_state({'state': last})}" if last else "")
            )
            log = _logs(cluster, pname, c["name"], previous=bool(last) and not c.get("ready"))
            if log:
                lines.extend("      | " + line for line in log.splitlines())
        events = get_json(
            cluster,
            "events",
            "-n",
            NAMESPACE,
            "--field-selector",
            f"involvedObject.name={pname}",
        )["items"]
        for ev in events:
            if ev.get("type") == "Warning":
                lines.append(f"    event {ev.get('reason')}: {ev.get('message')}")
    return "\n".join(lines)


def test_every_deployment_becomes_available(cluster: ClusterHandle, deployed: list[Obj]) -> None:
    wanted = sorted(d["metadata"]["name"] for d in deployed if d["kind"] == "Deployment")
    assert wanted, "the local overlay renders no Deployment"
    deadline = time.monotonic() + AVAILABLE_TIMEOUT
    pending = set(wanted)
    while pending and time.monotonic() < deadline:
        items = get_json(cluster, "deployments", "-n", NAMESPACE)["items"]
        pending -= {d["metadata"]["name"] for d in items if _available(d)}
        if pending:
            time.sleep(2)
    assert not pending, (
        f"{len(pending)} of {len(wanted)} Deployments not Available after "
        f"{AVAILABLE_TIMEOUT:.0f}s:\n\n" + "\n\n".join(explain(cluster, n) for n in sorted(pending))
    )


def _groups(who: str) -> list[str]:
    """The groups the API server gives a service account's token."""
    ns = who.split(":")[2]
    return ["system:serviceaccounts", f"system:serviceaccounts:{ns}", "system:authenticated"]


def _can(cluster: ClusterHandle, who: str, verb: str, resource: str, namespace: str) -> bool:
    """A SubjectAccessReview for `who`; resource as `plural.group[/subresource]`.

    The review asks the RBAC authorizer directly (no discovery, unlike `kubectl auth can-i`),
    so kinds whose CRDs are not installed (TFJob, Workflow, ...) are checked too.
    """
    resource, _, sub = resource.partition("/")
    plural, _, group = resource.partition(".")
    attrs = {"verb": verb, "group": group, "resource": plural, "subresource": sub}
    if namespace:
        attrs["namespace"] = namespace
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {"user": who, "groups": _groups(who), "resourceAttributes": attrs},
    }
    out = cluster.kubectl("create", "-o", "json", "-f", "-", stdin=json.dumps(review))
    return bool(json.loads(out.stdout).get("status", {}).get("allowed"))


def _service_accounts(deployed: list[Obj]) -> dict[str, str]:
    """Deployment name -> its ServiceAccount."""
    return {
        d["metadata"]["name"]: d["spec"]["template"]["spec"].get("serviceAccountName", "default")
        for d in deployed
        if d["kind"] == "Deployment"
    }


def test_each_service_runs_under_its_own_service_account(
    cluster: ClusterHandle, deployed: list[Obj]
) -> None:
    accounts = _service_accounts(deployed)
    assert len(set(accounts.values())) == len(accounts), f"shared service accounts: {accounts}"
    for name, sa in accounts.items():
        dep = get_json(cluster, "deployment", "-n", NAMESPACE, name)
        selector = ",".join(f"{k}={v}" for k, v in dep["spec"]["selector"]["matchLabels"].items())
        for pod in get_json(cluster, "pods", "-n", NAMESPACE, "-l", selector)["items"]:
            assert pod["spec"]["serviceAccountName"] == sa, f"pod {pod['metadata']['name']}"


def _granted(deployed: list[Obj], sa: str) -> list[tuple[str, str, str]]:
    """(verb, resource.group, namespace) samples of what the SA's roles grant it."""
    bindings = [
        b
        for b in deployed
        if b["kind"] in ("RoleBinding", "ClusterRoleBinding")
        and any(
            s.get("kind") == "ServiceAccount" and s.get("name") == sa
            for s in b.get("subjects") or []
        )
    ]
    out = []
    for b in bindings:
        ref = (b["roleRef"]["kind"], b["roleRef"]["name"])
        role = next((r for r in deployed if (r["kind"], r["metadata"]["name"]) == ref), None)
        if role is None:
            continue
        ns = b["metadata"].get("namespace", "default") if b["kind"] == "RoleBinding" else "default"
        for rule in role.get("rules") or []:
            if rule.get("resourceNames"):
                continue
            group = (rule.get("apiGroups") or [""])[0]
            plural, _, sub = rule["resources"][0].partition("/")
            res = plural + (f".{group}" if group else "") + (f"/{sub}" if sub else "")
            out.append((rule["verbs"][0], res, ns))
    return out


def test_each_service_is_refused_what_its_role_does_not_grant(
    cluster: ClusterHandle, deployed: list[Obj]
) -> None:
    problems = []
    for name, sa in _service_accounts(deployed).items():
        who = f"system:serviceaccount:{NAMESPACE}:{sa}"
        granted = _granted(deployed, sa)
        if not granted:
            problems.append(f"{name}: no role grants {sa} anything")
        for verb, res, ns in granted:
            if not _can(cluster, who, verb, res, ns):
                problems.append(f"{name} ({sa}) cannot {verb} {res}, which its role grants")
        for verb, res, ns in FORBIDDEN_FOR_ALL:
            if (sa, verb, res) in GRANTED_ON_PURPOSE:
                continue
            if _can(cluster, who, verb, res, ns):
                problems.append(f"{name} ({sa}) may {verb} {res}: outside any kubetune role")
    assert problems == []


def test_collector_rights_are_only_trial_status(
    cluster: ClusterHandle, deployed: list[Obj], namespace: str
) -> None:
    """The binding the trial-controller makes for trial pods' service accounts, then can-i."""
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "kubetune-pns-collector", "namespace": namespace},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "kubetune-pns-collector",
        },
        "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": namespace}],
    }
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps(binding))
    who = f"system:serviceaccount:{namespace}:default"
    assert _can(cluster, who, "patch", "trials.kubeflow.org/status", namespace)
    assert _can(cluster, who, "get", "trials.kubeflow.org/status", namespace)
    for verb, res in [
        ("create", "pods"),
        ("update", "trials.kubeflow.org"),
        ("patch", "experiments.kubeflow.org/status"),
        ("delete", "trials.kubeflow.org"),
        ("get", "secrets"),
    ]:
        assert not _can(cluster, who, verb, res, namespace), f"collector may {verb} {res}"
    # and nothing outside the Trial's namespace
    assert not _can(cluster, who, "patch", "trials.kubeflow.org/status", "default")


def test_a_status_write_that_names_no_pod_is_refused(
    cluster: ClusterHandle, deployed: list[Obj], namespace: str
) -> None:
    """Issue 13: the collector's rights reach only a Trial's own pod (the deployed webhook).

    Impersonating the namespace's `default` service account gives a request with no pod in its
    user info, as `kubectl create token default` does; an admin's write is not checked."""
    test_every_deployment_becomes_available(cluster, deployed)
    test_collector_rights_are_only_trial_status(cluster, deployed, namespace)
    trial = {
        "apiVersion": "kubeflow.org/v1beta1",
        "kind": "Trial",
        "metadata": {"name": "victim", "namespace": namespace},
        "spec": {
            "objective": {"type": "minimize", "objectiveMetricName": "loss"},
            "runSpec": {"apiVersion": "batch/v1", "kind": "Job"},
        },
    }
    cluster.kubectl("create", "-f", "-", stdin=json.dumps(trial))
    forged = json.dumps(
        {"status": {"observation": {"metrics": [{"name": "loss", "latest": "-9"}]}}}
    )
    patch = ["patch", "trial", "victim", "-n", namespace, "--subresource=status", "--type=merge"]
    out = cluster.kubectl(
        *patch, "-p", forged, f"--as=system:serviceaccount:{namespace}:default",
        "--as-group=system:serviceaccounts", check=False,
    )  # fmt: skip
    assert out.returncode != 0, "a write naming no pod was accepted"
    assert "only from that Trial's own pod" in out.stderr, out.stderr
    cluster.kubectl(*patch, "-p", forged)  # an admin is not a trial pod: RBAC decides


def test_ports_and_host_path_are_the_clusters_own(
    cluster: ClusterHandle, rendered: list[Obj], another_cluster_ports: list[int]
) -> None:
    """Issue 13 defect 11: nothing of the rendered overlay uses the shared defaults."""
    state_dir = deploying.state_dir_of(cluster)
    if state_dir is None:
        skips.skip(
            "existing cluster",
            "it is deployed with the overlay's own fixed ports: per-cluster ports apply only "
            "to clusters localcluster starts",
        )
    settings = deploying.local_settings(state_dir)
    assert len(set(settings.ports.values())) == len(settings.ports)
    assert not set(settings.ports.values()) & set(another_cluster_ports)
    assert settings.host_dir.startswith(f"{state_dir.resolve()}/")
    text = yaml.safe_dump_all(rendered)
    for default in another_cluster_ports:
        assert str(default) not in text, f"port {default} is still in the rendered overlay"
    assert deploying.DEFAULT_HOST_DIR not in text
    webhooks = [
        w["clientConfig"]["url"]
        for o in rendered
        if o["kind"] in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
        for w in o["webhooks"]
    ]
    assert webhooks and all(
        u.startswith(f"https://127.0.0.1:{settings.ports['webhook']}/") for u in webhooks
    )
    # Deploying again keeps the choice (no new ports, no restarted pods).
    assert deploying.local_settings(state_dir) == settings


def test_a_second_cluster_deploys_beside_the_first(
    cluster: ClusterHandle, deployed: list[Obj], tmp_path: Path
) -> None:
    """Issue 13 defect 11, for real: a second local cluster on this machine deploys the overlay
    while the first one's kubetune runs; each API server calls its own webhook."""
    from localcluster import cluster as lc

    if deploying.state_dir_of(cluster) is None:
        skips.skip(
            "existing cluster",
            "it has no localcluster state to compare a second local cluster with",
        )
    test_every_deployment_becomes_available(cluster, deployed)
    state = lc.up(tmp_path / "second", bind_to_parent=True, quiet=True)
    try:
        second = ClusterHandle(state.kubeconfig, state.kubectl, state.server, state)
        mine = deploying.apply_overlay(second)
        theirs = deploying.local_settings(deploying.state_dir_of(cluster))
        assert not set(mine.ports.values()) & set(theirs.ports.values())
        assert mine.host_dir != theirs.host_dir
        deploying.wait_available(second, AVAILABLE_TIMEOUT)
        url = get_json(second, "mutatingwebhookconfiguration", "kubetune-webhook")["webhooks"][0][
            "clientConfig"
        ]["url"]
        assert url.startswith(f"https://127.0.0.1:{mine.ports['webhook']}/"), url
        # The second API server's webhook answers (an Experiment comes back defaulted) ...
        deploying.enable_injection(second, "default")
        experiment = _experiment("beside", "default", "Never")
        experiment["spec"].pop("metricsCollectorSpec", None)
        out = second.kubectl(
            "create", "--dry-run=server", "-o", "json", "-f", "-",
            stdin=json.dumps(experiment), check=False,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["spec"]["metricsCollectorSpec"]["collector"]["kind"]
        # ... and the first cluster's services still run.
        test_every_deployment_becomes_available(cluster, deployed)
    finally:
        lc.down(tmp_path / "second", quiet=True)


def test_image_map_renders_the_venv(tmp_path: Path) -> None:
    from localcluster.nodeagent.images import ImageMap

    path = tmp_path / "map.yaml"
    path.write_text(deploying.render_image_map(bin_dir="/some/venv/bin"))
    images = ImageMap.load(str(path))
    entry = images.lookup("ghcr.io/kubetune/webhook:0.1.0")
    assert entry is not None
    assert entry.entrypoint == ["webhook"] and entry.path == ["/some/venv/bin"]
    # The collector starts bare, as its image does, with the venv's packages on sys.path.
    entry = images.lookup("ghcr.io/kubetune/pns-collector:0.1.0")
    assert entry is not None
    assert entry.entrypoint[:5] == ["/some/venv/bin/python3", "-I", "-S", "-u", "-c"]
    code = entry.entrypoint[5]
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    assert f"'/some/venv/lib/{version}/site-packages'" in code, code
    assert code.endswith("from kubetune_pns_collector.main import run; run()"), code


def test_the_bare_collector_start_finds_the_venvs_packages() -> None:
    """Started as the rendered map starts it, from this venv: no `site`, yet it runs."""
    bin_dir = deploying.venv_bin()
    start = deploying.collector_start(bin_dir)
    run = subprocess.run(
        [f"{bin_dir}/python3", "-I", "-S", "-u", "-c", start, "--help"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("usage: pns-collector"), run.stdout


def test_api_server_calls_the_webhook_on_loopback(
    cluster: ClusterHandle, deployed: list[Obj], namespace: str
) -> None:
    """URL + caBundle work: an Experiment comes back defaulted, a plain pod is admitted.

    Server-side dry runs: the webhooks are called (sideEffects None) and nothing is stored.
    """
    test_every_deployment_becomes_available(cluster, deployed)
    cluster.kubectl(
        "label", "namespace", namespace, "katib.kubeflow.org/metrics-collector-injection=enabled"
    )
    example = MANIFESTS / "random-job-stdout.yaml"
    experiment = next(
        d for d in yaml.safe_load_all(example.read_text()) if d["kind"] == "Experiment"
    )
    experiment["metadata"] = {"name": "webhook-probe", "namespace": namespace}
    experiment["spec"].pop("metricsCollectorSpec", None)
    out = cluster.kubectl(
        "create", "--dry-run=server", "-o", "json", "-f", "-",
        stdin=json.dumps(experiment), check=False,
    )  # fmt: skip
    assert out.returncode == 0, f"Experiment dry run failed:\n{out.stderr}"
    defaulted = json.loads(out.stdout)["spec"]
    assert defaulted["metricsCollectorSpec"]["collector"]["kind"] == "StdOut", defaulted
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "not-a-trial", "namespace": namespace},
        "spec": {"containers": [{"name": "c", "image": "python:3.11", "command": ["true"]}]},
    }
    out = cluster.kubectl(
        "create", "--dry-run=server", "-o", "json", "-f", "-",
        stdin=json.dumps(pod), check=False,
    )  # fmt: skip
    assert out.returncode == 0, f"pod dry run failed (pod webhook):\n{out.stderr}"


def _experiment(name: str, namespace: str, resume_policy: str) -> Obj:
    """A 3-trial random search whose training container prints its own learning rate."""
    script = "import sys; print('accuracy=' + sys.argv[1])"
    # One shell line, as Katib runs the wrapped command: the code is one quoted word.
    command = ["python3", "-c", shlex.quote(script), "${trialParameters.learningRate}"]
    return builders.experiment(
        name,
        namespace,
        objective_spec=builders.objective(strategies=False, goal=0.99),
        parameters=[{**builders.LR, "feasibleSpace": {"min": "0.01", "max": "0.03"}}],
        trial_spec=builders.trial_job(command, image="python:3.11"),
        collector=None,
        resumePolicy=resume_policy,
        parallelTrialCount=2,
        maxTrialCount=3,
        maxFailedTrialCount=1,
    )


def _conditions(obj: Obj) -> str:
    return ", ".join(
        f"{c['type']}={c['status']} ({c.get('reason')}: {c.get('message')})"
        for c in (obj.get("status") or {}).get("conditions") or []
    )


def _run_experiment(cluster: ClusterHandle, namespace: str, experiment: Obj) -> Obj:
    """Create it, wait until Succeeded (or fail with every object's conditions)."""
    cluster.kubectl(
        "label", "namespace", namespace, "katib.kubeflow.org/metrics-collector-injection=enabled"
    )
    cluster.kubectl("create", "-f", "-", stdin=json.dumps(experiment))
    return wait_succeeded(cluster, namespace, experiment["metadata"]["name"])


def wait_succeeded(cluster: ClusterHandle, namespace: str, name: str) -> Obj:
    """The Experiment once it ended Succeeded; fails with every object's conditions."""
    deadline = time.monotonic() + EXPERIMENT_TIMEOUT
    exp: Obj = {}
    while time.monotonic() < deadline:
        exp = get_json(cluster, "experiment", "-n", namespace, name)
        done = {
            c["type"] for c in (exp.get("status") or {}).get("conditions") or []
            if c["status"] == "True"
        }  # fmt: skip
        if done & {"Succeeded", "Failed"}:
            break
        time.sleep(2)
    lines = [f"Experiment {name}: {_conditions(exp)}"]
    for kind in ("suggestion", "trial"):
        for obj in get_json(cluster, kind, "-n", namespace)["items"]:
            lines.append(f"{kind} {obj['metadata']['name']}: {_conditions(obj)}")
    assert is_true(exp, "Succeeded"), "\n".join(lines)
    return exp


def test_from_volume_gets_a_host_path_volume(
    cluster: ClusterHandle, deployed: list[Obj], namespace: str
) -> None:
    """The local katib-config: FromVolume suggestions get a hostPath PV, bound, kept at the end."""
    test_every_deployment_becomes_available(cluster, deployed)
    _run_experiment(cluster, namespace, _experiment("resumable", namespace, "FromVolume"))
    pvcs = get_json(cluster, "pvc", "-n", namespace)["items"]
    assert len(pvcs) == 1 and pvcs[0]["status"]["phase"] == "Bound"
    pv = get_json(cluster, "pv", pvcs[0]["spec"]["volumeName"])
    settings = deploying.local_settings(deploying.state_dir_of(cluster))
    assert pv["spec"]["hostPath"]["path"].startswith(settings.host_dir)
    assert not settings.host_dir.startswith(deploying.DEFAULT_HOST_DIR)
    assert pv["spec"]["storageClassName"] == "kubetune-local"
    cluster.kubectl("delete", "experiment", "-n", namespace, "resumable", "--wait=true")
    deadline = time.monotonic() + 60
    while (
        time.monotonic() < deadline
        and cluster.kubectl(
            "get", "pv", pv["metadata"]["name"], "--ignore-not-found", "-o", "name"
        ).stdout.strip()
    ):
        time.sleep(1)
    assert not Path(pv["spec"]["hostPath"]["path"]).exists(), "hostPath directory left behind"


def _selects(selector: Obj | None, labels: dict[str, str]) -> bool:
    """Kubernetes label-selector semantics (matchLabels and matchExpressions); an empty selector
    selects everything, an absent one (None) nothing."""
    if selector is None:
        return False
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression["key"], expression["operator"], expression.get("values")
        present = key in labels
        if (
            (operator == "Exists" and not present)
            or (operator == "DoesNotExist" and present)
            or (operator == "In" and labels.get(key) not in (values or []))
            or (operator == "NotIn" and present and labels.get(key) in (values or []))
        ):
            return False
    return True


def _admits(
    policy: Obj, port: str, pod_labels: dict[str, str], namespace_labels: dict[str, str]
) -> bool:
    """Whether some ingress rule of `policy` admits a pod with these labels, from a namespace
    with these labels, to the named `port`, as an enforcing network plugin reads the policy."""
    for rule in policy["spec"].get("ingress") or []:
        ports = rule.get("ports")
        if ports and all(p.get("port") != port for p in ports):
            continue
        peers = rule.get("from")
        if not peers:
            return True
        for peer in peers:
            pods_ok = "podSelector" not in peer or _selects(peer["podSelector"], pod_labels)
            spaces = peer.get("namespaceSelector")
            if "podSelector" in peer and spaces is None:
                continue  # a bare podSelector means the policy's own namespace: not asked here
            if pods_ok and _selects(spaces, namespace_labels):
                return True
    return False


def test_network_policies_select_the_running_pods_by_ports_they_have(
    cluster: ClusterHandle, deployed: list[Obj]
) -> None:
    """Every NetworkPolicy the overlay ships (as the API server stored it) selects the running
    pods of its service, and every port it names is a port those pods declare: a wrong label or
    port name makes an enforcing plugin admit nobody. No plugin here enforces policies, so what
    they admit is read from the stored policy with Kubernetes' selector rules."""
    names = sorted(o["metadata"]["name"] for o in deployed if o["kind"] == "NetworkPolicy")
    assert "kubetune-db-manager" in names and "kubetune-ui" in names, names
    pods = get_json(cluster, "pods", "-n", NAMESPACE)["items"]
    policies = {}
    for name in names:
        policy = get_json(cluster, "networkpolicy", "-n", NAMESPACE, name)
        policies[name] = policy
        selected = [
            p
            for p in pods
            if _selects(policy["spec"]["podSelector"], p["metadata"].get("labels") or {})
            and p["status"].get("phase") == "Running"
        ]
        assert selected, f"NetworkPolicy {name} selects no running pod in {NAMESPACE}"
        declared = {
            port.get("name")
            for p in selected
            for c in p["spec"]["containers"]
            for port in c.get("ports") or []
        }
        for rule in policy["spec"].get("ingress") or []:
            for port in rule.get("ports") or []:
                if isinstance(port.get("port"), str):
                    assert port["port"] in declared, f"{name}: port {port['port']} not declared"
    db = policies["kubetune-db-manager"]
    trial = {"katib.kubeflow.org/trial": "t1", "app": "anything"}
    tenant = {"kubernetes.io/metadata.name": "team-a"}
    own = {"kubernetes.io/metadata.name": NAMESPACE}
    assert _admits(db, "api", trial, tenant), "a trial pod of any namespace must reach db-manager"
    assert _admits(db, "api", {"app": "x"}, own), "kubetune's own namespace must reach db-manager"
    assert not _admits(db, "api", {"app": "notebook"}, tenant), "a tenant's other pods must not"
    ui = policies["kubetune-ui"]
    proxy = {"app.kubernetes.io/name": "kubetune-ui-proxy"}
    assert _admits(ui, "http", proxy, own)
    assert not _admits(ui, "http", proxy, tenant), "a tenant's pod with the proxy's label must not"
    assert not _admits(ui, "http", {"app": "x"}, own)
