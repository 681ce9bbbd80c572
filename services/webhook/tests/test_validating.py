"""Every validation rule of Katib's webhook, as a table: a manifest and the message it must get."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from webhook_cases import NS, StaticCluster, experiment

from kubetune import config as katib_config
from kubetune import naming
from kubetune_webhook import validating

CONFIG = katib_config.default()
NO_IMAGE_LOOKUP = katib_config.parse(
    katib_config.default_yaml().replace("imageCommandLookup: true", "imageCommandLookup: false")
)
"""An air-gapped cluster's: a missing command is not read from the image's registry."""
CONFIG_WITH_EARLY_STOPPING = katib_config.parse(
    """
runtime:
  suggestions: [{algorithmName: random, image: r:1}]
  metricsCollectors:
    - {kind: StdOut, image: c:1}
    - {kind: File, image: c:1}
    - {kind: TensorFlowEvent, image: c:1}
    - {kind: PrometheusMetric, image: c:1}
  earlyStoppings: [{algorithmName: medianstop, image: m:1}]
"""
)


def _with(path: str, value: Any, base: dict[str, Any] | None = None) -> dict[str, Any]:
    """The valid experiment with one field set (`value` None deletes it)."""
    exp = copy.deepcopy(base) if base is not None else experiment()
    node: Any = exp
    parts = path.split(".")
    for part in parts[:-1]:
        node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
    last = parts[-1]
    if isinstance(node, list):
        node[int(last)] = value
    elif value is None:
        node.pop(last, None)
    else:
        node[last] = value
    return exp


def _problems(manifest: Any, cluster: StaticCluster | None = None, **kw: Any) -> list[str]:
    kw.setdefault("operation", "CREATE")
    kw.setdefault("namespace", NS)
    kw.setdefault("config", CONFIG)
    return validating.validate(
        manifest, kw.pop("old", None), cluster=cluster or StaticCluster(), **kw
    )


def _tfjob(kind: str = "TFJob") -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": kind,
        "spec": {"x": "${trialParameters.learningRate} ${trialParameters.optimizer}"},
    }


TEMPLATE = "spec.trialTemplate"
MC = "spec.metricsCollectorSpec"

# (id, manifest, expected substring; None = allowed)
CASES: list[tuple[str, dict[str, Any], str | None]] = [
    ("valid", experiment(), None),
    # 1 name
    (
        "name-uppercase",
        _with("metadata.name", "Random"),
        "metadata.name: 'Random' must start with a lowercase",
    ),
    ("name-digit-first", _with("metadata.name", "1234-test"), "must start with a lowercase letter"),
    ("name-too-long", _with("metadata.name", "a" * 41), "is 41 characters long; use at most 40"),
    ("name-40-ok", _with("metadata.name", "a" * 40), None),
    # 2 counts
    (
        "max-failed-negative",
        _with("spec.maxFailedTrialCount", -1),
        "spec.maxFailedTrialCount: -1 is negative",
    ),
    ("max-failed-zero-ok", _with("spec.maxFailedTrialCount", 0), None),
    (
        "max-trial-zero",
        _with("spec.maxTrialCount", 0),
        "spec.maxTrialCount: 0 must be greater than 0",
    ),
    (
        "parallel-zero",
        _with("spec.parallelTrialCount", 0),
        "spec.parallelTrialCount: 0 must be greater than 0",
    ),
    # 3 counts against max
    (
        "max-failed-above-max",
        _with("spec.maxFailedTrialCount", 7),
        "spec.maxFailedTrialCount: 7 is greater than spec.maxTrialCount 6",
    ),
    (
        "parallel-above-max",
        _with("spec.parallelTrialCount", 7),
        "spec.parallelTrialCount: 7 is greater than spec.maxTrialCount 6",
    ),
    ("parallel-equal-max-ok", _with("spec.parallelTrialCount", 6), None),
    ("no-max-ok", _with("spec.maxTrialCount", None), None),
    # 5 objective
    ("objective-missing", _with("spec.objective", None), "spec.objective: required"),
    (
        "objective-type-missing",
        _with("spec.objective.type", None),
        "spec.objective.type: must be minimize or maximize",
    ),
    (
        "objective-type-bad",
        _with("spec.objective.type", "biggest"),
        "spec.objective.type: invalid type 'biggest'",
    ),
    (
        "objective-metric-missing",
        _with("spec.objective.objectiveMetricName", ""),
        "spec.objective.objectiveMetricName: required",
    ),
    (
        "objective-in-additional",
        _with("spec.objective.additionalMetricNames", ["accuracy"]),
        "contains the objective metric 'accuracy'",
    ),
    (
        "objective-name-too-long",
        _with("spec.objective.objectiveMetricName", "n" * 257),
        "spec.objective.objectiveMetricName: 257 characters, more than 256",
    ),
    (
        "too-many-metrics",
        _with("spec.objective.additionalMetricNames", [f"m{i}" for i in range(100)]),
        "spec.objective.additionalMetricNames: 100 names, more than 99",
    ),
    # 6 algorithm
    ("algorithm-missing", _with("spec.algorithm", None), "spec.algorithm: required"),
    (
        "algorithm-name-empty",
        _with("spec.algorithm.algorithmName", ""),
        "spec.algorithm.algorithmName: required",
    ),
    (
        "algorithm-unknown",
        _with("spec.algorithm.algorithmName", "hyperopt"),
        "failed to find suggestion config for algorithm hyperopt; use one of: random",
    ),
    (
        "algorithm-settings-bad",
        _with("spec.algorithm.algorithmSettings", [{"name": "random_state", "value": "-3"}]),
        "spec.algorithm.algorithmSettings: ",
    ),
    (
        "algorithm-settings-unknown",
        _with("spec.algorithm.algorithmSettings", [{"name": "nope", "value": "1"}]),
        "algorithm setting nope: unknown",
    ),
    (
        "early-stopping-medianstop-needs-no-config",
        _with("spec.earlyStopping", {"algorithmName": "medianstop"}),
        None,
    ),
    (
        "early-stopping-unknown",
        _with("spec.earlyStopping", {"algorithmName": "meanstop"}),
        "spec.earlyStopping.algorithmName: 'meanstop' is unknown; use one of medianstop",
    ),
    (
        "early-stopping-min-trials-zero",
        _with(
            "spec.earlyStopping",
            {
                "algorithmName": "medianstop",
                "algorithmSettings": [{"name": "min_trials_required", "value": "0"}],
            },
        ),
        "spec.earlyStopping.algorithmSettings: algorithm setting min_trials_required: '0' is "
        "out of range; set it to an integer > 0",
    ),
    (
        "early-stopping-start-step-zero",
        _with(
            "spec.earlyStopping",
            {
                "algorithmName": "medianstop",
                "algorithmSettings": [{"name": "start_step", "value": "0"}],
            },
        ),
        "spec.earlyStopping.algorithmSettings: algorithm setting start_step: '0' is out of "
        "range; set it to an integer >= 1",
    ),
    (
        "early-stopping-start-step-text",
        _with(
            "spec.earlyStopping",
            {
                "algorithmName": "medianstop",
                "algorithmSettings": [{"name": "start_step", "value": "two"}],
            },
        ),
        "spec.earlyStopping.algorithmSettings: algorithm setting start_step: 'two' is not an "
        "integer",
    ),
    (
        "early-stopping-setting-unknown",
        _with(
            "spec.earlyStopping",
            {
                "algorithmName": "medianstop",
                "algorithmSettings": [{"name": "n_warmup_steps", "value": "2"}],
            },
        ),
        "spec.earlyStopping.algorithmSettings: setting n_warmup_steps is unknown for "
        "medianstop; known settings: min_trials_required, start_step",
    ),
    (
        "early-stopping-percentile-out-of-range",
        _with(
            "spec.earlyStopping",
            {
                "algorithmName": "optuna-percentile",
                "algorithmSettings": [{"name": "percentile", "value": "101"}],
            },
        ),
        "algorithm setting percentile: '101' is out of range; set it to a number in [0, 100]",
    ),
    (
        "early-stopping-halving-reduction-factor-1",
        _with(
            "spec.earlyStopping",
            {
                "algorithmName": "optuna-successive-halving",
                "algorithmSettings": [{"name": "reduction_factor", "value": "1"}],
            },
        ),
        "algorithm setting reduction_factor: '1' is out of range; set it to an integer >= 2",
    ),
    (
        "early-stopping-optuna-median-ok",
        _with(
            "spec.earlyStopping",
            {
                "algorithmName": "optuna-median",
                "algorithmSettings": [{"name": "n_warmup_steps", "value": "2"}],
            },
        ),
        None,
    ),
    (
        "early-stopping-name-empty",
        _with("spec.earlyStopping", {"algorithmName": ""}),
        "spec.earlyStopping.algorithmName: required",
    ),
    # 7 resume policy
    (
        "resume-policy-bad",
        _with("spec.resumePolicy", "Sometimes"),
        "spec.resumePolicy: invalid ResumePolicyType 'Sometimes'",
    ),
    ("resume-policy-empty-ok", _with("spec.resumePolicy", ""), None),
    ("resume-policy-long-running-ok", _with("spec.resumePolicy", "LongRunning"), None),
    # 8 trial template
    ("template-missing", _with("spec.trialTemplate", None), f"{TEMPLATE}: required"),
    (
        "primary-container-missing",
        _with("spec.trialTemplate.primaryContainerName", None),
        f"{TEMPLATE}.primaryContainerName: required",
    ),
    (
        "success-condition-missing",
        _with("spec.trialTemplate.successCondition", None),
        f"{TEMPLATE}.successCondition: required",
    ),
    (
        "failure-condition-missing",
        _with("spec.trialTemplate.failureCondition", ""),
        f"{TEMPLATE}.failureCondition: required",
    ),
    (
        "condition-bad-gjson",
        _with("spec.trialTemplate.successCondition", "status.conditions.#(type==Complete"),
        f"{TEMPLATE}.successCondition: ",
    ),
    (
        "condition-bad-modifier",
        _with("spec.trialTemplate.failureCondition", "status.@bogus"),
        "unknown modifier @bogus",
    ),
    (
        "trial-parameters-missing",
        _with("spec.trialTemplate.trialParameters", None),
        f"{TEMPLATE}.trialParameters: required",
    ),
    (
        "no-source",
        _with("spec.trialTemplate.trialSpec", None),
        "set exactly one of trialSpec or configMap (none is set)",
    ),
    (
        "both-sources",
        _with(
            "spec.trialTemplate.configMap",
            {"configMapName": "t", "configMapNamespace": NS, "templatePath": "p"},
        ),
        "(both are set)",
    ),
    (
        "trial-parameter-name-empty",
        _with("spec.trialTemplate.trialParameters.0", {"name": "", "reference": "lr"}),
        "name and reference are required",
    ),
    (
        "trial-parameter-brace",
        _with("spec.trialTemplate.trialParameters.0", {"name": "a{b", "reference": "lr"}),
        "must not contain '{' or '}'",
    ),
    (
        "trial-parameter-duplicate-name",
        _with("spec.trialTemplate.trialParameters.1", {"name": "learningRate", "reference": "opt"}),
        "'learningRate' is used twice",
    ),
    (
        "trial-parameter-duplicate-reference",
        _with("spec.trialTemplate.trialParameters.1", {"name": "optimizer", "reference": "lr"}),
        "'lr' is referenced twice",
    ),
    (
        "trial-parameter-unknown-reference",
        _with(
            "spec.trialTemplate.trialParameters.1", {"name": "optimizer", "reference": "momentum"}
        ),
        "'momentum' is neither a parameter",
    ),
    (
        "trial-parameter-metadata-reference-ok",
        _with(
            "spec.trialTemplate.trialParameters",
            [
                {"name": "learningRate", "reference": "lr"},
                {"name": "optimizer", "reference": "${trialSpec.Labels[team]}"},
            ],
        ),
        None,
    ),
    (
        "trial-parameter-bad-metadata-reference",
        _with(
            "spec.trialTemplate.trialParameters.1",
            {"name": "optimizer", "reference": "${trialSpec.Owner}"},
        ),
        "neither a parameter",
    ),
    (
        "placeholder-unused",
        _with(
            "spec.trialTemplate.trialParameters",
            [
                {"name": "learningRate", "reference": "lr"},
                {"name": "optimizer", "reference": "opt"},
                {"name": "extra", "reference": "${trialSpec.Name}"},
            ],
        ),
        "${trialParameters.extra} does not appear in the trial template",
    ),
    (
        "placeholder-undeclared",
        _with("spec.trialTemplate.trialParameters", [{"name": "learningRate", "reference": "lr"}]),
        "${trialParameters.optimizer} in the template has no entry",
    ),
    (
        "template-sets-name",
        _with("spec.trialTemplate.trialSpec.metadata", {"name": "fixed"}),
        f"{TEMPLATE}.trialSpec.metadata.name: must not be set",
    ),
    (
        "template-sets-namespace",
        _with("spec.trialTemplate.trialSpec.metadata", {"namespace": "x"}),
        f"{TEMPLATE}.trialSpec.metadata.namespace: must not be set",
    ),
    (
        "template-no-kind",
        _with("spec.trialTemplate.trialSpec.kind", None),
        f"{TEMPLATE}.trialSpec.kind: required",
    ),
    (
        "template-no-api-version",
        _with("spec.trialTemplate.trialSpec.apiVersion", None),
        f"{TEMPLATE}.trialSpec.apiVersion: required",
    ),
    (
        "job-unknown-field",
        _with("spec.trialTemplate.trialSpec.spec.template.spec.containers.0.comand", ["x"]),
        "trialSpec.spec.template.spec.containers[0].comand: unknown field of a batch/v1 Job",
    ),
    ("tfjob-ok", _with("spec.trialTemplate.trialSpec", _tfjob()), None),
    (
        "configmap-missing-field",
        _with(
            "spec.trialTemplate",
            {
                "primaryContainerName": "c",
                "successCondition": "a",
                "failureCondition": "b",
                "trialParameters": [],
                "configMap": {"configMapName": "t"},
            },
        ),
        f"{TEMPLATE}.configMap.configMapNamespace: required",
    ),
    (
        "configmap-not-found",
        _with(
            "spec.trialTemplate",
            {
                "primaryContainerName": "c",
                "successCondition": "a",
                "failureCondition": "b",
                "trialParameters": [],
                "configMap": {
                    "configMapName": "t",
                    "configMapNamespace": NS,
                    "templatePath": "job.yaml",
                },
            },
        ),
        f"ConfigMap {NS}/t does not exist",
    ),
    # 9 search space
    ("no-parameters-no-nas", _with("spec.parameters", None), "spec.parameters: required"),
    (
        "parameters-and-nas",
        _with("spec.nasConfig", {"graphConfig": {"numLayers": 2}}),
        "set either parameters or nasConfig, not both",
    ),
    # 10 parameters
    (
        "parameter-type-empty",
        _with("spec.parameters.0.parameterType", ""),
        "spec.parameters[0].parameterType: invalid parameterType ''",
    ),
    ("parameter-type-unknown-ok", _with("spec.parameters.1.parameterType", "unknown"), None),
    (
        "distribution-bad",
        _with("spec.parameters.0.feasibleSpace.distribution", "poisson"),
        "spec.parameters[0].feasibleSpace.distribution: invalid distribution 'poisson'",
    ),
    (
        "distribution-log-normal-ok",
        _with("spec.parameters.0.feasibleSpace.distribution", "logNormal"),
        None,
    ),
    (
        "feasible-space-empty",
        _with("spec.parameters.0.feasibleSpace", {}),
        "spec.parameters[0].feasibleSpace: required",
    ),
    (
        "double-with-list",
        _with("spec.parameters.0.feasibleSpace.list", ["1"]),
        "spec.parameters[0].feasibleSpace.list: not allowed for parameterType double",
    ),
    (
        "double-without-max",
        _with("spec.parameters.0.feasibleSpace.max", None),
        "min and max are required for parameterType double",
    ),
    (
        "categorical-with-min",
        _with("spec.parameters.1.feasibleSpace.min", "1"),
        "spec.parameters[1].feasibleSpace.min: not allowed for parameterType categorical",
    ),
    (
        "discrete-with-step",
        _with(
            "spec.parameters.1",
            {
                "name": "opt",
                "parameterType": "discrete",
                "feasibleSpace": {"list": ["1"], "step": "1"},
            },
        ),
        "feasibleSpace.step: not allowed for parameterType discrete",
    ),
    # 11 metrics collector
    (
        "collector-kind-bad",
        _with(f"{MC}.collector.kind", "Prometheus"),
        "invalid metrics collector kind 'Prometheus'",
    ),
    ("collector-kind-none", _with(f"{MC}.collector.kind", "None"), "(renamed Push in v0.18)"),
    ("collector-push-ok", _with(f"{MC}.collector.kind", "Push"), None),
    (
        "collector-prometheus-configured-by-default",
        _with(
            f"{MC}",
            {
                "collector": {"kind": "PrometheusMetric"},
                "source": {"httpGet": {"path": "/metrics", "port": 8080}},
            },
        ),
        None,
    ),
    (
        "file-ok",
        _with(
            f"{MC}",
            {
                "collector": {"kind": "File"},
                "source": {
                    "fileSystemPath": {"kind": "File", "path": "/katib/m.log", "format": "TEXT"}
                },
            },
        ),
        None,
    ),
    (
        "file-relative-path",
        _with(
            f"{MC}",
            {
                "collector": {"kind": "File"},
                "source": {"fileSystemPath": {"kind": "File", "path": "m.log", "format": "TEXT"}},
            },
        ),
        "File collector needs kind File and an absolute path",
    ),
    (
        "file-directory-kind",
        _with(
            f"{MC}",
            {
                "collector": {"kind": "File"},
                "source": {"fileSystemPath": {"kind": "Directory", "path": "/m", "format": "TEXT"}},
            },
        ),
        "File collector needs kind File",
    ),
    (
        "file-no-format",
        _with(
            f"{MC}",
            {
                "collector": {"kind": "File"},
                "source": {"fileSystemPath": {"kind": "File", "path": "/m.log"}},
            },
        ),
        "format: use TEXT or JSON",
    ),
    (
        "file-json-with-filter",
        _with(
            f"{MC}",
            {
                "collector": {"kind": "File"},
                "source": {
                    "fileSystemPath": {"kind": "File", "path": "/m.log", "format": "JSON"},
                    "filter": {"metricsFormat": ["(a)=(b)"]},
                },
            },
        ),
        "a filter does not apply to format JSON",
    ),
    (
        "tfevent-file-kind",
        _with(
            f"{MC}",
            {
                "collector": {"kind": "TensorFlowEvent"},
                "source": {"fileSystemPath": {"kind": "File", "path": "/t"}},
            },
        ),
        "TensorFlowEvent collector needs kind Directory",
    ),
    (
        "tfevent-format",
        _with(
            f"{MC}",
            {
                "collector": {"kind": "TensorFlowEvent"},
                "source": {"fileSystemPath": {"kind": "Directory", "path": "/t", "format": "TEXT"}},
            },
        ),
        "must be empty for TensorFlowEvent",
    ),
    (
        "custom-no-container",
        _with(f"{MC}", {"collector": {"kind": "Custom"}}),
        "customCollector: required for kind Custom",
    ),
    (
        "custom-relative-path",
        _with(
            f"{MC}",
            {
                "collector": {"kind": "Custom", "customCollector": {"name": "c", "image": "i"}},
                "source": {"fileSystemPath": {"kind": "File", "path": "x"}},
            },
        ),
        "needs an absolute path and kind Directory or File",
    ),
    (
        "custom-ok",
        _with(
            f"{MC}",
            {"collector": {"kind": "Custom", "customCollector": {"name": "c", "image": "i"}}},
        ),
        None,
    ),
    (
        "filter-bad-regex",
        _with(f"{MC}.source", {"filter": {"metricsFormat": ["(a"]}}),
        "is not a valid regular expression",
    ),
    (
        "filter-one-group",
        _with(f"{MC}.source", {"filter": {"metricsFormat": ["(a)=b"]}}),
        "must have two top subexpressions",
    ),
    (
        "filter-ok",
        _with(
            f"{MC}.source", {"filter": {"metricsFormat": [r"([\w|-]+)\s*=\s*([+-]?\d*(\.\d+)?)"]}}
        ),
        None,
    ),
    # shape
    (
        "spec-wrong-shape",
        {
            "apiVersion": "kubeflow.org/v1beta1",
            "kind": "Experiment",
            "metadata": {"name": "a"},
            "spec": {"parallelTrialCount": "many"},
        },
        "spec.parallelTrialCount: ",
    ),
    ("unknown-field", _with("spec.maxTrials", 3), "spec.maxTrials: unknown field"),
    ("not-an-object", [], "expected an Experiment object"),  # type: ignore[list-item]
]


@pytest.mark.parametrize(
    ("manifest", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_rule(manifest: dict[str, Any], expected: str | None) -> None:
    problems = _problems(manifest)
    if expected is None:
        assert problems == []
    else:
        assert any(expected in p for p in problems), problems


@pytest.mark.parametrize(("field", "kind"), [("success", "Complete"), ("failure", "Failed")])
def test_missing_condition_hint_names_the_matching_job_condition(field: str, kind: str) -> None:
    problems = _problems(_with(f"spec.trialTemplate.{field}Condition", ""))
    (hint,) = [p for p in problems if f"{field}Condition: required" in p]
    assert f'status.conditions.#(type=="{kind}")#|#(status=="True")#' in hint


def test_early_stopping_configured_is_allowed() -> None:
    exp = _with("spec.earlyStopping", {"algorithmName": "medianstop"})
    assert _problems(exp, config=CONFIG_WITH_EARLY_STOPPING) == []


def test_prometheus_without_a_collector_entry_is_refused_as_upstream() -> None:
    unconfigured = katib_config.parse(
        "runtime:\n  suggestions: [{algorithmName: random, image: r:1}]\n"
        "  metricsCollectors: [{kind: StdOut, image: c:1}]\n"
    )
    exp = _with(
        "spec.metricsCollectorSpec",
        {
            "collector": {"kind": "PrometheusMetric"},
            "source": {"httpGet": {"path": "/metrics", "port": 8080}},
        },
    )
    problems = _problems(exp, config=unconfigured)
    assert any(
        "failed to find metrics collector config for kind PrometheusMetric" in p for p in problems
    ), problems


def test_prometheus_configured_checks_port_and_path() -> None:
    exp = _with(
        "spec.metricsCollectorSpec",
        {
            "collector": {"kind": "PrometheusMetric"},
            "source": {"httpGet": {"path": "metrics", "port": "http"}},
        },
    )
    problems = _problems(exp, config=CONFIG_WITH_EARLY_STOPPING)
    assert any("httpGet.port: 'http' must be a positive port number" in p for p in problems)
    assert any("httpGet.path: must start with '/'" in p for p in problems)


def test_configmap_template_is_read_and_checked() -> None:
    template = {
        "primaryContainerName": "training-container",
        "successCondition": "a",
        "failureCondition": "b",
        "trialParameters": [{"name": "learningRate", "reference": "lr"}],
        "configMap": {
            "configMapName": "templates",
            "configMapNamespace": NS,
            "templatePath": "job.yaml",
        },
    }
    exp = _with("spec.trialTemplate", template)
    good = (
        "apiVersion: batch/v1\nkind: Job\nspec:\n  template:\n    spec:\n      containers:\n"
        "        - name: training-container\n"
        "          command: [python3, train.py]\n"
        "          args: [--lr=${trialParameters.learningRate}]\n"
    )
    cluster = StaticCluster(config_maps={(NS, "templates"): {"job.yaml": good}})
    assert _problems(exp, cluster) == []
    no_command = good.replace("          command: [python3, train.py]\n", "")
    cluster = StaticCluster(config_maps={(NS, "templates"): {"job.yaml": no_command}})
    assert _problems(exp, cluster, config=NO_IMAGE_LOOKUP) == [
        "spec.trialTemplate.configMap[job.yaml].spec.template.spec.containers[0].command: "
        "required for primary container 'training-container': the StdOut metrics collector "
        "wraps the training command and reading the image's ENTRYPOINT is switched off "
        "(katib-config init.controller.imageCommandLookup); set command "
        "(e.g. command: [python3, train.py])"
    ]
    cluster = StaticCluster(config_maps={(NS, "templates"): {"other": good}})
    assert any("has no key 'job.yaml'; fix templatePath" in p for p in _problems(exp, cluster))
    broken = "apiVersion: batch/v1\nkind: [Job\nlr: ${trialParameters.learningRate}\n"
    cluster = StaticCluster(config_maps={(NS, "templates"): {"job.yaml": broken}})
    assert any("does not parse after substitution" in p for p in _problems(exp, cluster))


# --- rule (a): the namespace label -------------------------------------------------------------


def test_namespace_without_label_is_accepted_with_a_warning() -> None:
    """Upstream accepts it; its trials run, but no collector is injected there: say so."""
    cluster = StaticCluster(namespaces={NS: {}})
    assert _problems(experiment(), cluster) == []
    label = "katib.kubeflow.org/metrics-collector-injection=enabled"
    assert validating.warnings(experiment(), operation="CREATE", namespace=NS, cluster=cluster) == [
        "no metrics will be collected for this Experiment: its namespace lacks the injection "
        f"label; run: kubectl label namespace {NS} {label}"
    ]
    # Each warning must stay short enough for the API server to pass it on whole (256).
    long_ns = "n" * 63
    long = StaticCluster(namespaces={long_ns: {}})
    (warning,) = validating.warnings(
        experiment(), operation="CREATE", namespace=long_ns, cluster=long
    )
    assert len(warning) <= 256
    assert (
        validating.warnings(experiment(), operation="CREATE", namespace=NS, cluster=StaticCluster())
        == []
    )
    assert (
        validating.warnings(experiment(), operation="UPDATE", namespace=NS, cluster=cluster) == []
    )
    failing = StaticCluster(error=validating.ClusterError("connection refused"))
    (warning,) = validating.warnings(
        experiment(), operation="CREATE", namespace=NS, cluster=failing
    )
    assert "cannot check namespace" in warning and "connection refused" in warning


def test_namespace_without_label_is_denied_when_required() -> None:
    cluster = StaticCluster(namespaces={NS: {}})
    strict = validating.Options(require_namespace_label=True)
    problems = _problems(experiment(), cluster, options=strict)
    assert (
        validating.warnings(
            experiment(), operation="CREATE", namespace=NS, cluster=cluster, options=strict
        )
        == []
    )
    assert problems == [
        f"metadata.namespace: namespace {NS} must have label "
        "katib.kubeflow.org/metrics-collector-injection=enabled so trial pods get the metrics "
        f"collector; run `kubectl label namespace {NS} "
        "katib.kubeflow.org/metrics-collector-injection=enabled`"
    ]


def test_namespace_lookup_failure_says_retry() -> None:
    cluster = StaticCluster(error=validating.ClusterError("connection refused"))
    problems = _problems(experiment(), cluster, options=validating.Options(True))
    assert any("cannot read namespace" in p and "retry" in p for p in problems)


# --- FromVolume PV check ---------------------------------------------------------------------


def _pv(owner: str | None = None, claim: tuple[str, str] | None = None) -> dict[str, Any]:
    """A suggestion PV: the suggestion-controller's owner annotation `owner` (namespace/name),
    or (an older PV) only a claimRef to `claim` (namespace, name)."""
    annotations = {naming.ANNOTATION_SUGGESTION: owner} if owner else {}
    spec = {"claimRef": {"namespace": claim[0], "name": claim[1]}} if claim else {}
    return {"metadata": {"annotations": annotations}, "spec": spec}


LEFT_HERE = [_pv(f"{NS}/random"), _pv(claim=(NS, "random-random"))]


@pytest.mark.parametrize("left", LEFT_HERE)
def test_from_volume_refused_while_the_pv_exists(left: dict[str, Any]) -> None:
    exp = _with("spec.resumePolicy", "FromVolume")
    pv = naming.suggestion_pv_name("random", "random", NS)
    assert _problems(exp, StaticCluster()) == []
    problems = _problems(exp, StaticCluster(pvs={pv: left}))
    assert len(problems) == 1
    assert f"PV: {pv} is not deleted" in problems[0]
    assert f"kubectl delete pv {pv}" in problems[0]


@pytest.mark.parametrize(
    "other",
    [
        _pv(f"{NS}-x/random"),  # Katib's PV names collide across namespaces
        _pv(f"{NS}/random-x"),
        _pv(claim=(f"{NS}-x", "random-random")),
        _pv(claim=(NS, "other")),
        _pv(),  # nobody's we know of: not this tenant's to delete either
    ],
)
def test_from_volume_never_names_a_pv_of_someone_else(other: dict[str, Any]) -> None:
    """The suggestion-controller gives this Experiment's PV another name; its author is never
    told to delete a PV that belongs to another tenant."""
    exp = _with("spec.resumePolicy", "FromVolume")
    pv = naming.suggestion_pv_name("random", "random", NS)
    assert _problems(exp, StaticCluster(pvs={pv: other})) == []


def test_from_volume_pv_checked_only_on_create() -> None:
    exp = _with("spec.resumePolicy", "FromVolume")
    pv = naming.suggestion_pv_name("random", "random", NS)
    cluster = StaticCluster(pvs={pv: LEFT_HERE[0]})
    assert _problems(exp, cluster, operation="UPDATE", old=exp) == []


def test_never_policy_ignores_the_pv() -> None:
    pv = naming.suggestion_pv_name("random", "random", NS)
    assert _problems(experiment(), StaticCluster(pvs={pv: LEFT_HERE[0]})) == []


# --- rule 4: updates --------------------------------------------------------------------------


def _completed(
    policy: str,
    reason: str = "ExperimentMaxTrialsReached",
    trials: int = 6,
    ctype: str = "Succeeded",
) -> dict[str, Any]:
    exp = _with("spec.resumePolicy", policy)
    exp["status"] = {
        "trials": trials,
        "conditions": [{"type": ctype, "status": "True", "reason": reason}],
    }
    return exp


def _update(old: dict[str, Any], path: str, value: Any) -> list[str]:
    new = _with(path, value, old)
    new.pop("status", None)
    return _problems(new, operation="UPDATE", old=old)


UPDATE_CASES = [
    ("running-raise-max", _with("spec.resumePolicy", "Never"), "spec.maxTrialCount", 10, None),
    (
        "running-change-parallel",
        _with("spec.resumePolicy", "Never"),
        "spec.parallelTrialCount",
        3,
        None,
    ),
    (
        "running-change-failed",
        _with("spec.resumePolicy", "Never"),
        "spec.maxFailedTrialCount",
        1,
        None,
    ),
    (
        "immutable-algorithm",
        experiment(),
        "spec.algorithm.algorithmName",
        "grid",
        "spec.algorithm cannot change after creation; only spec.parallelTrialCount",
    ),
    (
        "immutable-objective",
        experiment(),
        "spec.objective.goal",
        0.5,
        "spec.objective cannot change",
    ),
    (
        "immutable-parameters",
        experiment(),
        "spec.parameters.0.feasibleSpace.max",
        "0.2",
        "spec.parameters cannot change",
    ),
    ("restart-long-running", _completed("LongRunning"), "spec.maxTrialCount", 8, None),
    ("restart-from-volume", _completed("FromVolume"), "spec.maxTrialCount", 8, None),
    (
        "restart-never",
        _completed("Never"),
        "spec.maxTrialCount",
        8,
        "cannot be restarted because its resumePolicy is Never",
    ),
    (
        "restart-goal-reached",
        _completed("LongRunning", reason="ExperimentGoalReached"),
        "spec.maxTrialCount",
        8,
        "with reason ExperimentGoalReached, not ExperimentMaxTrialsReached",
    ),
    (
        "restart-failed",
        _completed("FromVolume", ctype="Failed", reason="ExperimentFailed"),
        "spec.maxTrialCount",
        8,
        "because it has failed",
    ),
    (
        "restart-max-not-above-trials",
        _completed("LongRunning", trials=7),
        "spec.maxTrialCount",
        7,
        "spec.maxTrialCount: 7 must be greater than the 7 trials already created",
    ),
    (
        "restart-immutable-still",
        _completed("LongRunning"),
        "spec.objective.goal",
        0.5,
        "spec.objective cannot change",
    ),
]


@pytest.mark.parametrize(
    ("old", "path", "value", "expected"),
    [c[1:] for c in UPDATE_CASES],
    ids=[c[0] for c in UPDATE_CASES],
)
def test_update(old: dict[str, Any], path: str, value: Any, expected: str | None) -> None:
    problems = _update(old, path, value)
    if expected is None:
        assert problems == []
    else:
        assert any(expected in p for p in problems), problems


def test_metadata_only_update_always_passes() -> None:
    old = _completed("Never")
    new = copy.deepcopy(old)
    new["metadata"]["finalizers"] = ["update-prometheus-metrics"]
    cluster = StaticCluster(namespaces={NS: {}})  # even once the namespace lost its label
    assert _problems(new, cluster, operation="UPDATE", old=old) == []


def test_every_shared_example_manifest_loads_and_validates() -> None:
    """The valid Experiments of the shared examples pass after defaulting (config allowing)."""
    from kubetune_testkit.examples import examples
    from kubetune_webhook import defaulting, patching

    checked = 0
    for example, doc in examples("Experiment"):
        doc = patching.apply(doc, defaulting.patch(doc))
        problems = validating.validate_spec(
            validating.load(doc)[0],  # type: ignore[arg-type]
            CONFIG,
            lambda ns, name, key: "apiVersion: batch/v1\nkind: Job\n" + "x: ${trialParameters.a}",
        )
        # Only configuration gaps (algorithms/collectors kubetune does not ship) are allowed.
        # configMap templates get no default conditions upstream.
        allowed: tuple[str, ...] = (
            "failed to find",
            "trialParameters",
            "ConfigMap",
            "algorithmSettings",
        )
        if doc["spec"]["trialTemplate"].get("configMap"):
            allowed += ("Condition: required",)
        allowed += tuple(UPSTREAM_REFUSES_TOO.get(example.split(":")[0] + ".yaml", ()))
        unexpected = [p for p in problems if not any(a in p for a in allowed)]
        assert unexpected == [], (example, unexpected)
        checked += 1
    assert checked > 5


# --- the primary container (defect 5: what would make every trial pod be refused) ------------

ARGS = ["--lr=${trialParameters.learningRate}", "--optimizer=${trialParameters.optimizer}"]


def _replicated(kind: str, **templates: dict[str, Any]) -> dict[str, Any]:
    """A TFJob whose replicas have the given pod templates."""
    exp = experiment()
    exp["spec"]["trialTemplate"].update(
        primaryContainerName="tensorflow",
        successCondition="a",
        failureCondition="b",
        trialSpec={
            "apiVersion": "kubeflow.org/v1",
            "kind": kind,
            "spec": {"tfReplicaSpecs": {r: {"template": t} for r, t in templates.items()}},
        },
    )
    return exp


def _pod_template(
    name: str, command: list[str] | None, labels: dict[str, str] | None = None
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": name, "image": "tf", "args": ARGS}
    if command:
        container["command"] = command
    template: dict[str, Any] = {"spec": {"containers": [container]}}
    if labels:
        template["metadata"] = {"labels": labels}
    return template


def test_primary_container_not_in_the_template_is_refused() -> None:
    exp = _with("spec.trialTemplate.primaryContainerName", "trainer")
    assert _problems(exp) == [
        "spec.trialTemplate.primaryContainerName: 'trainer' is not a container of the trial "
        "template (its containers: training-container); set it to the name of the container "
        "that runs the training"
    ]


def test_primary_container_without_command_is_admitted_when_its_image_is_read() -> None:
    """The pod webhook reads the image's ENTRYPOINT and CMD from its registry (Katib's way)."""
    exp = experiment()
    (container,) = exp["spec"]["trialTemplate"]["trialSpec"]["spec"]["template"]["spec"][
        "containers"
    ]
    del container["command"]
    container["args"] = ARGS
    assert CONFIG.init.controller.image_command_lookup, "on unless switched off"
    assert _problems(exp) == []


def test_primary_container_without_command_is_refused_when_the_image_lookup_is_off() -> None:
    exp = experiment()
    (container,) = exp["spec"]["trialTemplate"]["trialSpec"]["spec"]["template"]["spec"][
        "containers"
    ]
    del container["command"]
    container["args"] = ARGS
    assert _problems(exp, config=NO_IMAGE_LOOKUP) == [
        "spec.trialTemplate.trialSpec.spec.template.spec.containers[0].command: required for "
        "primary container 'training-container': the StdOut metrics collector wraps the "
        "training command and reading the image's ENTRYPOINT is switched off (katib-config "
        "init.controller.imageCommandLookup); set command (e.g. command: [python3, train.py])"
    ]
    # Push and Custom collectors do not wrap the command: the image's ENTRYPOINT is fine.
    for collector in ({"kind": "Push"}, {"kind": "Custom", "customCollector": {"name": "c"}}):
        pushed = copy.deepcopy(exp)
        pushed["spec"]["metricsCollectorSpec"] = {"collector": collector}
        assert _problems(pushed, config=NO_IMAGE_LOOKUP) == []


def test_primary_container_is_looked_for_in_every_replica() -> None:
    exp = _replicated(
        "TFJob",
        PS=_pod_template("ps", ["python3", "ps.py"]),
        Worker=_pod_template("tensorflow", ["python3", "train.py"]),
    )
    assert _problems(exp) == []
    exp["spec"]["trialTemplate"]["primaryContainerName"] = "pytorch"
    assert _problems(exp) == [
        "spec.trialTemplate.primaryContainerName: 'pytorch' is not a container of the trial "
        "template (its containers: ps, tensorflow); set it to the name of the container that "
        "runs the training"
    ]


def test_command_is_required_only_where_the_pod_is_known_to_be_primary() -> None:
    """With primaryPodLabels, labels the job's controller adds decide which pods are primary:
    only a template that already has them all is known to be primary."""
    worker = {"training.kubeflow.org/replica-type": "worker"}
    exp = _replicated(
        "TFJob",
        PS=_pod_template("tensorflow", None),
        Worker=_pod_template("tensorflow", None),
    )
    exp["spec"]["trialTemplate"]["primaryPodLabels"] = worker
    assert _problems(exp, config=NO_IMAGE_LOOKUP) == []
    exp = _replicated(
        "TFJob",
        PS=_pod_template("tensorflow", None),
        Worker=_pod_template("tensorflow", None, labels=worker),
    )
    exp["spec"]["trialTemplate"]["primaryPodLabels"] = worker
    (problem,) = _problems(exp, config=NO_IMAGE_LOOKUP)
    assert problem.startswith(
        "spec.trialTemplate.trialSpec.spec.tfReplicaSpecs.Worker.template.spec.containers[0]"
        ".command: required for primary container 'tensorflow'"
    )


@pytest.mark.parametrize(
    "trial_spec",
    [
        {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Workflow",
            "spec": {"templates": [{"name": "t", "container": {"args": ARGS}}]},
        },
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "spec": {"trainer": {"args": ARGS}},
        },
    ],
    ids=["argo", "trainjob"],
)
def test_kinds_whose_containers_are_not_listed_are_not_checked(trial_spec: dict[str, Any]) -> None:
    exp = _with("spec.trialTemplate.trialSpec", trial_spec)
    exp["spec"]["trialTemplate"].update(
        primaryContainerName="main", successCondition="a", failureCondition="b"
    )
    assert _problems(exp) == []


# --- Katib's own algorithm examples are admitted unchanged (issue 16) ------------------------


def _katib_example(name: str) -> dict[str, Any]:
    from kubetune_testkit.examples import examples
    from kubetune_webhook import defaulting, patching

    stem = name.removesuffix(".yaml")
    doc = next(d for example, d in examples("Experiment") if example.split(":")[0] == stem)
    applied: dict[str, Any] = patching.apply(doc, defaulting.patch(doc))
    return applied


# simple-pbt.yaml sets maxFailedTrialCount 3 above maxTrialCount 2, which upstream's own
# validator refuses too (rule 3, "should be less than or equal to spec.maxTrialCount"); its
# algorithm part must pass unchanged, and with maxTrialCount raised the whole Experiment does.
UPSTREAM_REFUSES_TOO = {
    "katib-simple-pbt.yaml": [
        "spec.maxFailedTrialCount: 3 is greater than spec.maxTrialCount 2; lower it or raise "
        "maxTrialCount"
    ]
}


@pytest.mark.parametrize(
    "name",
    [
        "katib-hyperband.yaml",
        "katib-simple-pbt.yaml",
        "katib-darts-cpu.yaml",
        "katib-enas-cpu.yaml",
    ],
)
def test_katib_algorithm_examples_are_admitted_unchanged(name: str) -> None:
    doc = _katib_example(name)
    problems = validating.validate_spec(
        validating.load(doc)[0],  # type: ignore[arg-type]
        CONFIG,
        lambda ns, key, name: "",
    )
    assert problems == UPSTREAM_REFUSES_TOO.get(name, [])
    doc["spec"]["maxTrialCount"] = 40
    problems = validating.validate_spec(
        validating.load(doc)[0],  # type: ignore[arg-type]
        CONFIG,
        lambda ns, key, name: "",
    )
    assert problems == []


def test_hyperband_parallel_trial_count_is_checked_at_admission() -> None:
    doc = _katib_example("katib-hyperband.yaml")
    for setting in doc["spec"]["algorithm"]["algorithmSettings"]:
        if setting["name"] == "r_l":
            setting["value"] = "8"  # eta 2: s_max 3, the first bracket runs 8 at once
    problems = validating.validate_spec(
        validating.load(doc)[0],  # type: ignore[arg-type]
        CONFIG,
        lambda ns, key, name: "",
    )
    assert problems == [
        "spec.algorithm.algorithmSettings: parallelTrialCount: 2 is less than 8, the trials of "
        "hyperband's first bracket (eta=2, r_l=8); set parallelTrialCount to at least 8 or "
        "lower r_l"
    ]


def test_pbt_needs_from_volume_at_admission() -> None:
    """The trials' checkpoints live on the suggestion's volume, which only FromVolume has."""
    doc = _katib_example("katib-simple-pbt.yaml")
    doc["spec"]["resumePolicy"] = "LongRunning"
    doc["spec"]["maxTrialCount"] = 40
    problems = validating.validate_spec(
        validating.load(doc)[0],  # type: ignore[arg-type]
        CONFIG,
        lambda ns, key, name: "",
    )
    assert problems == [
        "spec.resumePolicy: algorithm pbt shares each trial's checkpoint through the "
        "suggestion's volume, which only FromVolume creates; set resumePolicy: FromVolume"
    ]


@pytest.mark.parametrize(
    ("stem", "path", "value", "expected"),
    [
        (
            "katib-enas-cpu.yaml",
            "spec.nasConfig.graphConfig.inputSizes",
            None,
            "spec.nasConfig: Missing InputSizes in GraphConfig:\nnum_layers: 1\noutput_sizes: 10\n",
        ),
        (
            "katib-enas-cpu.yaml",
            "spec.algorithm.algorithmSettings",
            [{"name": "controller_learning_rate", "value": "2"}],
            "spec.algorithm.algorithmSettings: Algorithm Setting controller_learning_rate: 2.0 "
            "with float type must be in range (0.0, 1.0]",
        ),
        (
            "katib-darts-cpu.yaml",
            "spec.nasConfig.operations.0.operationType",
            None,
            "spec.nasConfig: Missing operationType in Operation:\nparameter_specs {\n"
            '  parameters {\n    name: "filter_size"\n    parameter_type: CATEGORICAL\n'
            '    feasible_space {\n      list: "3"\n    }\n  }\n}\n',
        ),
        (
            "katib-darts-cpu.yaml",
            "spec.algorithm.algorithmSettings.0.value",
            "0",
            "spec.algorithm.algorithmSettings: num_epochs should be greater than zero",
        ),
        (
            "katib-darts-cpu.yaml",
            "spec.algorithm.algorithmName",
            "random",
            "spec.nasConfig: algorithm random does not use nasConfig (only darts, enas do); use "
            "algorithmName darts or enas, or replace nasConfig with parameters",
        ),
    ],
)
def test_nas_problems_are_refused_with_upstreams_message(
    stem: str, path: str, value: Any, expected: str
) -> None:
    """What upstream's darts/enas service would fail the Suggestion with, refused at admission."""
    doc = _with(path, value, _katib_example(stem))
    problems = validating.validate_spec(
        validating.load(doc)[0],  # type: ignore[arg-type]
        CONFIG,
        lambda ns, key, name: "",
    )
    assert expected in problems and all("nasConfig" not in p for p in problems if p != expected)


