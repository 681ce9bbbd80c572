"""Katib's own algorithms beyond the Optuna ones, on the local overlay (issue 16).

A hyperband Experiment with the settings of Katib's hp-tuning/hyperband.yaml (eta 2, r_l 2) runs
to the end of its schedule: upstream's bracket math gives bracket s=1 (2 new configurations at
resource 1, then the better one again at 2) and bracket s=0 (2 new configurations at 2), 5
Trials in all, after which the search is exhausted and the Experiment Succeeded. The algorithm
pod is deleted while the first rung runs: its replacement continues from the Suggestion's status.

A PBT Experiment (FromVolume, population 5) runs three generations of a trial script that
restores its checkpoint from `suggestion_trial_dir`, trains one step and saves it again: every
Trial of generation g > 0 names a parent of generation g-1 and reports one step more than that
parent, so the checkpoint went from the parent's directory to the child's through the
suggestion's volume (copied by the algorithm, mounted by the pod webhook).

A team's own algorithm, a Katib gRPC Suggestion server (testkit's `katib-test-algorithm`),
configured in katib-config as an image: its refusal of the settings fails the Experiment, and it
runs a whole FromVolume Experiment through kubetune's bridge sidecar, its pod killed halfway.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import test_local_overlay as overlay
import yaml
from podcode import python_code

from kubetune import naming
from kubetune_testkit.conditions import conditions_of
from kubetune_testkit.kubectl import get_json
from kubetune_testkit.processes import free_port
from kubetune_testkit.waiting import wait_for
from localcluster.pytest_plugin import ClusterHandle

pytestmark = pytest.mark.integration
Obj = dict[str, Any]


def _condition(obj: Obj, type_: str) -> Obj:
    """The condition of that type (empty when absent), whatever its status."""
    return conditions_of(obj).get(type_, {})


SCORE = (
    "import sys; lr, layers, epochs = float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]); "
    "print('accuracy=' + str(round(lr * 10 + layers / 100 + epochs / 1000, 6)))"
)


def _hyperband(name: str, namespace: str, seconds: int = 0) -> Obj:
    """Katib's hyperband example; each Trial trains for `seconds` before it scores."""
    experiment = overlay._experiment(name, namespace, "Never")
    spec = experiment["spec"]
    spec["algorithm"] = {
        "algorithmName": "hyperband",
        "algorithmSettings": [
            {"name": "resource_name", "value": "num-epochs"},
            {"name": "eta", "value": "2"},
            {"name": "r_l", "value": "2"},
        ],
    }
    spec["objective"] = {"type": "maximize", "objectiveMetricName": "accuracy"}
    spec["maxTrialCount"] = 10  # more than hyperband's 5: the schedule's end ends the Experiment
    spec["parameters"] = [
        {"name": "lr", "parameterType": "double", "feasibleSpace": {"min": "0.01", "max": "0.03"}},
        {"name": "num-layers", "parameterType": "int", "feasibleSpace": {"min": "2", "max": "5"}},
        {"name": "num-epochs", "parameterType": "int", "feasibleSpace": {"min": "1", "max": "1"}},
    ]
    template = spec["trialTemplate"]
    template["trialParameters"] = [
        {"name": "learningRate", "reference": "lr"},
        {"name": "numberLayers", "reference": "num-layers"},
        {"name": "numberEpochs", "reference": "num-epochs"},
    ]
    container = template["trialSpec"]["spec"]["template"]["spec"]["containers"][0]
    # One shell line, as Katib runs the primary container (command and args joined).
    score = f"import time; time.sleep({seconds}); {SCORE}" if seconds else SCORE
    container["command"] = python_code(
        score,
        "${trialParameters.learningRate}",
        "${trialParameters.numberLayers}",
        "${trialParameters.numberEpochs}",
    )
    return experiment


