"""Experiment defaults (`/mutate-experiment`): pure functions over the models.

`default(experiment)` returns a defaulted copy; `patch(manifest)` turns a raw Experiment into the
JSONPatch the API server applies. Only empty fields are filled, so defaulting is idempotent and a
second pass (on UPDATE) changes nothing the user set. A manifest that does not load into the
model gets no patch: the validating webhook denies it with the field named.

Neighbours: `validating` (runs after this, on the defaulted object), `patching` (the diff).
"""

from __future__ import annotations

import copy
from typing import Any

from kubetune import jobstatus
from kubetune.api.common import (
    CollectorKind,
    CollectorSpec,
    FileFormat,
    FileSystemKind,
    FileSystemPath,
    MetricsCollectorSpec,
    MetricStrategy,
    MetricStrategyType,
    ObjectiveSpec,
    ObjectiveType,
    SourceSpec,
)
from kubetune.api.errors import ManifestError
from kubetune.api.experiment import (
    Distribution,
    Experiment,
    ExperimentSpec,
    ResumePolicy,
    TrialTemplate,
)
from kubetune_webhook import patching

DEFAULT_PARALLEL_TRIAL_COUNT = 3
DEFAULT_FILE_PATH = "/var/log/katib/metrics.log"
DEFAULT_TFEVENT_PATH = "/var/log/katib/tfevent/"
DEFAULT_PROMETHEUS_PATH = "/metrics"
DEFAULT_PROMETHEUS_PORT = 8080

KUBEFLOW_JOB_KINDS = ("TFJob", "PyTorchJob", "XGBoostJob", "MPIJob")
KUBEFLOW_PRIMARY_POD_LABELS = {"training.kubeflow.org/job-role": "master"}
TRAINJOB_PRIMARY_POD_LABELS = {
    "jobset.sigs.k8s.io/replicatedjob-name": "node",
    "batch.kubernetes.io/job-completion-index": "0",
}


def default_strategy(objective_type: ObjectiveType | None) -> MetricStrategyType:
    """`min` for minimize, `max` for maximize, else `latest` (also for additional metrics)."""
    if objective_type is ObjectiveType.MINIMIZE:
        return MetricStrategyType.MIN
    if objective_type is ObjectiveType.MAXIMIZE:
        return MetricStrategyType.MAX
    return MetricStrategyType.LATEST


def default_first_objective(objective: ObjectiveSpec) -> ObjectiveSpec:
    """With `objectives` (kubetune's multi-objective extension), an empty
    objectiveMetricName/type is the first objective's (a mismatch is validation's to refuse)."""
    out = objective.model_copy(deep=True)
    if out.objectives:
        first = out.objectives[0]
        if not out.objective_metric_name:
            out.objective_metric_name = first.metric_name
        if out.type is None or out.type is ObjectiveType.UNKNOWN:
            out.type = first.type
    return out


def default_objective(objective: ObjectiveSpec) -> ObjectiveSpec:
    """Every metric (objective first, then each of several objectives by its own type, then
    the additional ones) without a strategy gets one."""
    out = default_first_objective(objective)
    strategies = list(out.metric_strategies or [])
    known = {s.name for s in strategies}
    names = [
        (out.objective_metric_name, out.type),
        *((t.metric_name, t.type) for t in out.objectives or []),
        *((name, out.type) for name in out.additional_metric_names or []),
    ]
    for name, kind in names:
        if name and name not in known:
            strategies.append(MetricStrategy(name=name, value=default_strategy(kind)))
            known.add(name)
    if strategies:
        out.metric_strategies = strategies
    return out


def default_trial_template(template: TrialTemplate) -> TrialTemplate:
    """Success/failure conditions and primary pod labels of known job kinds (trialSpec only)."""
    out = template.model_copy(deep=True)
    spec = out.trial_spec
    if not isinstance(spec, dict):
        return out
    kind = spec.get("kind")
    api_version = spec.get("apiVersion")
    if not isinstance(kind, str):
        return out
    rules = jobstatus.default_conditions(
        kind, api_version if isinstance(api_version, str) else None
    )
    if rules is not None:
        if not out.success_condition:
            out.success_condition = rules.success_condition
        if not out.failure_condition:
            out.failure_condition = rules.failure_condition
        if out.primary_pod_labels is None:
            if kind in KUBEFLOW_JOB_KINDS:
                out.primary_pod_labels = dict(KUBEFLOW_PRIMARY_POD_LABELS)
            elif kind == "TrainJob":
                out.primary_pod_labels = dict(TRAINJOB_PRIMARY_POD_LABELS)
    return out