CONFIG_WITH_KATIB_IMAGES = katib_config.parse(
    """
runtime:
  suggestions:
    - {algorithmName: random, image: docker.io/kubeflowkatib/suggestion-hyperopt:v0.19.0}
    - {algorithmName: my-grid, image: example.com/grid:1}
  metricsCollectors: [{kind: StdOut, image: c:1}]
  earlyStoppings: [{algorithmName: my-stop, image: example.com/stop:1}]
"""
)


def test_a_katib_image_judges_its_own_settings() -> None:
    exp = _with(
        "spec.algorithm",
        {"algorithmName": "random", "algorithmSettings": [{"name": "hyperopt_only", "value": "1"}]},
    )
    assert _problems(exp, config=CONFIG_WITH_KATIB_IMAGES) == []
    assert any("hyperopt_only" in p for p in _problems(exp))  # kubetune's own random refuses


def test_an_early_stopping_algorithm_with_a_katib_image_is_allowed() -> None:
    exp = _with(
        "spec.earlyStopping",
        {"algorithmName": "my-stop", "algorithmSettings": [{"name": "min_value", "value": "1"}]},
    )
    exp = _with("spec.algorithm", {"algorithmName": "my-grid"}, exp)
    assert _problems(exp, config=CONFIG_WITH_KATIB_IMAGES) == []
    problems = _problems(exp, config=CONFIG_WITH_EARLY_STOPPING)
    assert any("spec.earlyStopping.algorithmName: 'my-stop' is unknown" in p for p in problems)


def test_settings_that_cannot_be_checked_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail closed: an error inside the settings check refuses the Experiment with the error,
    instead of admitting settings nobody checked."""

    def broken(*_: Any) -> list[str]:
        raise OverflowError("int too large to convert to float")

    monkeypatch.setattr(validating.algorithmsettings, "validate", broken)
    problems = _problems(_with("spec.algorithm", {"algorithmName": "grid"}))
    assert any(
        p.startswith("spec.algorithm.algorithmSettings: the settings of algorithm grid could not")
        and "OverflowError: int too large" in p
        for p in problems
    ), problems
