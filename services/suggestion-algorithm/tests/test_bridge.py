"""`suggestion-algorithm bridge` beside a Katib gRPC algorithm: the requests as upstream's
suggestion client builds them, and the whole loop against a real API server with a real
Katib-protocol server (testkit's `katib-test-algorithm`, the kubeflow-katib package's servicers).

The tests play the experiment-controller (Suggestion requests, Trials) and the trial-controller
and collector (Trial conditions and observations).
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kubetune import naming
from kubetune.api.common import AlgorithmSetting
from kubetune.api.experiment import Experiment
from kubetune.api.trial import Trial
from kubetune.kube import EXPERIMENTS, SUGGESTIONS, TRIALS, Kube
from kubetune_suggestion_algorithm import bridge
from kubetune_testkit import builders, katibimages
from kubetune_testkit.processes import ServiceProcess, free_port
from kubetune_testkit.waiting import wait_for

PARAMETERS = [
    {
        "name": "x",
        "parameterType": "double",
        "feasibleSpace": {"min": "0", "max": "1", "step": "0.5"},
    },
    {"name": "n", "parameterType": "categorical", "feasibleSpace": {"list": ["a", "b"]}},
]
GRID = [
    {"x": x, "n": n} for x in ("0", "0.5", "1.0") for n in ("a", "b")
]  # the test server's order: first parameter slowest


def _experiment(**spec: Any) -> Experiment:
    return Experiment.model_validate(
        builders.experiment(
            "exp",
            "team",
            algorithm=builders.algorithm_spec("my-grid", {"step": "0.5"}),
            objective_spec=builders.objective("acc", goal=0.99, additional=["loss"]),
            parameters=PARAMETERS,
            parallelTrialCount=2,
            maxTrialCount=6,
            **spec,
        )
    )


def _trial(name: str, conditions: list[str], metrics: list[dict[str, str]] | None) -> Trial:
    body = builders.trial(
        name,
        objective_spec={
            **builders.objective("acc", additional=["loss"]),
            "metricStrategies": [
                {"name": "acc", "value": "max"},
                {"name": "loss", "value": "min"},
            ],
        },
        assignments={"x": "0", "n": "a"},
    )
    body["spec"]["labels"] = {"generation": "1"}
    body["status"] = {
        "startTime": "2026-01-02T03:04:05Z",
        "completionTime": "2026-01-02T03:14:05.123456Z",
        "conditions": [{"type": c, "status": "True"} for c in conditions],
    }
    if metrics is not None:
        body["status"]["observation"] = {"metrics": metrics}
    return Trial.model_validate(body)


def test_the_experiment_goes_as_upstream_converts_it_with_the_status_settings_over_it() -> None:
    message = bridge.experiment_message(
        _experiment(earlyStopping={"algorithmName": "my-stop", "algorithmSettings": []}),
        [
            AlgorithmSetting(name="step", value="0.25"),
            AlgorithmSetting(name="handed_out", value="4"),
            AlgorithmSetting(name="search_exhausted", value="true"),  # kubetune's, not sent
            AlgorithmSetting(name="kubetune_validation_failed", value="x"),  # kubetune's
        ],
    )
    assert message.name == "exp"
    settings = [(s.name, s.value) for s in message.spec.algorithm.algorithm_settings]
    assert settings == [("step", "0.25"), ("handed_out", "4")]
    assert message.spec.algorithm.algorithm_name == "my-grid"
    assert message.spec.objective.type == bridge.pb.MAXIMIZE
    assert message.spec.objective.goal == pytest.approx(0.99)
    assert list(message.spec.objective.additional_metric_names) == ["loss"]
    x, n = message.spec.parameter_specs.parameters
    assert (x.name, x.parameter_type, x.feasible_space.min, x.feasible_space.step) == (
        "x",
        bridge.pb.DOUBLE,
        "0",
        "0.5",
    )
    assert (n.parameter_type, list(n.feasible_space.list)) == (bridge.pb.CATEGORICAL, ["a", "b"])
    assert (message.spec.parallel_trial_count, message.spec.max_trial_count) == (2, 6)
    assert message.spec.early_stopping.algorithm_name == "my-stop"


def test_trials_go_as_upstream_converts_them() -> None:
    metrics = [
        {"name": "acc", "min": "0.1", "max": "0.9", "latest": "0.8"},
        {"name": "loss", "min": "unavailable", "max": "unavailable", "latest": "0.3"},
        {"name": "other", "min": "1", "max": "2", "latest": "3"},
    ]
    trials = [
        _trial("exp-b", ["Created", "Running", "Succeeded"], metrics),
        _trial("exp-a", ["Created", "Running"], None),
        _trial("exp-c", ["Created", "Running", "Failed", "MetricsUnavailable"], None),
    ]
    sent = bridge.trial_messages(trials)
    assert [t.name for t in sent] == ["exp-a", "exp-b"]  # name order; MetricsUnavailable left out
    running, done = sent
    assert running.status.condition == bridge.pb.TrialStatus.RUNNING
    assert done.status.condition == bridge.pb.TrialStatus.SUCCEEDED  # the last condition only
    values = {m.name: m.value for m in done.status.observation.metrics}
    # max for acc, min for loss falling back to latest, no strategy: empty (upstream's switch)
    assert values == {"acc": "0.9", "loss": "0.3", "other": ""}
    assert done.status.start_time == "2026-01-02T03:04:05Z"
    assert done.status.completion_time == "2026-01-02T03:14:05Z"
    assert [(a.name, a.value) for a in done.spec.parameter_assignments.assignments] == [
        ("x", "0"),
        ("n", "a"),
    ]
    assert dict(done.spec.labels) == {"generation": "1"}
    assert done.spec.objective.objective_metric_name == "acc"
    assert not running.status.observation.metrics


def test_reply_settings_merge_as_upstream_updates_them() -> None:
    class Setting:
        def __init__(self, name: str, value: str) -> None:
            self.name, self.value = name, value

    current = [AlgorithmSetting(name="a", value="1"), AlgorithmSetting(name="b", value="2")]
    out = bridge.merged(current, [Setting("b", "3"), Setting("c", "4")])
    assert [(s.name, s.value) for s in out] == [("a", "1"), ("b", "3"), ("c", "4")]


# -- against the API server, with the real processes -------------------------------------------


@pytest.fixture
def katib_image(services: Callable[..., ServiceProcess], tmp_path: Path) -> Callable[..., Any]:
    """`katib_image(service)` starts the Katib-protocol test server on a free port, its state
    under the test's `volume` directory (what FromVolume keeps); returns (process, port)."""

    def start(service: str = "both", port: int | None = None) -> tuple[ServiceProcess, int]:
        port = port or free_port()
        process = services(
            "katib-test-algorithm",
            service,
            "--port",
            str(port),
            "--state",
            str(tmp_path / "volume"),
        ).start()
        return process, port

    return start


