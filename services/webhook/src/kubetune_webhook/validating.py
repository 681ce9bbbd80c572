"""Experiment validation (`/validate-experiment`): every rule, messages with the fix.

Each problem is one line `<field path>: <what is wrong>; <what to do>`. The rules are pure
functions of the Experiment, the old one (UPDATE), the katib-config and a `Cluster` seam for the
three things that need the API server: the namespace's labels (rule a), a ConfigMap template
(rule 8) and a PersistentVolume (the FromVolume check: an old PV of the same name). Nothing
here raises on any input: a manifest of the wrong shape is denied with the fields named.

Neighbours: `defaulting` (runs before this), `reviewing` (turns problems into a denial),
`lookups` (the real `Cluster`).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import yaml
from pydantic import ValidationError

from kubetune import (
    algorithmsettings,
    earlystopping,
    errors,
    jobfields,
    jobstatus,
    knownresults,
    naming,
    nas,
    observations,
)
from kubetune.api.common import CollectorKind, FileFormat, FileSystemKind, MetricsCollectorSpec
from kubetune.api.errors import describe
from kubetune.api.experiment import (
    Experiment,
    ExperimentSpec,
    ParameterSpec,
    ParameterType,
    ResumePolicy,
    TrialTemplate,
)
from kubetune.config import ConfigError, KatibConfig
from kubetune_webhook import objectives

log = logging.getLogger(__name__)

NAME_RE = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?")
NAME_MAX = 40
PLACEHOLDER_RE = re.compile(r"\$\{trialParameters\..+?\}")
METADATA_REF_RE = re.compile(r"^\$\{trialSpec\.(.+?)\}$")
INDEXED_REF_RE = re.compile(r"^(.+)\[(.+)]$")
METADATA_KEYS = ("Name", "Namespace", "Kind", "APIVersion")
INDEXED_METADATA_KEYS = ("Labels", "Annotations")
TWO_SUBEXPRESSIONS_RE = re.compile(r".*\(.*\).*\(.*\).*")
EDITABLE = (
    "only spec.parallelTrialCount, spec.maxTrialCount and spec.maxFailedTrialCount are editable"
)

RESUME_POLICIES = ("Never", "LongRunning", "FromVolume")
PARAMETER_TYPES = ("int", "double", "categorical", "discrete")
DISTRIBUTIONS = ("uniform", "logUniform", "normal", "logNormal")
CONFIGURED_COLLECTORS = ("StdOut", "TensorFlowEvent", "File", "PrometheusMetric")
COLLECTOR_KINDS = ("StdOut", "File", "TensorFlowEvent", "PrometheusMetric", "Custom", "Push")


class ClusterError(Exception):
    """A lookup failed for a reason other than "not found" (the API server is unreachable...)."""


class KindNotInstalled(ClusterError):
    """Discovery answered: the API server serves no such kind (its CRD is not installed). A
    definite answer, not a failure to retry; callers that only know ClusterError see one."""


class Cluster(Protocol):
    """What validation reads from the API server; `lookups.KubeCluster` is the real one."""

    def namespace_labels(self, name: str) -> dict[str, str] | None:
        """The namespace's labels, None when it does not exist. Raises ClusterError."""
        ...

    def config_map_data(self, namespace: str, name: str) -> dict[str, str] | None:
        """The ConfigMap's `data`, None when it does not exist. Raises ClusterError."""
        ...

    def persistent_volume(self, name: str) -> dict[str, Any] | None:
        """The PersistentVolume, None when it does not exist. Raises ClusterError."""
        ...


@dataclass(frozen=True)
class Options:
    """Switches of the validator (flags of `webhook serve`)."""

    require_namespace_label: bool = False
    """Rule (a) as a denial: the namespace must carry `katib.kubeflow.org/metrics-collector-
    injection: enabled`. Off by default: such an Experiment is accepted with an admission
    warning (`namespace_warnings`), since its trials run but their pods get no collector (the
    pod webhook's namespaceSelector needs the label)."""


# --- shape ------------------------------------------------------------------------------------


def _enum_problem(value: Any, allowed: Sequence[str], path: str, what: str) -> str | None:
    if value is None or value in allowed:
        return None
    return f"{path}: invalid {what} {value!r}; use one of {', '.join(allowed)}"


