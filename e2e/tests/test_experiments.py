"""kubetune as users meet it: whole Experiments on the deployed `local` overlay.

Every service runs as a pod of the node agent (this repository's console scripts), the webhook
is called by the API server, trial pods get the collector sidecar, and the trials run a real
training script. Each test watches only the API, as a user would.
"""

from __future__ import annotations

import copy
import json
import random
import re
import subprocess
from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest
import yaml
from podcode import POD_PYTHON, PYTHON_IMAGE, TRAINING_IMAGE, python_code, training
from realoperators import grant_argo_executor

from kubetune.kube import Kube
from kubetune_testkit import katibsdk, kubectl, trialkinds
from kubetune_testkit.conditions import is_true, true_condition
from kubetune_testkit.deploying import ROOT
from kubetune_testkit.katibsdk import sdk_python
from kubetune_testkit.kubectl import get_json
from kubetune_testkit.policies import refusing_pods
from kubetune_testkit.processes import free_port
from kubetune_testkit.waiting import wait_for
from localcluster.pytest_plugin import ClusterHandle

pytestmark = pytest.mark.integration

EXAMPLE = ROOT / "examples" / "random.yaml"
Obj = dict[str, Any]
POLL = 1.0
"""Seconds between two polls through kubectl (a process each)."""
SCORE_SCRIPT = trialkinds.SCORE_SCRIPT


def experiment_done(cluster: ClusterHandle, name: str, ns: str) -> Callable[[], Obj | None]:
    def check() -> Obj | None:
        exp = get_json(cluster, "experiment", name, "-n", ns)
        if is_true(exp, "Failed"):
            raise AssertionError(f"experiment {name} failed: {json.dumps(exp['status'])}")
        return exp if is_true(exp, "Succeeded") else None

    return check


def digits_experiment(ns: str, name: str, **spec: Any) -> Obj:
    """The example manifest, running the script of this checkout (pods run on this host)."""
    exp: Obj = yaml.safe_load(EXAMPLE.read_text())
    exp["metadata"] = {"name": name, "namespace": ns}
    container = exp["spec"]["trialTemplate"]["trialSpec"]["spec"]["template"]["spec"]["containers"][
        0
    ]
    container["command"] = training(*container["command"][2:])
    container["image"] = TRAINING_IMAGE
    exp["spec"].pop("objective")
    exp["spec"]["objective"] = {
        "type": "maximize",
        "objectiveMetricName": "accuracy",
        "additionalMetricNames": ["loss"],
    }
    exp["spec"]["trialTemplate"]["retain"] = True
    exp["spec"].update(spec)
    return exp


def quick_experiment(ns: str, name: str, policy: str, max_trials: int) -> Obj:
    """Trials that print a metric derived from their parameter and end at once."""
    return trialkinds.score_experiment(POD_PYTHON, ns, name, policy, max_trials)


def apply(cluster: ClusterHandle, obj: Obj, check: bool = True) -> Any:
    return kubectl.apply(cluster, obj, check=check)


def trials_of(cluster: ClusterHandle, name: str, ns: str) -> list[Obj]:
    items: list[Obj] = get_json(
        cluster, "trials", "-n", ns, "-l", f"katib.kubeflow.org/experiment={name}"
    )["items"]
    return items


def metric(trial: Obj, name: str, field: str) -> float:
    for m in trial["status"]["observation"]["metrics"]:
        if m["name"] == name:
            return float(m[field])
    raise KeyError(name)