def _kill_algorithm_pod_once_assigned(
    cluster: ClusterHandle, namespace: str, name: str, count: int = 2
) -> None:
    """Wait for `count` assignments, then delete the algorithm's pod (the Trials must train long
    enough for this to find the first rung running: a Trial that only prints its score lets the
    whole schedule end within a poll or two)."""
    deadline = time.monotonic() + overlay.EXPERIMENT_TIMEOUT
    while time.monotonic() < deadline:
        out = cluster.kubectl("get", "suggestion", "-n", namespace, name, "-o", "json", check=False)
        if out.returncode == 0:
            status = json.loads(out.stdout).get("status") or {}
            if len(status.get("suggestions") or []) >= count:
                break
        time.sleep(0.5)
    selector = f"{naming.LABEL_SUGGESTION}={naming.label_value(name)}"
    out = cluster.kubectl("delete", "pod", "-n", namespace, "-l", selector, "--wait=false")
    assert "deleted" in out.stdout, f"no algorithm pod to delete: {out.stdout} {out.stderr}"


def test_hyperband_runs_upstreams_brackets_and_survives_a_restart(
    kubetune: ClusterHandle, ns: str
) -> None:
    cluster, namespace = kubetune, ns
    name = "hyperband"
    experiment = _hyperband(name, namespace, seconds=5)
    cluster.kubectl("create", "-f", "-", stdin=json.dumps(experiment))
    _kill_algorithm_pod_once_assigned(cluster, namespace, name)
    exp = overlay.wait_succeeded(cluster, namespace, name)
    assert _condition(exp, "Succeeded")["reason"] == "ExperimentSuggestionEndReached"

    suggestion = get_json(cluster, "suggestion", "-n", namespace, name)
    order = [s["name"] for s in suggestion["status"]["suggestions"]]
    trials = {
        t["metadata"]["name"]: t
        for t in get_json(cluster, "trial", "-n", namespace)["items"]
        if t["metadata"]["name"].startswith(f"{name}-")
    }
    assert len(order) == 5 and sorted(order) == sorted(trials)

    def point(trial: str) -> dict[str, str]:
        return {p["name"]: p["value"] for p in trials[trial]["spec"]["parameterAssignments"]}

    def accuracy(trial: str) -> float:
        metrics = trials[trial]["status"]["observation"]["metrics"]
        return float(next(m["latest"] for m in metrics if m["name"] == "accuracy"))

    points = [point(t) for t in order]
    # bracket s=1: rung 0 = 2 configurations at 1 epoch, rung 1 = the better one at 2 epochs;
    # bracket s=0: 2 new configurations at 2 epochs.
    assert [p["num-epochs"] for p in points] == ["1", "1", "2", "2", "2"]
    best = max(order[:2], key=accuracy)
    assert {k: v for k, v in points[2].items() if k != "num-epochs"} == {
        k: v for k, v in point(best).items() if k != "num-epochs"
    }
    fresh = {(p["lr"], p["num-layers"]) for p in points[:2] + points[3:]}
    assert len(fresh) == 4
    for trial in order:
        assert _condition(trials[trial], "Succeeded").get("status") == "True"


def _structure(cluster: ClusterHandle, namespace: str, name: str) -> list[dict[str, str]]:
    """The assignments in Suggestion order, each checked against its succeeded Trial."""
    suggestion = get_json(cluster, "suggestion", "-n", namespace, name)
    trials = {
        t["metadata"]["name"]: t
        for t in get_json(cluster, "trial", "-n", namespace)["items"]
        if t["metadata"]["name"].startswith(f"{name}-")
    }
    order = [entry["name"] for entry in suggestion["status"]["suggestions"]]
    assert sorted(order) == sorted(trials)
    for trial in order:
        assert _condition(trials[trial], "Succeeded").get("status") == "True"
    return [
        {p["name"]: p["value"] for p in trials[t]["spec"]["parameterAssignments"]} for t in order
    ]