def check_shape(manifest: dict[str, Any]) -> list[str]:
    """Enum fields with upstream's messages, before the model gives its generic ones."""
    problems: list[str] = []
    spec = manifest.get("spec")
    if not isinstance(spec, dict):
        return problems
    policy = spec.get("resumePolicy")
    if policy not in (None, "", *RESUME_POLICIES):
        problems.append(
            f"spec.resumePolicy: invalid ResumePolicyType {policy!r}; use one of "
            f"{', '.join(RESUME_POLICIES)}"
        )
    objective = spec.get("objective")
    if isinstance(objective, dict):
        problem = _enum_problem(
            objective.get("type"), ("minimize", "maximize"), "spec.objective.type", "type"
        )
        if problem:
            problems.append(problem)
    params = spec.get("parameters")
    for index, param in enumerate(params if isinstance(params, list) else []):
        if not isinstance(param, dict):
            continue
        path = f"spec.parameters[{index}]"
        ptype = param.get("parameterType")
        if ptype not in (*PARAMETER_TYPES, "unknown"):
            problems.append(
                f"{path}.parameterType: invalid parameterType {ptype!r}; use one of "
                f"{', '.join(PARAMETER_TYPES)}"
            )
        space = param.get("feasibleSpace")
        if isinstance(space, dict) and space.get("distribution") not in (
            None,
            "",
            *DISTRIBUTIONS,
            "unknown",
        ):
            problems.append(
                f"{path}.feasibleSpace.distribution: invalid distribution "
                f"{space.get('distribution')!r}; use one of {', '.join(DISTRIBUTIONS)}"
            )
    return problems + objectives.check_shape(manifest)


def load(manifest: Any, what: str = "object") -> tuple[Experiment | None, list[str]]:
    """The model, or None and the problems that stop it loading (each naming its field)."""
    if not isinstance(manifest, dict):
        return None, [f"{what}: expected an Experiment object, got {type(manifest).__name__}"]
    problems = check_shape(manifest)
    cleaned = manifest
    spec = manifest.get("spec")
    if isinstance(spec, dict) and isinstance(spec.get("parameters"), list):
        # `distribution: ""` is Katib's "unset" (the mutating webhook fills it in).
        cleaned = json.loads(json.dumps(manifest))
        for param in cleaned["spec"]["parameters"]:
            space = param.get("feasibleSpace") if isinstance(param, dict) else None
            if isinstance(space, dict) and space.get("distribution") == "":
                del space["distribution"]
    try:
        return Experiment.model_validate(cleaned), problems
    except ValidationError as e:
        covered = {p.split(":", 1)[0] for p in problems}
        extra = [
            f"{line}; fix this field"
            for line in describe(e)
            if line.split(":", 1)[0] not in covered
        ]
        return None, problems + extra
    except (ValueError, TypeError, RecursionError) as e:
        return None, [f"{what}: not an Experiment: {e}"]


# --- the rules --------------------------------------------------------------------------------


def validate_name(experiment: Experiment) -> list[str]:
    """Rule 1: a lowercase first letter (upstream's start-anchored regex), at most 40 chars."""
    meta = experiment.metadata
    name = meta.name or meta.generate_name or ""
    problems = []
    if not NAME_RE.match(name):
        problems.append(
            f"metadata.name: {name!r} must start with a lowercase letter and consist of "
            "lowercase letters, digits and '-' (regex ^[a-z]([-a-z0-9]*[a-z0-9])?); rename it"
        )
    if len(name) > NAME_MAX:
        problems.append(
            f"metadata.name: {name!r} is {len(name)} characters long; use at most {NAME_MAX}"
        )
    return problems


def validate_counts(spec: ExperimentSpec) -> list[str]:
    """Rules 2 and 3: positive counts, and neither failed nor parallel above the maximum."""
    problems = []
    if spec.max_failed_trial_count is not None and spec.max_failed_trial_count < 0:
        problems.append(
            f"spec.maxFailedTrialCount: {spec.max_failed_trial_count} is negative; set 0 or more"
        )
    if spec.max_trial_count is not None and spec.max_trial_count <= 0:
        problems.append(
            f"spec.maxTrialCount: {spec.max_trial_count} must be greater than 0; set a positive "
            "number or remove it"
        )
    if spec.parallel_trial_count is not None and spec.parallel_trial_count <= 0:
        problems.append(
            f"spec.parallelTrialCount: {spec.parallel_trial_count} must be greater than 0; "
            "set a positive number or remove it (default 3)"
        )
    if spec.max_trial_count is not None:
        if (
            spec.max_failed_trial_count is not None
            and spec.max_failed_trial_count > spec.max_trial_count
        ):
            problems.append(
                f"spec.maxFailedTrialCount: {spec.max_failed_trial_count} is greater than "
                f"spec.maxTrialCount {spec.max_trial_count}; lower it or raise maxTrialCount"
            )
        if (
            spec.parallel_trial_count is not None
            and spec.parallel_trial_count > spec.max_trial_count
        ):
            problems.append(
                f"spec.parallelTrialCount: {spec.parallel_trial_count} is greater than "
                f"spec.maxTrialCount {spec.max_trial_count}; lower it or raise maxTrialCount"
            )
    return problems


def _condition(experiment: Experiment, ctype: str) -> tuple[bool, str]:
    for cond in (experiment.status.conditions if experiment.status else None) or []:
        if cond.type == ctype and cond.status == "True":
            return True, cond.reason or ""
    return False, ""