@pytest.fixture
def start_bridge(
    cluster: Any,
    namespace: str,
    crds: None,
    services: Callable[..., ServiceProcess],
    tmp_path: Path,
) -> Callable[..., ServiceProcess]:
    def start(port: int, *extra: str) -> ServiceProcess:
        return services(
            "suggestion-algorithm",
            "bridge",
            "--kubeconfig",
            cluster.kubeconfig,
            "--suggestion",
            "exp",
            "--namespace",
            namespace,
            "--endpoint",
            f"127.0.0.1:{port}",
            "--data-dir",
            str(tmp_path / "bridge"),
            "--resync-period",
            "2",
            "--grpc-timeout",
            "20",
            *extra,
        ).start()

    return start


def _create(
    kube: Kube, namespace: str, settings: dict[str, str], requests: int, **spec: Any
) -> None:
    algorithm = builders.algorithm_spec("my-grid", settings)
    experiment = builders.experiment(
        "exp",
        namespace,
        objective_spec=builders.objective("acc"),
        algorithm=algorithm,
        parameters=PARAMETERS,
        **spec,
    )
    kube.create(EXPERIMENTS, experiment, namespace)
    suggestion = builders.suggestion("exp", namespace, algorithm=algorithm, requests=requests)
    if "earlyStopping" in spec:
        suggestion["spec"]["earlyStopping"] = spec["earlyStopping"]
    kube.create(SUGGESTIONS, suggestion, namespace)


