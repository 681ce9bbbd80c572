"""Katib-protocol algorithm images: the pod Katib would run plus kubetune's bridge sidecar, and
the image's refusal of the settings (reported by the sidecar) failing the Suggestion."""

from __future__ import annotations

from typing import Any

from kubetune import config
from kubetune.api.experiment import Experiment
from kubetune.api.suggestion import Suggestion
from kubetune_suggestion_controller import composing, deciding

CUSTOM = "example.com/team/my-algorithm:1"


def _suggestion(algorithm: str = "my-grid", **status: Any) -> Suggestion:
    return Suggestion.model_validate(
        {
            "metadata": {"name": "exp", "namespace": "team", "uid": "u-1"},
            "spec": {"algorithm": {"algorithmName": algorithm}, "requests": 3},
            "status": status,
        }
    )


def _config(**extra: Any) -> config.KatibConfig:
    base = config.default()
    base.runtime.suggestions.append(
        config.SuggestionConfig.model_validate(
            {
                "algorithmName": "my-grid",
                "image": CUSTOM,
                "env": [{"name": "GRID_STEPS", "value": "4"}],
                "args": ["--verbose"],
                "resources": {"limits": {"memory": "300Mi"}},
                **extra,
            }
        )
    )
    return base


def test_the_marker_is_explicit_or_detected() -> None:
    def entry(**fields: Any) -> config.SuggestionConfig:
        return config.SuggestionConfig.model_validate({"image": "img", **fields})

    assert entry(algorithmName="my-grid").katib_grpc()  # not an algorithm kubetune has
    assert entry(algorithmName="random", image="docker.io/kubeflowkatib/suggestion-hyperopt:v0")
    assert entry(
        algorithmName="random", image="docker.io/kubeflowkatib/suggestion-hyperopt:v0"
    ).katib_grpc()
    assert entry(algorithmName="random", protocol="katib-grpc").katib_grpc()
    assert not entry(algorithmName="random").katib_grpc()
    assert not entry(algorithmName="my-grid", protocol="kubetune").katib_grpc()


def test_the_katib_image_runs_as_katib_runs_it_beside_the_bridge_sidecar() -> None:
    cfg = _config(volumeMountPath="/state")
    entry = cfg.suggestion("my-grid")
    body = composing.deployment(
        _suggestion(), entry, True, bridge_image=cfg.bridge_image(entry), early_stopping=None
    )
    spec = body["spec"]["template"]["spec"]
    assert spec["serviceAccountName"] == "kubetune-suggestion-algorithm"
    algorithm, bridge = spec["containers"]
    assert algorithm["name"] == "suggestion"
    assert algorithm["image"] == CUSTOM
    assert "command" not in algorithm  # the image's own entrypoint, as Katib
    assert algorithm["args"] == ["--verbose"]
    assert algorithm["env"] == [{"name": "GRID_STEPS", "value": "4"}]
    assert algorithm["ports"] == [{"name": "api", "containerPort": 6789}]
    assert algorithm["resources"] == {"limits": {"memory": "300Mi"}}
    assert algorithm["volumeMounts"] == [{"name": "suggestion-volume", "mountPath": "/state"}]
    assert "readinessProbe" not in algorithm

    assert bridge["name"] == "kubetune-bridge"
    assert bridge["image"] == config.SUGGESTION_IMAGE
    assert bridge["command"] == ["suggestion-algorithm"]
    assert bridge["args"][:5] == ["bridge", "--suggestion", "exp", "--endpoint", "localhost:6789"]
    assert "--early-stopping-endpoint" not in bridge["args"]
    assert {m["name"] for m in bridge["volumeMounts"]} == {"kubetune-bridge", "kube-api-access"}
    assert bridge["readinessProbe"]["exec"]["command"][0] == "cat"
    assert {v["name"] for v in spec["volumes"]} == {
        "suggestion-volume",
        "kubetune-bridge",
        "kube-api-access",
    }
    assert {"name": "kubetune-bridge", "emptyDir": {}} in spec["volumes"]


def test_a_katib_early_stopping_image_joins_the_pod_on_6788() -> None:
    cfg = _config(bridgeImage="registry.example.com/kubetune/suggestion-algorithm:2")
    entry = cfg.suggestion("my-grid")
    early = config.EarlyStoppingConfig.model_validate(
        {"algorithmName": "my-stop", "image": "example.com/stop:1"}
    )
    body = composing.deployment(
        _suggestion(), entry, False, bridge_image=cfg.bridge_image(entry), early_stopping=early
    )
    names = [c["name"] for c in body["spec"]["template"]["spec"]["containers"]]
    assert names == ["suggestion", "early-stopping", "kubetune-bridge"]
    _, stopper, bridge = body["spec"]["template"]["spec"]["containers"]
    assert stopper["image"] == "example.com/stop:1"
    assert stopper["ports"] == [{"name": "earlystop-api", "containerPort": 6788}]
    assert bridge["image"] == "registry.example.com/kubetune/suggestion-algorithm:2"
    args = bridge["args"]
    assert args[args.index("--early-stopping-endpoint") + 1] == "localhost:6788"