def validate_update(new: Experiment, old: Experiment) -> list[str]:
    """Rule 4: a completed experiment changes only when restartable, and only the counts."""
    new_spec = new.spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    old_spec = old.spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    if new_spec == old_spec:
        return []
    problems = []
    succeeded, reason = _condition(old, "Succeeded")
    failed, _ = _condition(old, "Failed")
    policy = old.spec.resume_policy or ResumePolicy.NEVER
    restartable = (
        succeeded
        and reason == "ExperimentMaxTrialsReached"
        and policy in (ResumePolicy.LONG_RUNNING, ResumePolicy.FROM_VOLUME)
    )
    if (succeeded or failed) and not restartable:
        if failed:
            why = "it has failed"
        elif policy not in (ResumePolicy.LONG_RUNNING, ResumePolicy.FROM_VOLUME):
            why = f"its resumePolicy is {policy.value or 'Never'}"
        else:
            why = f"it succeeded with reason {reason or '(none)'}, not ExperimentMaxTrialsReached"
        problems.append(
            f"spec.resumePolicy: experiment {old.metadata.name} is completed and cannot be "
            f"restarted because {why}; only an experiment that succeeded by reaching "
            "maxTrialCount with resumePolicy LongRunning or FromVolume can be restarted "
            "(create a new Experiment instead)"
        )
    trials = (old.status.trials if old.status else None) or 0
    if new.spec.max_trial_count is not None and new.spec.max_trial_count <= trials:
        problems.append(
            f"spec.maxTrialCount: {new.spec.max_trial_count} must be greater than the "
            f"{trials} trials already created; raise it above {trials}"
        )
    for key in ("parallelTrialCount", "maxTrialCount", "maxFailedTrialCount"):
        old_spec.pop(key, None)
        new_spec.pop(key, None)
    if new_spec != old_spec:
        changed = sorted(
            k for k in set(new_spec) | set(old_spec) if new_spec.get(k) != old_spec.get(k)
        )
        problems.append(
            f"spec: {', '.join('spec.' + k for k in changed)} cannot change after creation; "
            f"{EDITABLE}"
        )
    return problems


def validate_objective(spec: ExperimentSpec) -> list[str]:
    """Rule 5."""
    objective = spec.objective
    if objective is None:
        return ["spec.objective: required; set type, objectiveMetricName (and goal)"]
    problems = []
    if objective.type is None or objective.type.value not in ("minimize", "maximize"):
        problems.append("spec.objective.type: must be minimize or maximize")
    if not objective.objective_metric_name:
        problems.append("spec.objective.objectiveMetricName: required; name the metric to optimise")
    elif objective.objective_metric_name in (objective.additional_metric_names or []):
        problems.append(
            f"spec.objective.additionalMetricNames: contains the objective metric "
            f"{objective.objective_metric_name!r}; remove it from additionalMetricNames"
        )
    additional = list(objective.additional_metric_names or [])
    if len(additional) + 1 > observations.MAX_METRICS:
        problems.append(
            f"spec.objective.additionalMetricNames: {len(additional)} names, more than "
            f"{observations.MAX_METRICS - 1} (an observation holds at most "
            f"{observations.MAX_METRICS} metrics): collect fewer metrics"
        )
    for field, name in [("objectiveMetricName", objective.objective_metric_name)] + [
        (f"additionalMetricNames[{i}]", n) for i, n in enumerate(additional)
    ]:
        if name and len(name) > observations.MAX_NAME_CHARS:
            problems.append(
                f"spec.objective.{field}: {len(name)} characters, more than "
                f"{observations.MAX_NAME_CHARS}: use a shorter metric name"
            )
    return problems


def validate_algorithm(spec: ExperimentSpec, config: KatibConfig) -> list[str]:
    """Rule 6: the algorithm (and early stopping) must be configured with an image."""
    problems = []
    algorithm = spec.algorithm
    if algorithm is None:
        problems.append("spec.algorithm: required; set algorithm.algorithmName")
    elif not algorithm.algorithm_name:
        problems.append("spec.algorithm.algorithmName: required; e.g. random, tpe, grid")
    else:
        try:
            entry = config.suggestion(algorithm.algorithm_name)
        except ConfigError as e:
            known = ", ".join(s.algorithm_name for s in config.runtime.suggestions if s.image)
            problems.append(
                f"spec.algorithm.algorithmName: {e}; use one of: {known or '(none configured)'}"
            )
        else:
            # A Katib gRPC image judges its own settings (ValidateAlgorithmSettings, through
            # kubetune's bridge in its pod), as upstream's suggestion controller has it do.
            if not entry.katib_grpc():
                problems += validate_algorithm_settings(spec)
    early = spec.early_stopping
    if early is not None:
        if not early.algorithm_name:
            problems.append(
                "spec.earlyStopping.algorithmName: required; use one of "
                + ", ".join(earlystopping.ALGORITHMS)
            )
        elif config.bridged_early_stopping(early.algorithm_name) is None:
            # kubetune computes these rules itself (suggestion-algorithm): no katib-config entry.
            # A Katib early-stopping image (earlyStoppings[]) validates its own settings.
            problems += earlystopping.validate(early.algorithm_name, early.algorithm_settings)
    return problems