def _status(kube: Kube, namespace: str) -> dict[str, Any]:
    return dict(kube.get(SUGGESTIONS, "exp", namespace).get("status") or {})


def _assigned(kube: Kube, namespace: str, count: int) -> list[dict[str, Any]] | None:
    entries = list(_status(kube, namespace).get("suggestions") or [])
    return entries if len(entries) >= count else None


def _values(entry: dict[str, Any]) -> dict[str, str]:
    return {p["name"]: p["value"] for p in entry["parameterAssignments"]}


def _request(kube: Kube, namespace: str, requests: int) -> None:
    kube.patch(SUGGESTIONS, "exp", {"spec": {"requests": requests}}, namespace)


def _finish(kube: Kube, namespace: str, entry: dict[str, Any], acc: str, state: str) -> None:
    """Create the assignment's Trial and end it (experiment-controller, trial-controller and
    collector played by the test)."""
    body = builders.trial(
        entry["name"], objective_spec=builders.objective("acc"), assignments=_values(entry)
    )
    kube.create(TRIALS, body, namespace)
    status: dict[str, Any] = {
        "conditions": [
            {"type": "Created", "status": "True", "reason": "TrialCreated"},
            {"type": "Running", "status": "False", "reason": "TrialRunning"},
            {"type": state, "status": "True", "reason": f"Trial{state}"},
        ],
        "observation": {"metrics": [{"name": "acc", "min": acc, "max": acc, "latest": acc}]},
    }
    kube.patch(TRIALS, entry["name"], {"status": status}, namespace, subresource="status")


def _restart(
    bridge: ServiceProcess, start_bridge: Callable[..., ServiceProcess], *args: Any
) -> ServiceProcess:
    """A new bridge in place of `bridge`, so its next pass sees every Trial change made so far:
    a running one watches Trials and its Suggestion separately and may take a request before a
    Trial's change (as upstream's cache may); a new one lists the Trials before its first pass."""
    bridge.stop()
    return start_bridge(*args)


@pytest.mark.integration
def test_a_katib_grpc_algorithm_drives_the_suggestion_and_survives_a_restart_on_its_volume(
    kube: Kube,
    namespace: str,
    katib_image: Callable[..., Any],
    start_bridge: Callable[..., ServiceProcess],
    tmp_path: Path,
) -> None:
    _create(kube, namespace, {}, 2)
    server, port = katib_image("suggestion")
    bridge = start_bridge(port)

    first = wait_for("2 assignments", lambda: _assigned(kube, namespace, 2))
    assert [e["name"] for e in first] == [naming.trial_name("exp", str(i)) for i in range(2)]
    assert [_values(e) for e in first] == GRID[:2]
    assert first[0]["labels"] == {"grid-index": "0"}
    settings = {s["name"]: s["value"] for s in _status(kube, namespace)["algorithmSettings"]}
    assert settings == {"handed_out": "2"}  # the reply's algorithm settings, as upstream

    _finish(kube, namespace, first[0], "0.7", "Succeeded")
    _finish(kube, namespace, first[1], "0.2", "Failed")
    _restart(bridge, start_bridge, port)  # the request below surely carries both outcomes
    _request(kube, namespace, 4)
    both = wait_for("4 assignments", lambda: _assigned(kube, namespace, 4))
    assert [_values(e) for e in both[2:]] == GRID[2:4]

    asked = [
        r for r in katibimages.read_requests(tmp_path / "volume") if r["method"] == "GetSuggestions"
    ]
    last = asked[-1]["request"]
    assert (last["currentRequestNumber"], last["totalRequestNumber"]) == (2, 4)
    sent = {t["name"]: t for t in last["trials"]}
    assert set(sent) == {first[0]["name"], first[1]["name"]}
    assert sent[first[0]["name"]]["status"]["condition"] == "SUCCEEDED"
    assert sent[first[0]["name"]]["status"]["observation"]["metrics"] == [
        {"name": "acc", "value": "0.7"}
    ]
    assert sent[first[1]["name"]]["status"]["condition"] == "FAILED"
    # the status settings went back to the image, laid over the Experiment's
    assert {"name": "handed_out", "value": "2"} in last["experiment"]["spec"]["algorithm"][
        "algorithmSettings"
    ]
    validations = [
        r
        for r in katibimages.read_requests(tmp_path / "volume")
        if r["method"] == "ValidateAlgorithmSettings"
    ]
    assert len(validations) == 2  # once per bridge started, before its first GetSuggestions

    # The algorithm's container dies; a new one starts on the same volume (FromVolume).
    server.popen.send_signal(signal.SIGKILL)
    server.popen.wait(10)
    katib_image("suggestion", port)
    _request(kube, namespace, 6)
    all_six = wait_for("6 assignments", lambda: _assigned(kube, namespace, 6))
    assert [_values(e) for e in all_six[4:]] == GRID[4:6]  # continued, not restarted
    assert _status(kube, namespace)["suggestionCount"] == 6