def test_random_search_with_batch_jobs_finds_the_best_trial(
    kubetune: ClusterHandle, ns: str
) -> None:
    apply(kubetune, digits_experiment(ns, "digits", maxTrialCount=4, parallelTrialCount=2))
    exp = wait_for(
        "experiment digits to succeed", experiment_done(kubetune, "digits", ns), 420, interval=POLL
    )
    status = exp["status"]
    succeeded = true_condition(exp, "Succeeded")
    assert succeeded is not None and succeeded["reason"] == "ExperimentMaxTrialsReached"
    assert (status["trials"], status["trialsSucceeded"]) == (4, 4)
    trials = trials_of(kubetune, "digits", ns)
    assert len(trials) == 4
    # The optimal Trial has the highest accuracy; on a tie (the accuracy of a small test set
    # takes few values) it is the one that reached it first, as Katib keeps it.
    named = status["currentOptimalTrial"]["bestTrialName"]
    (best,) = [t for t in trials if t["metadata"]["name"] == named]
    assert metric(best, "accuracy", "max") == max(metric(t, "accuracy", "max") for t in trials)
    # The metric the collector reported is the one the training printed.
    pods = get_json(
        kubetune, "pods", "-n", ns, "-l", f"katib.kubeflow.org/trial={best['metadata']['name']}"
    )["items"]
    assert pods, "the best trial's pod is gone although retain is true"
    pod = pods[0]
    assert pod["metadata"]["annotations"].get("sidecar.istio.io/inject") == "false"
    assert {c["name"] for c in pod["spec"]["containers"]} >= {
        "training",
        "metrics-logger-and-collector",
    }
    log = kubetune.kubectl("logs", "-n", ns, pod["metadata"]["name"], "-c", "training").stdout
    printed = [float(v) for v in re.findall(r"accuracy=([0-9.]+)", log)]
    assert printed and max(printed) == metric(best, "accuracy", "max")
    assert printed[-1] == metric(best, "accuracy", "latest")


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda s: s["algorithm"].update(algorithmName="no-such-algorithm"), "algorithm"),
        (lambda s: s.update(parallelTrialCount=5, maxTrialCount=2), "parallelTrialCount"),
        (lambda s: s["trialTemplate"].update(primaryContainerName=""), "primaryContainerName"),
    ],
    ids=["unknown-algorithm", "parallel-above-max", "no-primary-container"],
)
def test_invalid_experiment_is_refused_at_apply(
    kubetune: ClusterHandle, ns: str, mutate: Callable[[Obj], None], message: str
) -> None:
    exp = quick_experiment(ns, "invalid", "Never", 2)
    mutate(exp["spec"])
    out = apply(kubetune, exp, check=False)
    assert out.returncode != 0
    assert "denied the request" in out.stderr and message in out.stderr, out.stderr
    assert kubetune.kubectl("get", "experiment", "invalid", "-n", ns, check=False).returncode != 0


def test_the_shipped_trial_templates_configmap_runs_an_experiment(
    kubetune: ClusterHandle, ns: str
) -> None:
    """Katib's install ships `trial-templates` (label katib.kubeflow.org/component); kubetune's
    equivalent is found by an Experiment that names only a key of it."""
    found = get_json(
        kubetune,
        "configmaps",
        "-n",
        "kubeflow",
        "-l",
        "katib.kubeflow.org/component=trial-templates",
    )["items"]
    assert [c["metadata"]["name"] for c in found] == ["trial-templates"]
    assert "defaultTrialTemplate.yaml" in found[0]["data"]

    exp: Obj = yaml.safe_load((ROOT / "examples" / "configmap-template.yaml").read_text())
    exp["metadata"]["namespace"] = ns
    missing = copy.deepcopy(exp)
    missing["metadata"]["name"] = "no-such-key"
    missing["spec"]["trialTemplate"]["configMap"]["templatePath"] = "noSuchTemplate.yaml"
    out = apply(kubetune, missing, check=False)
    assert out.returncode != 0 and "noSuchTemplate.yaml" in out.stderr, out.stderr

    out = apply(kubetune, exp, check=False)
    assert out.returncode == 0, out.stderr
    done = wait_for(
        "the experiment", experiment_done(kubetune, "configmap-template", ns), 420, POLL
    )
    assert done["status"]["trialsSucceeded"] == 2
    for trial in trials_of(kubetune, "configmap-template", ns):
        assert 0 < metric(trial, "accuracy", "max") <= 1


# A trainer serving its metric over HTTP (Prometheus text format) until it has been scraped
# three times: the score, then the score + 0.01 (`max` and `latest` tell the scrapes apart).
PROMETHEUS_TRAINER = """
import http.server, sys, threading, time
x = float(sys.argv[2]); served = [0]
class Metrics(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        served[0] += 1
        score = 1 - abs(0.3 - x) + (0.01 if served[0] > 1 else 0)
        body = f"# TYPE score gauge\\nscore {score:.4f}\\n".encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body)))
        self.end_headers(); self.wfile.write(body)
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer.allow_reuse_address = True
server = http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Metrics)
threading.Thread(target=server.serve_forever, daemon=True).start()
deadline = time.monotonic() + 60
while served[0] < 3 and time.monotonic() < deadline: time.sleep(0.05)
"""