@pytest.mark.parametrize("policy", ["FromVolume", "LongRunning"])
def test_hyperband_continues_its_schedule_after_a_restart(
    kubetune: ClusterHandle, ns: str, policy: str
) -> None:
    """maxTrialCount 3 ends the Experiment after bracket s=1 (2 at 1 epoch, the best at 2);
    raised to 5 it restarts, and the algorithm (a new pod with FromVolume, the same one with
    LongRunning) hands out bracket s=0: 2 new configurations at 2 epochs."""
    cluster, namespace = kubetune, ns
    name = f"hb-{policy.lower()}"
    experiment = _hyperband(name, namespace)
    experiment["spec"]["resumePolicy"] = policy
    experiment["spec"]["maxTrialCount"] = 3
    cluster.kubectl("create", "-f", "-", stdin=json.dumps(experiment))
    exp = overlay.wait_succeeded(cluster, namespace, name)
    assert _condition(exp, "Succeeded")["reason"] == "ExperimentMaxTrialsReached"
    first = _structure(cluster, namespace, name)
    assert [p["num-epochs"] for p in first] == ["1", "1", "2"]
    if policy == "FromVolume":
        deadline = time.monotonic() + 60
        while (
            time.monotonic() < deadline
            and cluster.kubectl(
                "get", "deployment", "-n", namespace, f"{name}-hyperband", check=False
            ).returncode
            == 0
        ):
            time.sleep(1)
    cluster.kubectl(
        "patch", "experiment", name, "-n", namespace, "--type=merge",
        "-p", '{"spec":{"maxTrialCount":5}}',
    )  # fmt: skip
    deadline = time.monotonic() + overlay.EXPERIMENT_TIMEOUT
    while time.monotonic() < deadline:
        status = get_json(cluster, "experiment", "-n", namespace, name)["status"]
        if (status.get("trials") or 0) >= 5:
            break
        time.sleep(2)
    overlay.wait_succeeded(cluster, namespace, name)
    after = _structure(cluster, namespace, name)
    assert after[:3] == first
    assert [p["num-epochs"] for p in after] == ["1", "1", "2", "2", "2"]
    assert len({(p["lr"], p["num-layers"]) for p in after[:2] + after[3:]}) == 4


CHECKPOINT_DIR = "/var/log/katib/checkpoints/"  # as Katib's simple-pbt.yaml
TRAIN_ONE_STEP = (
    "import json, os, sys\n"
    "lr, path = float(sys.argv[1]), os.path.join(sys.argv[2], 'checkpoint.json')\n"
    "state = json.load(open(path)) if os.path.exists(path) else {'step': 0, 'score': 0.0}\n"
    "state = {'step': state['step'] + 1, 'score': state['score'] + lr}\n"
    "json.dump(state, open(path, 'w'))\n"
    "print('step=' + str(state['step']))\n"
    "print('accuracy=' + str(round(state['score'], 6)))\n"
)


def _pbt(name: str, namespace: str) -> Obj:
    experiment = overlay._experiment(name, namespace, "FromVolume")
    spec = experiment["spec"]
    spec["algorithm"] = {
        "algorithmName": "pbt",
        "algorithmSettings": [
            {"name": "suggestion_trial_dir", "value": CHECKPOINT_DIR},
            {"name": "n_population", "value": "5"},
            {"name": "truncation_threshold", "value": "0.4"},
        ],
    }
    spec["objective"] = {
        "type": "maximize",
        "objectiveMetricName": "accuracy",
        "additionalMetricNames": ["step"],
    }
    spec["parallelTrialCount"] = 3
    spec["maxTrialCount"] = 15
    spec["maxFailedTrialCount"] = 3
    container = spec["trialTemplate"]["trialSpec"]["spec"]["template"]["spec"]["containers"][0]
    container["command"] = python_code(
        TRAIN_ONE_STEP, "${trialParameters.learningRate}", CHECKPOINT_DIR
    )
    return experiment