def default_metrics_collector(spec: MetricsCollectorSpec | None) -> MetricsCollectorSpec:
    """StdOut when absent; paths, kinds and formats of File, TensorFlowEvent, PrometheusMetric."""
    out = spec.model_copy(deep=True) if spec is not None else MetricsCollectorSpec()
    if out.collector is None:
        out.collector = CollectorSpec(kind=CollectorKind.STDOUT.value)
    kind = out.collector.kind
    if kind in (
        CollectorKind.FILE.value,
        CollectorKind.TENSORFLOW_EVENT.value,
        CollectorKind.PROMETHEUS_METRIC.value,
    ):
        source = out.source.model_copy(deep=True) if out.source is not None else SourceSpec()
        if kind == CollectorKind.PROMETHEUS_METRIC.value:
            http_get = dict(source.http_get or {})
            if not http_get.get("path"):
                http_get["path"] = DEFAULT_PROMETHEUS_PATH
            if str(http_get.get("port", 0) or 0) == "0":
                http_get["port"] = DEFAULT_PROMETHEUS_PORT
            source.http_get = http_get
        else:
            path = source.file_system_path or FileSystemPath()
            path = path.model_copy(deep=True)
            if kind == CollectorKind.FILE.value:
                if not path.kind:
                    path.kind = FileSystemKind.FILE
                if not path.path:
                    path.path = DEFAULT_FILE_PATH
                if not path.format:
                    path.format = FileFormat.TEXT
            else:
                if not path.kind:
                    path.kind = FileSystemKind.DIRECTORY
                if not path.path:
                    path.path = DEFAULT_TFEVENT_PATH
            source.file_system_path = path
        out.source = source
    return out


def default_spec(spec: ExperimentSpec) -> ExperimentSpec:
    """Every default of Katib's webhook (assignments mark fields set, so `to_wire` shows them)."""
    out = spec.model_copy(deep=True)
    if out.parallel_trial_count is None:
        # Deviation: upstream sets 3 and then rejects its own default when maxTrialCount < 3.
        out.parallel_trial_count = DEFAULT_PARALLEL_TRIAL_COUNT
        if (
            out.max_trial_count is not None
            and 0 < out.max_trial_count < DEFAULT_PARALLEL_TRIAL_COUNT
        ):
            out.parallel_trial_count = out.max_trial_count
    if not out.resume_policy:
        out.resume_policy = ResumePolicy.NEVER
    if out.objective is not None:
        out.objective = default_objective(out.objective)
    if out.trial_template is not None:
        out.trial_template = default_trial_template(out.trial_template)
    out.metrics_collector_spec = default_metrics_collector(out.metrics_collector_spec)
    if out.parameters:
        parameters = [p.model_copy(deep=True) for p in out.parameters]
        for parameter in parameters:
            if not parameter.feasible_space.distribution:
                space = parameter.feasible_space.model_copy(deep=True)
                space.distribution = Distribution.UNIFORM
                parameter.feasible_space = space
        out.parameters = parameters
    return out


def default(experiment: Experiment) -> Experiment:
    out = experiment.model_copy(deep=True)
    out.spec = default_spec(out.spec)
    return out


def _blank_distributions(manifest: dict[str, Any]) -> tuple[dict[str, Any], patching.Patch]:
    """`distribution: ""` (Katib's "unset") is not a model value; read it as absent."""
    ops: patching.Patch = []
    spec = manifest.get("spec")
    params = spec.get("parameters") if isinstance(spec, dict) else None
    if not isinstance(params, list):
        return manifest, ops
    out = copy.deepcopy(manifest)
    for index, param in enumerate(out["spec"]["parameters"]):
        space = param.get("feasibleSpace") if isinstance(param, dict) else None
        if isinstance(space, dict) and space.get("distribution") == "":
            del space["distribution"]
            ops.append(
                {"op": "remove", "path": f"/spec/parameters/{index}/feasibleSpace/distribution"}
            )
    return out, ops


def patch(manifest: Any) -> patching.Patch:
    """The JSONPatch that defaults a raw Experiment ([] when nothing to do or it does not load)."""
    if not isinstance(manifest, dict):
        return []
    cleaned, ops = _blank_distributions(manifest)
    try:
        experiment = Experiment.model_validate(cleaned)
    except (ValueError, ManifestError):
        return []
    before = experiment.to_wire()
    after = default(experiment).to_wire()
    changes = patching.diff(before, after)
    if not changes:
        return []
    return ops + changes