def validate_algorithm_settings(spec: ExperimentSpec) -> list[str]:
    """Settings of the algorithms `kubetune.algorithmsettings` knows (others: the service's)."""
    assert spec.algorithm is not None
    name = spec.algorithm.algorithm_name
    if name not in algorithmsettings.SETTINGS:
        return []
    try:
        problems = algorithmsettings.validate(
            name, spec.algorithm.algorithm_settings, spec.parameters, spec.parallel_trial_count
        )
    except Exception as e:
        # Fail closed: settings nobody could check must not reach the algorithm (a grid that
        # could not be counted once went on to allocate gigabytes).
        log.exception("kubetune.algorithmsettings.validate failed for %s", name)
        return [
            f"spec.algorithm.algorithmSettings: the settings of algorithm {name} could not be "
            f"checked ({type(e).__name__}: {str(e)[:200]}); correct them or report this error"
        ]
    out = [f"spec.{p.field}: {p.message}" for p in nas.validate_config(name, spec.nas_config)]
    out += [f"spec.algorithm.algorithmSettings: {p}" for p in problems]
    policy = spec.resume_policy.value if spec.resume_policy is not None else ""
    if name == "pbt" and policy != "FromVolume":
        out.append(
            "spec.resumePolicy: algorithm pbt shares each trial's checkpoint through the "
            "suggestion's volume, which only FromVolume creates; set resumePolicy: FromVolume"
        )
    return out


def validate_resume_policy(spec: ExperimentSpec) -> list[str]:
    """Rule 7 (the model already restricts the value; `check_shape` names a bad one)."""
    if spec.resume_policy is None or spec.resume_policy.value in ("", *RESUME_POLICIES):
        return []
    return [f"spec.resumePolicy: invalid ResumePolicyType {spec.resume_policy.value!r}"]


# --- trial template (rule 8) ------------------------------------------------------------------

TemplateReader = Callable[[str, str, str], str]
"""(configMapNamespace, configMapName, templatePath) -> template text; raises LookupError."""


def _valid_metadata_ref(reference: str) -> bool:
    m = METADATA_REF_RE.match(reference)
    if not m:
        return False
    key = m.group(1)
    if key in METADATA_KEYS:
        return True
    indexed = INDEXED_REF_RE.match(key)
    return bool(indexed and indexed.group(1) in INDEXED_METADATA_KEYS)


def _template_text(
    template: TrialTemplate, read: TemplateReader | None
) -> tuple[str | None, bool, list[str]]:
    """(text, is_yaml, problems); text None means stop."""
    base = "spec.trialTemplate"
    has_spec = template.trial_spec is not None
    has_cm = template.config_map is not None
    if not has_spec and not has_cm:
        return None, False, [f"{base}: set exactly one of trialSpec or configMap (none is set)"]
    if has_spec and has_cm:
        return None, False, [f"{base}: set exactly one of trialSpec or configMap (both are set)"]
    if has_spec:
        return json.dumps(template.trial_spec), False, []
    cm = template.config_map
    assert cm is not None
    missing = [
        f
        for f, v in (
            ("configMapName", cm.config_map_name),
            ("configMapNamespace", cm.config_map_namespace),
            ("templatePath", cm.template_path),
        )
        if not v
    ]
    if missing:
        return (
            None,
            True,
            [
                f"{base}.configMap.{f}: required; name the ConfigMap holding the template"
                for f in missing
            ],
        )
    assert cm.config_map_name and cm.config_map_namespace and cm.template_path
    if read is None:
        return None, True, [f"{base}.configMap: cannot read ConfigMaps here"]
    try:
        return read(cm.config_map_namespace, cm.config_map_name, cm.template_path), True, []
    except LookupError as e:
        return None, True, [f"{base}.configMap: {e}"]