def test_pbt_generations_share_checkpoints_through_the_suggestion_volume(
    kubetune: ClusterHandle, ns: str
) -> None:
    cluster, namespace = kubetune, ns
    name = "pbt"
    cluster.kubectl("create", "-f", "-", stdin=json.dumps(_pbt(name, namespace)))
    _kill_algorithm_pod_once_assigned(cluster, namespace, name, count=3)
    exp = overlay.wait_succeeded(cluster, namespace, name)
    assert _condition(exp, "Succeeded")["reason"] == "ExperimentMaxTrialsReached"

    trials = {
        t["metadata"]["name"]: t
        for t in get_json(cluster, "trial", "-n", namespace)["items"]
        if t["metadata"]["name"].startswith(f"{name}-")
    }

    def metric(trial: str, metric_name: str) -> float:
        metrics = trials[trial]["status"]["observation"]["metrics"]
        return float(next(m["latest"] for m in metrics if m["name"] == metric_name))

    generation_label = "pbt.suggestion.katib.kubeflow.org/generation"
    parent_label = "pbt.suggestion.katib.kubeflow.org/parent"
    generation = {t: int(o["metadata"]["labels"][generation_label]) for t, o in trials.items()}
    sizes = [list(generation.values()).count(g) for g in range(max(generation.values()) + 1)]
    assert len(trials) == 15 and sizes[0] == 5 and len(sizes) >= 3, sizes
    assert all(0 < size <= 5 for size in sizes), sizes
    parents: dict[int, set[str]] = {}
    for trial, g in generation.items():
        labels = trials[trial]["metadata"]["labels"]
        if g == 0:
            assert parent_label not in labels
            assert metric(trial, "step") == 1
            continue
        parent = labels[parent_label]
        assert generation[parent] == g - 1
        parents.setdefault(g, set()).add(parent)
        # restored the parent's checkpoint (copied into this trial's directory), one step more
        assert metric(trial, "step") == metric(parent, "step") + 1
    for g, chosen in parents.items():  # a generation starts once the previous one ended
        previous = [t for t, h in generation.items() if h == g - 1]
        worst = min(previous, key=lambda t: metric(t, "accuracy"))
        assert worst not in chosen  # exploited: its successor continues a better member


# -- a team's own algorithm as a Katib gRPC image, through kubetune's bridge --------------------

KATIB_GRID_IMAGE = "example.com/kubetune-tests/katib-grid:1"
"""Run by the node agent as testkit's `katib-test-algorithm suggestion` (conftest's image map):
a Katib gRPC Suggestion server (the kubeflow-katib package's servicer) handing out a grid in
order, its position kept under /opt/katib/data (the FromVolume volume)."""


def _add_katib_grid(cluster: ClusterHandle) -> None:
    """katib-config gets the image's entry (modelled on random's, so its volume is the local
    overlay's hostPath one); the webhook and the suggestion-controller read it at start, so
    their pods are replaced. The entry only adds an algorithm: later tests are unaffected."""
    cm = get_json(cluster, "configmap", "-n", "kubeflow", "katib-config")
    document = yaml.safe_load(cm["data"]["katib-config.yaml"])
    entries = document["runtime"]["suggestions"]
    if any(e["algorithmName"] == "katib-grid" for e in entries):
        return
    port = free_port()  # the pod shares the host's network: Katib's 6789 may be taken
    random_entry = next(e for e in entries if e["algorithmName"] == "random")
    entry = {
        **{k: v for k, v in random_entry.items() if k not in ("command", "args", "image")},
        "algorithmName": "katib-grid",
        "image": KATIB_GRID_IMAGE,
        "env": [{"name": "KATIB_TEST_PORT", "value": str(port)}],
        "ports": [{"containerPort": port}],
    }
    entries.append(entry)
    cm["data"]["katib-config.yaml"] = yaml.safe_dump(document, sort_keys=False)
    cluster.kubectl("replace", "-f", "-", stdin=json.dumps(cm))
    for service in ("webhook", "suggestion-controller"):
        selector = f"app.kubernetes.io/name=kubetune-{service}"
        old = {
            p["metadata"]["uid"]
            for p in get_json(cluster, "pods", "-n", "kubeflow", "-l", selector)["items"]
        }
        assert old, f"no pod of {service} ({selector})"
        cluster.kubectl("delete", "pods", "-n", "kubeflow", "-l", selector, "--wait=false")

        def replaced(selector: str = selector, old: set[str] = old) -> bool:
            pods = get_json(cluster, "pods", "-n", "kubeflow", "-l", selector)["items"]
            return any(
                p["metadata"]["uid"] not in old
                and not p["metadata"].get("deletionTimestamp")
                and _condition(p, "Ready").get("status") == "True"
                for p in pods
            )

        wait_for(f"a new {service} pod", replaced, 180, interval=1)