def test_prometheus_metric_collector_scrapes_the_trainers_endpoint(
    kubetune: ClusterHandle, ns: str
) -> None:
    port = free_port()  # pods share the host's network here: one free port, one trial
    exp = quick_experiment(ns, "prometheus", "Never", 2)
    exp["spec"]["parallelTrialCount"] = 1
    exp["spec"]["metricsCollectorSpec"] = {
        "collector": {"kind": "PrometheusMetric"},
        "source": {"httpGet": {"port": port, "path": "/metrics"}},
    }
    job = exp["spec"]["trialTemplate"]["trialSpec"]["spec"]["template"]["spec"]
    job["containers"][0]["command"] = python_code(
        PROMETHEUS_TRAINER, str(port), "${trialParameters.x}"
    )
    out = apply(kubetune, exp, check=False)
    assert out.returncode == 0, out.stderr
    done = wait_for("the experiment", experiment_done(kubetune, "prometheus", ns), 300, POLL)
    assert done["status"]["trialsSucceeded"] == 2
    for trial in trials_of(kubetune, "prometheus", ns):
        x = float(trial["spec"]["parameterAssignments"][0]["value"])
        first = round(1 - abs(0.3 - x), 4)
        assert metric(trial, "score", "min") == pytest.approx(first, abs=1e-4)
        assert metric(trial, "score", "latest") == pytest.approx(first + 0.01, abs=1e-4)


def stamp(rfc3339: str) -> float:
    """A container status time (whole seconds, `Z`) as seconds since the epoch."""
    return datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp()


def test_a_trial_with_two_training_containers_waits_for_both(
    kubetune: ClusterHandle, ns: str
) -> None:
    """kubetune's extension: the pod template's `kubetune.kubeflow.org/training-containers`
    annotation names a second container whose process the collector waits for."""
    exp = quick_experiment(ns, "two-trainers", "Never", 1)
    exp["spec"]["parallelTrialCount"] = 1
    exp["spec"]["trialTemplate"]["retain"] = True
    template = exp["spec"]["trialTemplate"]["trialSpec"]["spec"]["template"]
    template["metadata"] = {"annotations": {"kubetune.kubeflow.org/training-containers": "eval"}}
    evaluate = "import time; time.sleep(4); print('evaluated', flush=True)"
    template["spec"]["containers"].append(
        {"name": "eval", "image": PYTHON_IMAGE, "command": python_code(evaluate)}
    )
    out = apply(kubetune, exp, check=False)
    assert out.returncode == 0, out.stderr
    wait_for("the experiment", experiment_done(kubetune, "two-trainers", ns), 300, POLL)
    (trial,) = trials_of(kubetune, "two-trainers", ns)
    (pod,) = get_json(
        kubetune, "pods", "-n", ns, "-l", f"katib.kubeflow.org/trial={trial['metadata']['name']}"
    )["items"]
    states = {s["name"]: s["state"]["terminated"] for s in pod["status"]["containerStatuses"]}
    ended = {name: stamp(state["finishedAt"]) for name, state in states.items()}
    # Whole seconds, and a container's finishedAt is when the node saw it exit, a moment after
    # its process wrote the end record the collector waits for: the collector may be seen to
    # end a second before eval. It must not end before eval's 4 s sleep was over.
    collector = ended["metrics-logger-and-collector"]
    assert collector >= stamp(states["eval"]["startedAt"]) + 4, states
    assert collector >= ended["training"] and ended["eval"] >= ended["training"], states
    log = kubetune.kubectl(
        "logs", "-n", ns, pod["metadata"]["name"], "-c", "metrics-logger-and-collector"
    ).stdout
    assert "2 training process(es) expected" in log, log