@pytest.mark.integration
def test_the_images_refusal_lands_in_the_status_for_the_suggestion_controller(
    kube: Kube,
    namespace: str,
    katib_image: Callable[..., Any],
    start_bridge: Callable[..., ServiceProcess],
) -> None:
    _create(kube, namespace, {"no_such_setting": "1"}, 2)
    _, port = katib_image("suggestion")
    process = start_bridge(port)

    def refusal() -> str | None:
        for s in _status(kube, namespace).get("algorithmSettings") or []:
            if s["name"] == "kubetune_validation_failed":
                return str(s["value"])
        return None

    message = wait_for("the refusal", refusal)
    assert message == (
        "ValidateAlgorithmSettings Error: unknown setting(s) no_such_setting for the grid"
    )
    assert not _status(kube, namespace).get("suggestions")
    assert process.popen.poll() is None  # it waits, no crash loop


@pytest.mark.integration
def test_a_katib_early_stopping_image_gives_the_rules_and_hears_of_early_stops(
    kube: Kube,
    namespace: str,
    katib_image: Callable[..., Any],
    start_bridge: Callable[..., ServiceProcess],
    tmp_path: Path,
) -> None:
    early = {
        "algorithmName": "my-stop",
        "algorithmSettings": [{"name": "min_value", "value": "0.6"}],
    }
    _create(kube, namespace, {}, 1, earlyStopping=early)
    _, port = katib_image("both")
    bridge = start_bridge(port, "--early-stopping-endpoint", f"127.0.0.1:{port}")

    (first,) = wait_for("1 assignment", lambda: _assigned(kube, namespace, 1))
    assert "earlyStoppingRules" not in first  # no Succeeded Trial yet: no rule
    _finish(kube, namespace, first, "0.9", "Succeeded")
    # the image's rules then surely count the Succeeded Trial
    _restart(bridge, start_bridge, port, "--early-stopping-endpoint", f"127.0.0.1:{port}")
    _request(kube, namespace, 3)
    entries = wait_for("3 assignments", lambda: _assigned(kube, namespace, 3))
    rule = {"name": "acc", "value": "0.6", "comparison": "less", "startStep": 2}
    assert entries[1]["earlyStoppingRules"] == [rule]
    assert entries[2]["earlyStoppingRules"] == [rule]

    _finish(kube, namespace, entries[1], "0.1", "EarlyStopped")
    _request(kube, namespace, 4)
    wait_for("4 assignments", lambda: _assigned(kube, namespace, 4))

    def told() -> list[str] | None:
        names = [
            r["request"]["trialName"]
            for r in katibimages.read_requests(tmp_path / "volume")
            if r["method"] == "SetTrialStatus"
        ]
        return names or None

    assert wait_for("SetTrialStatus", told) == [entries[1]["name"]]
    methods = [r["method"] for r in katibimages.read_requests(tmp_path / "volume")]
    assert methods.count("ValidateEarlyStoppingSettings") == 2  # once per bridge started
    asked = [
        r["request"]
        for r in katibimages.read_requests(tmp_path / "volume")
        if r["method"] == "GetEarlyStoppingRules"
    ]
    assert asked[-1]["dbManagerAddress"] == "katib-db-manager.kubeflow:6789"
