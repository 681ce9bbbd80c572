"""The trial template turned into a Trial: substitution, metadata references, istio annotation.

Upstream semantics: the template (inline `trialSpec` as JSON text, or the YAML
text at `templatePath` of a ConfigMap) gets every `${trialParameters.<name>}` replaced by raw text
— the assignment of the parameter's `reference`, or for a reference `${trialSpec.<Field>}` the
trial's name/namespace or the template's kind/apiVersion/labels/annotations — and is parsed
again. Anything that cannot be rendered raises `RenderError` with a message meant for the user;
`reconciling` then creates that Trial already Failed with the message, so the controller never
stalls on one bad assignment. Neighbours: `planning` decides which assignments to render.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from kubetune import jobstatus, naming, observations
from kubetune.api.common import (
    MetricsCollectorSpec,
    MetricStrategy,
    ObjectiveSpec,
)
from kubetune.api.experiment import Experiment, TrialTemplate
from kubetune.api.suggestion import TrialAssignment
from kubetune.kube import Obj

PLACEHOLDER = re.compile(r"\$\{trialParameters\..+?\}")
METADATA_REFERENCE = re.compile(r"^\$\{trialSpec\.(.+?)\}$")
INDEXED = re.compile(r"^(.+)\[(.+)\]$")


class RenderError(ValueError):
    """The template cannot become this Trial; the message tells the user what to fix."""


def template_source(template: TrialTemplate, config_map: Obj | None) -> tuple[str, Obj]:
    """The template text to substitute into and the template object (for metadata references).

    Raises:
        RenderError: no template, or the ConfigMap lacks the path or holds no object.
    """
    if template.trial_spec is not None:
        return json.dumps(template.trial_spec), template.trial_spec
    source = template.config_map
    if source is None:
        raise RenderError("trialTemplate has neither trialSpec nor configMap")
    where = f"ConfigMap {source.config_map_namespace}/{source.config_map_name}"
    if config_map is None:
        raise RenderError(f"{where} not found")
    text = (config_map.get("data") or {}).get(source.template_path or "")
    if text is None:
        raise RenderError(f"{where} has no key {source.template_path!r}")
    try:
        parsed = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise RenderError(f"{where} key {source.template_path!r} is not valid YAML: {e}") from e
    if not isinstance(parsed, dict):
        raise RenderError(f"{where} key {source.template_path!r} does not hold an object")
    return str(text), parsed


def _metadata_value(field: str, trial: str, namespace: str, template: Obj) -> str:
    meta = template.get("metadata") or {}
    simple = {
        "Name": trial,
        "Namespace": namespace,
        "Kind": template.get("kind"),
        "APIVersion": template.get("apiVersion"),
    }
    if field in simple:
        value = simple[field]
        if not isinstance(value, str) or not value:
            raise RenderError(f"${{trialSpec.{field}}}: the trial template has no {field}")
        return value
    indexed = INDEXED.match(field)
    if indexed and indexed.group(1) in ("Labels", "Annotations"):
        which, key = indexed.group(1), indexed.group(2)
        values = meta.get(which.lower()) or {}
        if key not in values:
            raise RenderError(
                f"${{trialSpec.{field}}}: the trial template has no {which.lower()[:-1]} {key!r}"
            )
        return str(values[key])
    raise RenderError(
        f"${{trialSpec.{field}}} is not a trial metadata reference "
        "(Name, Namespace, Kind, APIVersion, Labels[key], Annotations[key])"
    )


def substitute(
    text: str,
    template: TrialTemplate,
    template_object: Obj,
    assignments: Mapping[str, str],
    trial: str,
    namespace: str,
) -> str:
    """Replace every `${trialParameters.<name>}` in `text`.

    Raises:
        RenderError: a reference without an assignment, a bad metadata reference, a count
            mismatch, or a placeholder left over (named in the message).
    """
    values: dict[str, str] = {}
    non_metadata = 0
    for parameter in template.trial_parameters or []:
        reference = METADATA_REFERENCE.match(parameter.reference)
        if reference:
            values[parameter.name] = _metadata_value(
                reference.group(1), trial, namespace, template_object
            )
            continue
        non_metadata += 1
        if parameter.reference not in assignments:
            raise RenderError(
                f"trial parameter {parameter.name!r}: no assignment for its reference "
                f"{parameter.reference!r} (assigned: {', '.join(sorted(assignments)) or 'none'})"
            )
        values[parameter.name] = assignments[parameter.reference]
    if non_metadata != len(assignments):
        raise RenderError(
            f"the assignment has {len(assignments)} parameters but the trial template "
            f"references {non_metadata}"
        )
    for name, value in values.items():
        text = text.replace(f"${{trialParameters.{name}}}", value)
    left = sorted(set(PLACEHOLDER.findall(text)))
    if left:
        raise RenderError(
            f"unresolved placeholder(s) {', '.join(left)}: not declared in trialParameters; "
            "declare each in spec.trialTemplate.trialParameters or remove it from the template"
        )
    return text


def _is_pod_template(node: Mapping[str, Any]) -> bool:
    spec = node.get("spec")
    return isinstance(spec, dict) and isinstance(spec.get("containers"), list)


def annotate_pod_templates(node: Any, key: str = naming.ISTIO_INJECT, value: str = "false") -> None:
    """Give every pod template at any depth `key: value` unless the user set that key.

    A pod template is any object with `spec.containers` (a Job's `spec.template`, a TFJob's
    replica templates, an Argo template's pod, a bare Pod). The user's choice wins, whether made
    as an annotation or as the label istio also honours.
    """
    if isinstance(node, list):
        for item in node:
            annotate_pod_templates(item, key, value)
        return
    if not isinstance(node, dict):
        return
    if _is_pod_template(node):
        meta = node.get("metadata")
        if not isinstance(meta, dict):
            meta = node["metadata"] = {}
        labels = meta.get("labels") or {}
        annotations = meta.get("annotations")
        if not isinstance(annotations, dict):
            annotations = meta["annotations"] = {}
        if key not in annotations and key not in labels:
            annotations[key] = value
    for child in node.values():
        annotate_pod_templates(child, key, value)


def render_run_spec(
    experiment: Experiment,
    assignment: TrialAssignment,
    namespace: str,
    config_map: Obj | None,
    *,
    inject_istio: bool = True,
) -> Obj:
    """The job object of one trial.

    Raises:
        RenderError: see `template_source` and `substitute`, or the result is not a valid object.
    """
    template = experiment.spec.trial_template
    if template is None:
        raise RenderError("the Experiment has no trialTemplate")
    text, template_object = template_source(template, config_map)
    assigned = {a.name: a.value for a in assignment.parameter_assignments or []}
    rendered_text = substitute(
        text, template, template_object, assigned, assignment.name, namespace
    )
    try:
        rendered = (
            json.loads(rendered_text)
            if template.trial_spec is not None
            else yaml.safe_load(rendered_text)
        )
    except (ValueError, yaml.YAMLError) as e:
        raise RenderError(
            f"the trial template is not valid after substitution (values are inserted as raw "
            f"text): {e}"
        ) from e
    if not isinstance(rendered, dict):
        raise RenderError("the trial template did not render to an object")
    for field in ("apiVersion", "kind"):
        if not isinstance(rendered.get(field), str) or not rendered[field]:
            raise RenderError(f"the rendered trial template has no {field}")
    meta = rendered.get("metadata")
    if meta is None:
        meta = rendered["metadata"] = {}
    if not isinstance(meta, dict):
        raise RenderError("the rendered trial template's metadata is not an object")
    meta["name"] = assignment.name
    meta["namespace"] = namespace
    if inject_istio:
        annotate_pod_templates(rendered)
    return rendered


def owner_reference(experiment_obj: Obj) -> Obj:
    meta = experiment_obj["metadata"]
    return {
        "apiVersion": "kubeflow.org/v1beta1",
        "kind": "Experiment",
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def objective_with_strategies(objective: ObjectiveSpec) -> ObjectiveSpec:
    """The objective with a strategy for every metric (upstream copies them into each Trial)."""
    filled = objective.model_copy(deep=True)
    filled.metric_strategies = [
        MetricStrategy(name=name, value=value)
        for name, value in observations.strategies(objective).items()
    ]
    return filled


def build_trial(
    experiment_obj: Obj,
    experiment: Experiment,
    assignment: TrialAssignment,
    run_spec: Obj | None,
    render_error: str | None = None,
) -> Obj:
    """The Trial object; without a run_spec when the template failed."""
    name = experiment.metadata.name or ""
    namespace = experiment.metadata.namespace or ""
    template = experiment.spec.trial_template or TrialTemplate()
    labels = {
        **(experiment.metadata.labels or {}),
        naming.LABEL_EXPERIMENT: naming.label_value(name),
        **(assignment.labels or {}),
    }
    spec: dict[str, Any] = {
        "parameterAssignments": [a.to_wire() for a in assignment.parameter_assignments or []],
        "metricsCollector": (
            experiment.spec.metrics_collector_spec
            or MetricsCollectorSpec.model_validate({"collector": {"kind": "StdOut"}})
        ).to_wire(),
    }
    if experiment.spec.objective is not None:
        spec["objective"] = objective_with_strategies(experiment.spec.objective).to_wire()
    if experiment.spec.early_stopping is not None and assignment.early_stopping_rules:
        spec["earlyStoppingRules"] = [r.to_wire() for r in assignment.early_stopping_rules]
    if run_spec is not None:
        spec["runSpec"] = run_spec
    if template.retain is not None:
        spec["retainRun"] = template.retain
    if template.primary_pod_labels:
        spec["primaryPodLabels"] = dict(template.primary_pod_labels)
    if template.primary_container_name:
        spec["primaryContainerName"] = template.primary_container_name
    success, failure = template.success_condition, template.failure_condition
    if not (success and failure) and run_spec is not None:
        defaults = jobstatus.default_conditions(
            str(run_spec.get("kind")), str(run_spec.get("apiVersion"))
        )
        if defaults is not None:
            success, failure = defaults.success_condition, defaults.failure_condition
    if success and failure:
        spec["successCondition"] = success
        spec["failureCondition"] = failure
    metadata: dict[str, Any] = {
        "name": assignment.name,
        "namespace": namespace,
        "labels": labels,
        "ownerReferences": [owner_reference(experiment_obj)],
    }
    if render_error is not None:
        metadata["annotations"] = {naming.ANNOTATION_RENDER_ERROR: render_error}
    return {
        "apiVersion": "kubeflow.org/v1beta1",
        "kind": "Trial",
        "metadata": metadata,
        "spec": spec,
    }


def assignments_by_name(assignments: Sequence[TrialAssignment]) -> dict[str, TrialAssignment]:
    return {a.name: a for a in assignments}