def validate_trial_template(
    spec: ExperimentSpec, read: TemplateReader | None, *, command_from_image: bool = False
) -> list[str]:
    """Rule 8, in upstream's order; an unusable template stops the checks that need it."""
    template = spec.trial_template
    base = "spec.trialTemplate"
    if template is None:
        return [f"{base}: required; set trialSpec (or configMap) and primaryContainerName"]
    problems = []
    if not template.primary_container_name:
        problems.append(
            f"{base}.primaryContainerName: required; name the container that runs the training"
        )
    for field, value in (
        ("successCondition", template.success_condition),
        ("failureCondition", template.failure_condition),
    ):
        if not value:
            problems.append(
                f"{base}.{field}: required for this job kind (no default); write a GJSON "
                "condition, e.g. status.conditions.#(type=="
                f'"{"Complete" if field == "successCondition" else "Failed"}")#|#(status=="True")#'
            )
            continue
        try:
            jobstatus.validate_expression(value)
        except jobstatus.InvalidConditionExpression as e:
            problems.append(f"{base}.{field}: {e.reason} in {value!r}; fix the GJSON expression")
    if template.trial_parameters is None:
        problems.append(
            f"{base}.trialParameters: required; map each ${{trialParameters.<name>}} of the "
            "template to a parameter"
        )
        return problems
    text, is_yaml, source_problems = _template_text(template, read)
    if text is None:
        return problems + source_problems
    parameter_names = {p.name for p in spec.parameters or []}
    names: set[str] = set()
    references: set[str] = set()
    for index, tp in enumerate(template.trial_parameters):
        path = f"{base}.trialParameters[{index}]"
        if not tp.name or not tp.reference or "{" in tp.name or "}" in tp.name:
            problems.append(
                f"{path}: name and reference are required and the name must not contain "
                "'{' or '}'"
            )
            continue
        if tp.name in names:
            problems.append(f"{path}.name: {tp.name!r} is used twice; make names unique")
            continue
        if tp.reference in references:
            problems.append(
                f"{path}.reference: {tp.reference!r} is referenced twice; reference each "
                "parameter once"
            )
            continue
        names.add(tp.name)
        references.add(tp.reference)
        if (
            parameter_names
            and tp.reference not in parameter_names
            and not _valid_metadata_ref(tp.reference)
        ):
            problems.append(
                f"{path}.reference: {tp.reference!r} is neither a parameter of spec.parameters "
                "nor a metadata reference like ${trialSpec.Name} or ${trialSpec.Labels[key]}"
            )
        placeholder = "${trialParameters." + tp.name + "}"
        if placeholder not in text:
            problems.append(
                f"{path}: {placeholder} does not appear in the trial template; use it there "
                "or remove this trial parameter"
            )
            return problems
    replaced = text
    for name in names:
        replaced = replaced.replace("${trialParameters." + name + "}", "test-value")
    leftover = PLACEHOLDER_RE.findall(replaced)
    if leftover:
        problems.append(
            f"{base}: {', '.join(sorted(set(leftover)))} in the template has no entry in "
            "trialParameters; add one or remove the placeholder"
        )
        return problems
    try:
        job = yaml.safe_load(replaced) if is_yaml else json.loads(replaced)
    except (ValueError, yaml.YAMLError) as e:
        problems.append(f"{base}: the template does not parse after substitution: {e}")
        return problems
    if not isinstance(job, dict):
        problems.append(f"{base}: the template must be a Kubernetes object (a mapping)")
        return problems
    meta = job.get("metadata")
    if isinstance(meta, dict):
        for key in ("name", "namespace"):
            if meta.get(key):
                problems.append(
                    f"{base}.trialSpec.metadata.{key}: must not be set; kubetune names each "
                    "trial's job after the trial, in the experiment's namespace"
                )
    for key in ("apiVersion", "kind"):
        if not job.get(key):
            problems.append(f"{base}.trialSpec.{key}: required in the trial template")
    if job.get("apiVersion") == "batch/v1" and job.get("kind") == "Job":
        # The API server would drop these silently: the trial would run without them.
        problems += [
            f"{base}.trialSpec.{path}: unknown field of a batch/v1 Job; check its spelling"
            for path in jobfields.unknown_fields(job)
        ]
    where = (
        f"{base}.trialSpec"
        if template.trial_spec is not None
        else f"{base}.configMap[{template.config_map.template_path if template.config_map else ''}]"
    )
    return problems + primary_container_problems(job, spec, where, command_from_image)


WRAPPED_COLLECTORS = (
    CollectorKind.STDOUT.value,
    CollectorKind.FILE.value,
    CollectorKind.TENSORFLOW_EVENT.value,
    CollectorKind.PROMETHEUS_METRIC.value,
)
IMPLICIT_CONTAINER_GROUPS = ("argoproj.io/", "tekton.dev/")
"""Job kinds whose containers are named by their controller (Argo's `main`, Tekton's
`step-<name>`), not listed under `containers`: the primary container cannot be checked."""