def test_the_katib_sdk_tunes_a_python_function_and_reads_its_logs(
    kubetune: ClusterHandle, ns: str
) -> None:
    """`KatibClient.tune()` (Katib's SDK from PyPI, its default StdOut collector) runs end to
    end, and `get_job_logs()` returns the training output, as against Katib. The SDK runs in
    its own venv (kubetune_testkit.katibsdk says why)."""
    out = subprocess.run(
        [sdk_python(), str(katibsdk.CLIENT), str(kubetune.kubeconfig), ns, PYTHON_IMAGE],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["succeeded"], result
    x, latest = float(result["x"]), float(result["latest"])
    assert latest == pytest.approx(1 - abs(0.3 - x))
    # kubernetes 36's client hands the SDK the log as the repr of bytes: look for the line in
    # the text, whatever its framing.
    assert f"score={result['latest']}" in "\n".join(result["logs"]), result["logs"]


def test_never_refuses_a_restart(kubetune: ClusterHandle, ns: str) -> None:
    apply(kubetune, quick_experiment(ns, "never", "Never", 2))
    wait_for(
        "experiment never to succeed", experiment_done(kubetune, "never", ns), 240, interval=POLL
    )
    out = kubetune.kubectl(
        "patch",
        "experiment",
        "never",
        "-n",
        ns,
        "--type=merge",
        "-p",
        '{"spec":{"maxTrialCount":3}}',
        check=False,
    )
    assert out.returncode != 0 and "resumePolicy" in out.stderr, out.stderr


def test_refused_trial_pods_fail_the_experiment(
    kubetune: ClusterHandle, ns: str, kube: Kube
) -> None:
    """Issue 13 defect 5: a policy refuses every trial pod of the namespace; each Trial fails
    with the refusal (it stayed Running for ever) and maxFailedTrialCount ends the Experiment."""
    refusal = "trial pods are not allowed in this namespace"
    expression = (
        "!has(object.metadata.labels) || !('katib.kubeflow.org/trial' in object.metadata.labels)"
    )
    with refusing_pods(kube, ns, expression, refusal):
        exp = quick_experiment(ns, "refused", "Never", 3)
        exp["spec"]["maxFailedTrialCount"] = 1
        apply(kubetune, exp)

        def failed() -> Obj | None:
            found = get_json(kubetune, "experiment", "refused", "-n", ns)
            return found if true_condition(found, "Failed") else None

        done = wait_for("experiment refused to fail", failed, 180, interval=POLL)
        assert done["status"]["trialsFailed"] >= 1, done["status"]
        trial = next(t for t in trials_of(kubetune, "refused", ns) if true_condition(t, "Failed"))
        message = (true_condition(trial, "Failed") or {}).get("message", "")
        assert refusal in message, message


def _assignments(cluster: ClusterHandle, name: str, ns: str) -> list[tuple[str, str]]:
    """(name, value) in assignment order; an assignment whose Trial exists keeps only its name in
    the Suggestion (the object stays small), so its value comes from the Trial."""
    suggestion = get_json(cluster, "suggestion", name, "-n", ns)
    trials = {t["metadata"]["name"]: t for t in trials_of(cluster, name, ns)}
    out = []
    for s in suggestion["status"]["suggestions"]:
        values = s.get("parameterAssignments") or trials[s["name"]]["spec"]["parameterAssignments"]
        out.append((s["name"], values[0]["value"]))
    return out


def test_resume_from_volume_continues_the_same_study(kubetune: ClusterHandle, ns: str) -> None:
    apply(kubetune, quick_experiment(ns, "fromvol", "FromVolume", 2))
    wait_for("first run to succeed", experiment_done(kubetune, "fromvol", ns), 240, interval=POLL)
    deployment = "fromvol-random"
    wait_for(
        "Deployment to go",
        lambda: (
            kubetune.kubectl("get", "deployment", deployment, "-n", ns, check=False).returncode != 0
        ),
        60,
        interval=POLL,
    )
    pvc = get_json(kubetune, "pvc", deployment, "-n", ns)
    volume = pvc["spec"]["volumeName"]
    first = _assignments(kubetune, "fromvol", ns)
    kubetune.kubectl(
        "patch",
        "experiment",
        "fromvol",
        "-n",
        ns,
        "--type=merge",
        "-p",
        '{"spec":{"maxTrialCount":4}}',
    )
    wait_for(
        "the restart to create new trials",
        lambda: (
            (get_json(kubetune, "experiment", "fromvol", "-n", ns)["status"].get("trials") or 0)
            >= 3
        ),
        240,
        interval=POLL,
    )
    exp = wait_for(
        "second run to succeed", experiment_done(kubetune, "fromvol", ns), 240, interval=POLL
    )
    assert exp["status"]["trials"] == 4
    after = _assignments(kubetune, "fromvol", ns)
    assert after[:2] == first
    # The same seed in a fresh study would draw the first two values again: a continued
    # study draws new ones.
    assert {v for _, v in after[2:]}.isdisjoint({v for _, v in first})
    assert len({n for n, _ in after}) == 4
    kubetune.kubectl("delete", "experiment", "fromvol", "-n", ns)
    wait_for(
        "the PVC to go",
        lambda: kubetune.kubectl("get", "pvc", deployment, "-n", ns, check=False).returncode != 0,
        120,
        interval=POLL,
    )
    wait_for(
        "the PV to go",
        lambda: kubetune.kubectl("get", "pv", volume, check=False).returncode != 0,
        120,
        interval=POLL,
    )


def test_long_running_restart_keeps_the_algorithm(kubetune: ClusterHandle, ns: str) -> None:
    apply(kubetune, quick_experiment(ns, "longrun", "LongRunning", 2))
    wait_for("first run to succeed", experiment_done(kubetune, "longrun", ns), 240, interval=POLL)
    pods = get_json(kubetune, "pods", "-n", ns, "-l", "katib.kubeflow.org/suggestion=longrun")[
        "items"
    ]
    assert len(pods) == 1
    kubetune.kubectl(
        "patch",
        "experiment",
        "longrun",
        "-n",
        ns,
        "--type=merge",
        "-p",
        '{"spec":{"maxTrialCount":3}}',
    )
    wait_for(
        "the restart to create a new trial",
        lambda: (
            (get_json(kubetune, "experiment", "longrun", "-n", ns)["status"].get("trials") or 0)
            >= 3
        ),
        240,
        interval=POLL,
    )
    exp = wait_for(
        "second run to succeed", experiment_done(kubetune, "longrun", ns), 240, interval=POLL
    )
    assert exp["status"]["trials"] == 3
    after = get_json(kubetune, "pods", "-n", ns, "-l", "katib.kubeflow.org/suggestion=longrun")[
        "items"
    ]
    assert [p["metadata"]["uid"] for p in after] == [pods[0]["metadata"]["uid"]]


SERVICES = ("experiment-controller", "suggestion-controller", "trial-controller", "webhook")


def _delete_pod(cluster: ClusterHandle, namespace: str, selector: str) -> str:
    pods = get_json(cluster, "pods", "-n", namespace, "-l", selector)["items"]
    running = [p["metadata"]["name"] for p in pods if not p["metadata"].get("deletionTimestamp")]
    if running:
        cluster.kubectl("delete", "pod", "-n", namespace, running[0], "--wait=false")
        return str(running[0])
    return ""


def test_chaos_every_service_pod_deleted_once(kubetune: ClusterHandle, ns: str) -> None:
    """Each service's pod dies once at a random moment; the Experiment still ends right."""
    exp = quick_experiment(ns, "chaos", "Never", 30)
    exp["spec"]["parallelTrialCount"] = 5
    apply(kubetune, exp)
    rng = random.Random(20261130)
    victims = [("kubeflow", f"app.kubernetes.io/name=kubetune-{name}") for name in SERVICES]
    victims.append((ns, "katib.kubeflow.org/suggestion=chaos"))
    # A moment is "once n trials exist" (n random, below 30): the experiment is still running
    # then, so every deletion lands mid-experiment however fast the machine is.
    schedule = sorted((rng.randint(2, 25), target) for target in victims)
    deleted: list[str] = []
    for moment, (namespace, selector) in schedule:

        def reached(n: int = moment) -> bool:
            return len(trials_of(kubetune, "chaos", ns)) >= n

        wait_for(
            f"{moment} trials before deleting a pod of {selector}", reached, 300, interval=POLL
        )
        deleted.append(_delete_pod(kubetune, namespace, selector) or f"(none for {selector})")
    exp_done = wait_for(
        "the chaos experiment", experiment_done(kubetune, "chaos", ns), 600, interval=POLL
    )
    assert all(not d.startswith("(none") for d in deleted), deleted
    trials = trials_of(kubetune, "chaos", ns)
    assert len(trials) == 30
    assert exp_done["status"]["trials"] == 30
    scored = [t for t in trials if (t.get("status") or {}).get("observation")]
    best = max(scored, key=lambda t: metric(t, "score", "max"))
    assert exp_done["status"]["currentOptimalTrial"]["bestTrialName"] == best["metadata"]["name"]


def pods_of(cluster: ClusterHandle, ns: str, selector: str) -> list[Obj]:
    items: list[Obj] = get_json(cluster, "pods", "-n", ns, "-l", selector)["items"]
    return items


def argo_experiment(ns: str, name: str, workflow: Obj, max_trials: int = 3) -> Obj:
    return trialkinds.argo_experiment(POD_PYTHON, ns, name, workflow, max_trials)


def step(name: str, code: str, primary: bool = False, **extra: Any) -> Obj:
    return trialkinds.argo_step(POD_PYTHON, name, code, primary, **extra)


@pytest.fixture
def argo_ns(argo: ClusterHandle, ns: str) -> str:
    grant_argo_executor(argo, ns)
    return ns


def test_argo_workflow_trials_with_a_sidecar_that_never_exits(
    kubetune: ClusterHandle, argo_ns: str
) -> None:
    """The real workflow-controller and argoexec: init, wait and main containers (emissary),
    and a sidecar that never exits (Argo stops it when main ends); metrics from main."""
    ns = argo_ns
    workflow = trialkinds.sidecar_workflow(POD_PYTHON)
    apply(kubetune, argo_experiment(ns, "argo", workflow))
    exp = wait_for("the Argo experiment", experiment_done(kubetune, "argo", ns), 420, interval=POLL)
    assert (exp["status"]["trials"], exp["status"]["trialsSucceeded"]) == (3, 3)
    for trial in trials_of(kubetune, "argo", ns):
        x = float(trial["spec"]["parameterAssignments"][0]["value"])
        assert metric(trial, "score", "latest") == pytest.approx(1 - abs(0.3 - x))
        wf = get_json(kubetune, "workflow", trial["metadata"]["name"], "-n", ns)
        assert wf["status"]["phase"] == "Succeeded"
    pods = pods_of(kubetune, ns, "workflows.argoproj.io/workflow")
    assert len(pods) == 3
    for pod in pods:
        init = [c["name"] for c in pod["spec"].get("initContainers") or []]
        names = [c["name"] for c in pod["spec"]["containers"]]
        assert "init" in init and {"wait", "main", "forever"} <= set(names), (init, names)


def test_argo_dag_metric_from_the_main_step(kubetune: ClusterHandle, argo_ns: str) -> None:
    """A three-step DAG: only the training step is primary, so the metric lines the other
    steps print are not the trial's."""
    ns = argo_ns
    workflow = {
        "entrypoint": "pipeline",
        "templates": [
            {
                "name": "pipeline",
                "dag": {
                    "tasks": [
                        {"name": "prepare", "template": "prepare"},
                        {"name": "train", "template": "train", "depends": "prepare"},
                        {"name": "report", "template": "report", "depends": "train"},
                    ]
                },
            },
            step("prepare", "print('score=-5')"),
            step("train", SCORE_SCRIPT, primary=True),
            step("report", "print('score=99')"),
        ],
    }
    apply(kubetune, argo_experiment(ns, "dag", workflow, max_trials=2))
    exp = wait_for("the DAG experiment", experiment_done(kubetune, "dag", ns), 420, interval=POLL)
    assert (exp["status"]["trials"], exp["status"]["trialsSucceeded"]) == (2, 2)
    for trial in trials_of(kubetune, "dag", ns):
        x = float(trial["spec"]["parameterAssignments"][0]["value"])
        assert metric(trial, "score", "latest") == pytest.approx(1 - abs(0.3 - x))
        assert metric(trial, "score", "max") == pytest.approx(1 - abs(0.3 - x))
    assert len(pods_of(kubetune, ns, "workflows.argoproj.io/workflow")) == 6


def test_argo_failing_step_fails_the_trial(kubetune: ClusterHandle, argo_ns: str) -> None:
    """A training step that exits 3: Argo fails the Workflow, the Trial fails with it, and
    maxFailedTrialCount ends the Experiment."""
    ns = argo_ns
    workflow = {
        "entrypoint": "train",
        "templates": [
            step("train", "print('score=${trialParameters.x}'); raise SystemExit(3)", True)
        ],
    }
    exp = argo_experiment(ns, "argofail", workflow, max_trials=2)
    exp["spec"].update(parallelTrialCount=1, maxFailedTrialCount=0)
    out = apply(kubetune, exp, check=False)
    assert out.returncode == 0, out.stderr

    def failed() -> Obj | None:
        found = get_json(kubetune, "experiment", "argofail", "-n", ns)
        return found if true_condition(found, "Failed") else None

    done = wait_for("the failing Argo experiment to fail", failed, 300, interval=POLL)
    assert done["status"]["trialsFailed"] == 1, done["status"]
    trial = trials_of(kubetune, "argofail", ns)[0]
    assert true_condition(trial, "Failed") is not None
    wf = get_json(kubetune, "workflow", trial["metadata"]["name"], "-n", ns)
    assert wf["status"]["phase"] == "Failed"
    main = next(
        s
        for p in pods_of(kubetune, ns, "workflows.argoproj.io/workflow")
        for s in p["status"]["containerStatuses"]
        if s["name"] == "main"
    )
    assert main["state"]["terminated"]["exitCode"] == 3


def tfjob_experiment(ns: str, name: str) -> Obj:
    """The chief trains examples/training/digits.py once every TF_CONFIG name resolves."""
    return trialkinds.tfjob_experiment(
        ns,
        name,
        chief=python_code(trialkinds.RESOLVE_TF_CONFIG, *training(*trialkinds.DIGITS_ARGS)),
        worker=python_code(trialkinds.RESOLVE_TF_CONFIG, "sleep", "600"),
        image=TRAINING_IMAGE,
    )


def test_tpe_over_tfjob_trials_with_the_file_collector(
    training_operator: ClusterHandle, kubetune: ClusterHandle, ns: str
) -> None:
    """The real training-operator runs the TFJobs: chief + worker pods, the chief (labelled
    job-role=master by the operator) is the primary pod that gets the File collector."""
    apply(kubetune, tfjob_experiment(ns, "tfjob"))
    exp = wait_for(
        "the TFJob experiment", experiment_done(kubetune, "tfjob", ns), 600, interval=POLL
    )
    assert (exp["status"]["trials"], exp["status"]["trialsSucceeded"]) == (4, 4)
    trials = trials_of(kubetune, "tfjob", ns)
    best = min(trials, key=lambda t: metric(t, "loss", "min"))
    assert exp["status"]["currentOptimalTrial"]["bestTrialName"] == best["metadata"]["name"]
    for trial in trials:
        assert 0.5 < metric(trial, "accuracy", "latest") <= 1.0
        job = get_json(kubetune, "tfjob", trial["metadata"]["name"], "-n", ns)
        assert true_condition(job, "Succeeded") is not None
    chiefs = pods_of(kubetune, ns, "training.kubeflow.org/replica-type=chief")
    assert chiefs, "the operator made no chief pods"
    for pod in chiefs:
        names = [c["name"] for c in pod["spec"]["containers"]]
        assert "metrics-logger-and-collector" in names, names
        assert pod["metadata"]["labels"]["training.kubeflow.org/job-role"] == "master"


def test_random_search_over_pytorchjob_trials(
    training_operator: ClusterHandle, kubetune: ClusterHandle, ns: str
) -> None:
    """The real training-operator runs PyTorchJobs: the worker's init container waits for the
    master's name (alpine nslookup), both see MASTER_ADDR resolve; the master is primary."""
    exp = trialkinds.pytorchjob_experiment(POD_PYTHON, ns, "pytorch")
    apply(kubetune, exp)
    done = wait_for(
        "the PyTorchJob experiment", experiment_done(kubetune, "pytorch", ns), 600, interval=POLL
    )
    assert (done["status"]["trials"], done["status"]["trialsSucceeded"]) == (2, 2)
    for trial in trials_of(kubetune, "pytorch", ns):
        x = float(trial["spec"]["parameterAssignments"][0]["value"])
        assert metric(trial, "score", "latest") == pytest.approx(1 - abs(0.3 - x))
    workers = pods_of(kubetune, ns, "training.kubeflow.org/replica-type=worker")
    assert workers, "the operator made no worker pods"
    for pod in workers:
        init = [c["name"] for c in pod["spec"].get("initContainers") or []]
        assert init == ["init-pytorch"], init