def _grid_experiment(name: str, namespace: str, settings: list[Obj]) -> Obj:
    experiment = overlay._experiment(name, namespace, "FromVolume")
    spec = experiment["spec"]
    spec["algorithm"] = {"algorithmName": "katib-grid", "algorithmSettings": settings}
    spec["parameters"] = [
        {"name": "lr", "parameterType": "double", "feasibleSpace": {"min": "0.01", "max": "0.05"}}
    ]
    spec["parallelTrialCount"] = 1
    spec["maxTrialCount"] = 5
    spec["objective"] = {"type": "maximize", "objectiveMetricName": "accuracy"}
    # Each Trial trains 2 s, so the algorithm's pod is still there to be killed after the third
    # assignment (Trials that only print their score let the five end within a poll or two).
    container = spec["trialTemplate"]["trialSpec"]["spec"]["template"]["spec"]["containers"][0]
    container["command"] = python_code(
        "import sys, time; time.sleep(2); print('accuracy=' + sys.argv[1])",
        "${trialParameters.learningRate}",
    )
    return experiment


def test_a_katib_grpc_algorithm_image_runs_an_experiment_through_the_bridge(
    kubetune: ClusterHandle, ns: str
) -> None:
    cluster, namespace = kubetune, ns
    _add_katib_grid(cluster)

    # The image refuses settings it does not know: Suggestion and Experiment Failed, as upstream.
    refused = _grid_experiment("refused", namespace, [{"name": "bogus", "value": "1"}])
    cluster.kubectl("create", "-f", "-", stdin=json.dumps(refused))

    def failed() -> Obj | None:
        exp = get_json(cluster, "experiment", "-n", namespace, "refused")
        return exp if _condition(exp, "Failed").get("status") == "True" else None

    wait_for("the refused Experiment to fail", failed, overlay.EXPERIMENT_TIMEOUT, interval=1)
    suggestion = get_json(cluster, "suggestion", "-n", namespace, "refused")
    assert _condition(suggestion, "Failed")["message"] == (
        "Validation failed: ValidateAlgorithmSettings Error: unknown setting(s) bogus for the grid"
    )
    cluster.kubectl("delete", "experiment", "-n", namespace, "refused")

    # A whole Experiment; the algorithm's pod dies halfway and comes back on its volume.
    name = "katib-grid"
    grid = _grid_experiment(name, namespace, [{"name": "step", "value": "0.01"}])
    cluster.kubectl("create", "-f", "-", stdin=json.dumps(grid))
    deployment = get_json_when(cluster, "deployment", namespace, f"{name}-katib-grid")
    containers = [c["name"] for c in deployment["spec"]["template"]["spec"]["containers"]]
    assert containers == ["suggestion", "kubetune-bridge"]
    _kill_algorithm_pod_once_assigned(cluster, namespace, name, count=3)
    exp = overlay.wait_succeeded(cluster, namespace, name)
    assert exp["status"]["trialsSucceeded"] == 5

    suggestion = get_json(cluster, "suggestion", "-n", namespace, name)
    order = [s["name"] for s in suggestion["status"]["suggestions"]]
    trials = {
        t["metadata"]["name"]: t
        for t in get_json(cluster, "trial", "-n", namespace)["items"]
        if t["metadata"]["name"] in order
    }
    values = [trials[t]["spec"]["parameterAssignments"][0]["value"] for t in order]
    # The grid in order, each point once: the restarted image continued from its volume (a
    # fresh one would have handed out 0.01 again).
    assert values == ["0.01", "0.02", "0.03", "0.04", "0.05"]
    settings = {s["name"]: s["value"] for s in suggestion["status"]["algorithmSettings"]}
    assert settings["handed_out"] == "5"  # the image's own setting, through GetSuggestions


def get_json_when(cluster: ClusterHandle, kind: str, namespace: str, name: str) -> Obj:
    """The object once it exists."""

    def found() -> Obj | None:
        out = cluster.kubectl("get", kind, "-n", namespace, name, "-o", "json", check=False)
        return json.loads(out.stdout) if out.returncode == 0 else None

    return wait_for(f"{kind} {name}", found, overlay.EXPERIMENT_TIMEOUT, interval=1)