def test_kubetune_settings_rules_do_not_judge_a_katib_image() -> None:
    cfg = _config()
    cfg.runtime.suggestions.append(
        config.SuggestionConfig(algorithm_name="random", image="x", protocol="katib-grpc")
    )
    experiment = Experiment.model_validate(
        {"metadata": {"name": "exp", "namespace": "team"}, "spec": {"parameters": []}}
    )
    suggestion = _suggestion("random")
    suggestion.spec.algorithm.algorithm_settings = [  # type: ignore[union-attr]
        {"name": "whatever_the_image_knows", "value": "1"}  # type: ignore[list-item]
    ]
    assert deciding.problems_of(suggestion, experiment, cfg) == []
    assert deciding.problems_of(_suggestion(), experiment, cfg) == []
    # kubetune's own entry still validates with kubetune's rules
    assert deciding.problems_of(_suggestion("random"), experiment, config.default()) == []
    assert deciding.problems_of(suggestion, experiment, config.default())


def test_the_images_refusal_fails_the_suggestion_with_upstreams_message() -> None:
    refusal = "ValidateAlgorithmSettings Error: grid needs a step for x"
    suggestion = _suggestion(
        conditions=[
            {"type": "Created", "status": "True", "reason": "SuggestionCreated"},
            {"type": "DeploymentReady", "status": "True", "reason": "DeploymentReady"},
            {"type": "Running", "status": "True", "reason": "SuggestionRunning"},
        ],
        algorithmSettings=[{"name": "kubetune_validation_failed", "value": refusal}],
    )
    experiment = Experiment.model_validate(
        {"metadata": {"name": "exp", "namespace": "team"}, "spec": {}}
    )
    seen = deciding.Seen(experiment=experiment, deployment={"status": {"readyReplicas": 1}})
    decision = deciding.decide(suggestion, seen, _config(), now="2026-01-01T00:00:00Z")
    assert decision.status is not None
    failed = [c for c in decision.status["conditions"] if c["type"] == "Failed"]
    assert failed and failed[0]["status"] == "True"
    assert failed[0]["message"] == "Validation failed: " + refusal
    assert not decision.create


def test_kubetunes_algorithm_asks_a_katib_early_stopping_image_beside_it() -> None:
    cfg = config.default()
    early = config.EarlyStoppingConfig.model_validate(
        {"algorithmName": "my-stop", "image": "example.com/stop:1", "args": ["--x"]}
    )
    entry = cfg.suggestion("random")
    body = composing.deployment(_suggestion("random"), entry, False, early_stopping=early)
    algorithm, stopper = body["spec"]["template"]["spec"]["containers"]
    assert algorithm["command"] == ["suggestion-algorithm"]
    assert algorithm["args"][-2:] == ["--early-stopping-endpoint", "localhost:6788"]
    assert stopper["name"] == "early-stopping"
    assert stopper["args"] == ["--x"]


def test_the_deployment_gets_the_experiments_katib_early_stopping_image() -> None:
    cfg = _config()
    cfg.runtime.early_stoppings.append(
        config.EarlyStoppingConfig(algorithm_name="my-stop", image="example.com/stop:1")
    )
    experiment = Experiment.model_validate(
        {
            "metadata": {"name": "exp", "namespace": "team"},
            "spec": {"earlyStopping": {"algorithmName": "my-stop"}},
        }
    )
    suggestion = _suggestion(
        conditions=[{"type": "Created", "status": "True", "reason": "SuggestionCreated"}]
    )
    decision = deciding.decide(
        suggestion, deciding.Seen(experiment=experiment), cfg, now="2026-01-01T00:00:00Z"
    )
    (deployment,) = [o for o in decision.create if o["kind"] == "Deployment"]
    names = [c["name"] for c in deployment["spec"]["template"]["spec"]["containers"]]
    assert names == ["suggestion", "early-stopping", "kubetune-bridge"]


def test_an_entry_may_name_its_images_port() -> None:
    cfg = _config(ports=[{"containerPort": 16789}])
    entry = cfg.suggestion("my-grid")
    body = composing.deployment(_suggestion(), entry, False, bridge_image="b")
    algorithm, bridge = body["spec"]["template"]["spec"]["containers"]
    assert algorithm["ports"] == [{"name": "api", "containerPort": 16789}]
    assert bridge["args"][3:5] == ["--endpoint", "localhost:16789"]


def test_only_the_bridge_gets_the_api_token_not_the_katib_images() -> None:
    cfg = _config()
    early = config.EarlyStoppingConfig(algorithm_name="my-stop", image="example.com/stop:1")
    body = composing.deployment(
        _suggestion(), cfg.suggestion("my-grid"), False, bridge_image="b", early_stopping=early
    )
    spec = body["spec"]["template"]["spec"]
    assert spec["automountServiceAccountToken"] is False
    algorithm, stopper, bridge = spec["containers"]
    token = "/var/run/secrets/kubernetes.io/serviceaccount"
    assert {"name": "kube-api-access", "mountPath": token, "readOnly": True} in bridge[
        "volumeMounts"
    ]
    for image in (algorithm, stopper):
        assert all(m["mountPath"] != token for m in image.get("volumeMounts") or [])
    (access,) = [v for v in spec["volumes"] if v["name"] == "kube-api-access"]
    sources = access["projected"]["sources"]
    assert sources[0]["serviceAccountToken"]["path"] == "token"
    # kubetune's own algorithm pod is left as it was (its one container needs the token)
    own = composing.deployment(_suggestion("random"), cfg.suggestion("random"), False)
    assert "automountServiceAccountToken" not in own["spec"]["template"]["spec"]