def _pod_specs(
    node: Any, path: str, labels: Any = None
) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(path, pod spec, its template's labels) for every mapping holding a `containers` list."""
    found: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
    if isinstance(node, dict):
        if isinstance(node.get("containers"), list):
            found.append((path, node, labels if isinstance(labels, dict) else {}))
        meta = node.get("metadata")
        for key, value in node.items():
            child_labels = meta.get("labels") if key == "spec" and isinstance(meta, dict) else None
            found += _pod_specs(value, f"{path}.{key}", child_labels)
    elif isinstance(node, list):
        for index, item in enumerate(node):
            found += _pod_specs(item, f"{path}[{index}]")
    return found


def primary_container_problems(
    job: dict[str, Any], spec: ExperimentSpec, where: str, command_from_image: bool = False
) -> list[str]:
    """The primary container must be in the template and, when the collector wraps its command
    and the pod webhook does not read it from the image (`command_from_image`), have a
    `command`: otherwise every trial pod is refused and the Experiment cannot run."""
    template = spec.trial_template
    name = template.primary_container_name if template else None
    if template is None or not name:
        return []
    if str(job.get("apiVersion") or "").startswith(IMPLICIT_CONTAINER_GROUPS):
        return []
    pod_specs = _pod_specs(job.get("spec"), f"{where}.spec")
    if not pod_specs:
        return []  # the pods are described elsewhere (a TrainJob's runtime): cannot check
    names: list[str] = []
    primaries: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
    for path, pod_spec, labels in pod_specs:
        for index, container in enumerate(pod_spec["containers"]):
            if not isinstance(container, dict):
                continue
            names.append(str(container.get("name")))
            if container.get("name") == name:
                primaries.append((f"{path}.containers[{index}]", container, labels))
    if not primaries:
        return [
            f"spec.trialTemplate.primaryContainerName: {name!r} is not a container of the trial "
            f"template (its containers: {', '.join(sorted(set(names))) or 'none'}); set it to "
            "the name of the container that runs the training"
        ]
    mc = spec.metrics_collector_spec
    kind = (mc.collector.kind if mc and mc.collector else None) or CollectorKind.STDOUT.value
    if kind not in WRAPPED_COLLECTORS or command_from_image:
        return []
    wanted = template.primary_pod_labels or {}
    problems = []
    for path, container, labels in primaries:
        # A pod is primary when it has every primaryPodLabels pair; labels its controller adds
        # (a replica type...) are not known here, so only a template that has them all counts.
        if container.get("command") or any(labels.get(k) != v for k, v in wanted.items()):
            continue
        problems.append(
            f"{path}.command: required for primary container {name!r}: the {kind} metrics "
            "collector wraps the training command and reading the image's ENTRYPOINT is "
            "switched off (katib-config init.controller.imageCommandLookup); set "
            "command (e.g. command: [python3, train.py])"
        )
    return problems


# --- parameters (rules 9, 10) -----------------------------------------------------------------


def validate_parameter(parameter: ParameterSpec, path: str) -> list[str]:
    """Rule 10 for one parameter."""
    problems = []
    space = parameter.feasible_space
    if parameter.parameter_type.value not in (*PARAMETER_TYPES, "unknown"):
        problems.append(f"{path}.parameterType: use one of {', '.join(PARAMETER_TYPES)}")
    if space.distribution is not None and space.distribution.value not in (
        *DISTRIBUTIONS,
        "unknown",
    ):
        problems.append(f"{path}.feasibleSpace.distribution: use one of {', '.join(DISTRIBUTIONS)}")
    if all(v is None for v in (space.min, space.max, space.step, space.values)):
        problems.append(
            f"{path}.feasibleSpace: required; set min and max (int, double) or list "
            "(categorical, discrete)"
        )
        return problems
    if parameter.parameter_type in (ParameterType.INT, ParameterType.DOUBLE):
        if space.values is not None:
            problems.append(
                f"{path}.feasibleSpace.list: not allowed for parameterType "
                f"{parameter.parameter_type.value}; use min and max"
            )
        if not space.min or not space.max:
            problems.append(
                f"{path}.feasibleSpace: min and max are required for parameterType "
                f"{parameter.parameter_type.value}"
            )
    elif parameter.parameter_type in (ParameterType.CATEGORICAL, ParameterType.DISCRETE):
        for key, value in (("min", space.min), ("max", space.max), ("step", space.step)):
            if value is not None:
                problems.append(
                    f"{path}.feasibleSpace.{key}: not allowed for parameterType "
                    f"{parameter.parameter_type.value}; use list"
                )
    return problems


def validate_search_space(spec: ExperimentSpec) -> list[str]:
    """Rules 9 and 10."""
    if not spec.parameters and spec.nas_config is None:
        return ["spec.parameters: required; set parameters (or nasConfig for NAS)"]
    if spec.parameters and spec.nas_config is not None:
        return ["spec.parameters: set either parameters or nasConfig, not both"]
    problems = []
    for index, parameter in enumerate(spec.parameters or []):
        problems += validate_parameter(parameter, f"spec.parameters[{index}]")
    return problems


# --- metrics collector (rule 11) --------------------------------------------------------------


def _absolute(path: str | None) -> bool:
    return bool(path) and str(path).startswith("/")


def validate_metrics_collector(mc: MetricsCollectorSpec | None, config: KatibConfig) -> list[str]:
    """Rule 11."""
    base = "spec.metricsCollectorSpec"
    kind = (mc.collector.kind if mc and mc.collector else None) or (
        "StdOut" if mc is None or mc.collector is None else ""
    )
    problems = []
    if kind not in COLLECTOR_KINDS:
        hint = " (renamed Push in v0.18)" if kind == "None" else ""
        return [
            f"{base}.collector.kind: invalid metrics collector kind {kind!r}{hint}; use one of "
            f"{', '.join(COLLECTOR_KINDS)}"
        ]
    if kind in CONFIGURED_COLLECTORS:
        try:
            config.metrics_collector(kind)
        except ConfigError as e:
            problems.append(
                f"{base}.collector.kind: {e}; add a metricsCollectors entry to katib-config or "
                "choose another kind"
            )
    source = mc.source if mc else None
    fsp = source.file_system_path if source else None
    filters = (source.filter.metrics_format if source and source.filter else None) or []
    if kind == CollectorKind.FILE.value:
        if fsp is None or fsp.kind is not FileSystemKind.FILE or not _absolute(fsp.path):
            problems.append(
                f"{base}.source.fileSystemPath: File collector needs kind File and an absolute "
                "path (e.g. /var/log/katib/metrics.log)"
            )
        if fsp is None or fsp.format not in (FileFormat.TEXT, FileFormat.JSON):
            problems.append(f"{base}.source.fileSystemPath.format: use TEXT or JSON")
        elif fsp.format is FileFormat.JSON and filters:
            problems.append(
                f"{base}.source.filter: a filter does not apply to format JSON; remove it"
            )
    elif kind == CollectorKind.TENSORFLOW_EVENT.value:
        if fsp is None or fsp.kind is not FileSystemKind.DIRECTORY or not _absolute(fsp.path):
            problems.append(
                f"{base}.source.fileSystemPath: TensorFlowEvent collector needs kind Directory "
                "and an absolute path (e.g. /var/log/katib/tfevent/)"
            )
        if fsp is not None and fsp.format is not None:
            problems.append(
                f"{base}.source.fileSystemPath.format: must be empty for TensorFlowEvent"
            )
    elif kind == CollectorKind.PROMETHEUS_METRIC.value:
        http_get = (source.http_get if source else None) or {}
        port = http_get.get("port")
        if isinstance(port, bool) or not (
            (isinstance(port, int) and port > 0)
            or (isinstance(port, str) and port.isdigit() and int(port) > 0)
        ):
            problems.append(
                f"{base}.source.httpGet.port: {port!r} must be a positive port number "
                "(named ports are not supported)"
            )
        path = http_get.get("path")
        if not isinstance(path, str) or not path.startswith("/"):
            problems.append(f"{base}.source.httpGet.path: must start with '/', e.g. /metrics")
    elif kind == CollectorKind.CUSTOM.value:
        if not (mc and mc.collector and mc.collector.custom_collector):
            problems.append(
                f"{base}.collector.customCollector: required for kind Custom; give the "
                "collector container"
            )
        if fsp is not None and (
            not _absolute(fsp.path)
            or fsp.kind not in (FileSystemKind.DIRECTORY, FileSystemKind.FILE)
        ):
            problems.append(
                f"{base}.source.fileSystemPath: needs an absolute path and kind Directory or File"
            )
    for index, fmt in enumerate(filters):
        path = f"{base}.source.filter.metricsFormat[{index}]"
        try:
            re.compile(fmt)
        except (re.error, RecursionError, OverflowError) as e:
            problems.append(f"{path}: {fmt!r} is not a valid regular expression: {e}")
            continue
        if not TWO_SUBEXPRESSIONS_RE.match(fmt):
            problems.append(f"{path}: {fmt!r} must have two top subexpressions, (name) and (value)")
    return problems


# --- the whole check --------------------------------------------------------------------------


def validate_spec(
    experiment: Experiment, config: KatibConfig, read: TemplateReader | None
) -> list[str]:
    """Rules 1-11 of one Experiment (no update rules, no cluster state besides the template)."""
    spec = experiment.spec
    return (
        validate_name(experiment)
        + validate_counts(spec)
        + validate_objective(spec)
        + objectives.validate(spec, config)
        + validate_algorithm(spec, config)
        + validate_resume_policy(spec)
        + validate_trial_template(
            spec, read, command_from_image=config.init.controller.image_command_lookup
        )
        + validate_search_space(spec)
        + validate_metrics_collector(spec.metrics_collector_spec, config)
        + knownresults.validate_spec(experiment.metadata.name or "", spec)
    )


def left_here(pv: dict[str, Any], namespace: str, suggestion: str, claim: str) -> bool:
    """Whether the PV was made for Suggestion `namespace/suggestion` (its owner annotation, or
    for a PV without one its claimRef `namespace/claim`). Katib's PV names collide across
    namespaces; a PV of anyone else is none of this Experiment's business (the
    suggestion-controller gives its PV another name) and must never be named to its author."""
    meta = pv.get("metadata")
    annotations = (meta.get("annotations") if isinstance(meta, dict) else None) or {}
    owner = annotations.get(naming.ANNOTATION_SUGGESTION) if isinstance(annotations, dict) else None
    if owner is not None:
        return bool(owner == f"{namespace}/{suggestion}")
    spec = pv.get("spec")
    ref = (spec.get("claimRef") if isinstance(spec, dict) else None) or {}
    return isinstance(ref, dict) and (ref.get("namespace"), ref.get("name")) == (namespace, claim)


def pv_problem(experiment: Experiment, namespace: str, cluster: Cluster) -> list[str]:
    """A FromVolume Experiment may not reuse a name whose PV an earlier one of that name in
    this namespace left behind (its state would be resumed as if it were this one's)."""
    spec = experiment.spec
    if spec.resume_policy is not ResumePolicy.FROM_VOLUME or spec.algorithm is None:
        return []
    name = experiment.metadata.name or ""
    suggestion, algorithm = naming.suggestion_name(name), spec.algorithm.algorithm_name
    pv = naming.suggestion_pv_name(suggestion, algorithm, namespace)
    try:
        found = cluster.persistent_volume(pv)
    except ClusterError as e:
        return [f"spec.resumePolicy: cannot check PersistentVolume {pv}: {e}; retry"]
    claim = naming.suggestion_pvc_name(suggestion, algorithm)
    if found is not None and left_here(found, namespace, suggestion, claim):
        return [
            f"spec.resumePolicy: FromVolume experiment {name} cannot be created: PV: {pv} is "
            "not deleted (left by an earlier experiment of this name in this namespace); "
            f"delete it with `kubectl delete pv {pv}` or choose another name"
        ]
    return []


def namespace_problem(namespace: str, cluster: Cluster) -> list[str]:
    """Rule (a): the namespace must be labelled for metrics collector injection."""
    label = f"{naming.LABEL_INJECTION}={naming.INJECTION_ENABLED}"
    try:
        labels = cluster.namespace_labels(namespace)
    except ClusterError as e:
        return [f"metadata.namespace: cannot read namespace {namespace}: {e}; retry"]
    if labels is None or labels.get(naming.LABEL_INJECTION) != naming.INJECTION_ENABLED:
        return [
            f"metadata.namespace: namespace {namespace} must have label {label} so trial pods "
            f"get the metrics collector; run `kubectl label namespace {namespace} {label}`"
        ]
    return []


def namespace_warnings(namespace: str, cluster: Cluster) -> list[str]:
    """Rule (a) as a warning: the Experiment runs, but no metrics are collected there."""
    label = f"{naming.LABEL_INJECTION}={naming.INJECTION_ENABLED}"
    try:
        labels = cluster.namespace_labels(namespace)
    except ClusterError as e:
        return [f"cannot check namespace {namespace} for label {label}: {e}"]
    if labels is not None and labels.get(naming.LABEL_INJECTION) == naming.INJECTION_ENABLED:
        return []
    # At most 256 characters whatever the namespace: longer warnings may be truncated.
    return [
        "no metrics will be collected for this Experiment: its namespace lacks the "
        f"injection label; run: kubectl label namespace {namespace} {label}"
    ]


def warnings(
    manifest: Any, *, operation: str, namespace: str, cluster: Cluster, options: Options = Options()
) -> list[str]:
    """Admission warnings for an allowed Experiment: shown by kubectl, never a denial."""
    if operation != "CREATE" or options.require_namespace_label:
        return []
    meta = manifest.get("metadata") if isinstance(manifest, dict) else None
    namespace = namespace or (str(meta.get("namespace") or "") if isinstance(meta, dict) else "")
    return namespace_warnings(namespace, cluster) if namespace else []


def template_reader(cluster: Cluster) -> TemplateReader:
    def read(namespace: str, name: str, key: str) -> str:
        try:
            data = cluster.config_map_data(namespace, name)
        except errors.InvalidName as e:
            raise LookupError(f"{e}; fix configMapName and configMapNamespace") from e
        except ClusterError as e:
            raise LookupError(f"cannot read ConfigMap {namespace}/{name}: {e}") from e
        if data is None:
            raise LookupError(
                f"ConfigMap {namespace}/{name} does not exist; create it or fix configMapName"
            )
        if key not in data:
            raise LookupError(f"ConfigMap {namespace}/{name} has no key {key!r}; fix templatePath")
        return data[key]

    return read


def validate(
    manifest: Any,
    old_manifest: Any,
    *,
    operation: str,
    namespace: str,
    config: KatibConfig,
    cluster: Cluster,
    options: Options = Options(),
) -> list[str]:
    """Every problem of an Experiment admission request ([] = allowed). Never raises."""
    experiment, problems = load(manifest, "object")
    if experiment is None:
        return problems
    namespace = namespace or experiment.metadata.namespace or ""
    old: Experiment | None = None
    if operation == "UPDATE":
        old, _old_problems = load(old_manifest, "oldObject")
        if old is not None:
            update_problems = validate_update(experiment, old)
            if update_problems:
                return update_problems
            same = experiment.spec.model_dump(
                mode="json", by_alias=True, exclude_none=True
            ) == old.spec.model_dump(mode="json", by_alias=True, exclude_none=True)
            if same:
                # Metadata-only writes (finalizers, labels) must always pass, or a controller
                # could never remove its finalizer after a config change.
                return []
    if options.require_namespace_label:
        problems += namespace_problem(namespace, cluster)
    problems += validate_spec(experiment, config, template_reader(cluster))
    if not problems and operation == "CREATE":
        problems += pv_problem(experiment, namespace, cluster)
    return problems
