"""`suggestion-algorithm bridge`: kubetune's sidecar beside a Katib gRPC algorithm image.

Why: a team's own algorithm, written as Katib documents it (a gRPC `Suggestion` server on port
6789, optionally an `EarlyStopping` server on 6788), should run unchanged. The suggestion-controller
puts the image in the algorithm pod as Katib would and this process beside it; the gRPC calls stay
inside the pod (localhost), and everything else is the algorithm's usual contract: this process
reads the Suggestion, its Experiment and Trials, and writes only `status.suggestions`,
`suggestionCount` and `algorithmSettings` through `syncing.Syncer` (the same status writing,
compaction and size limits as kubetune's own algorithms).

The requests are built as upstream's suggestion client builds them
(`pkg/controller.v1beta1/suggestion/suggestionclient`):

* `ValidateAlgorithmSettings` once per process, before the first `GetSuggestions` (upstream: when
  the Suggestion is not Running yet, so again after a restart). InvalidArgument or Unknown is a
  refusal: the pass writes `kubetune_validation_failed` = "ValidateAlgorithmSettings Error:
  <message>" into `status.algorithmSettings`, and the suggestion-controller fails the Suggestion
  (and so the Experiment) with "Validation failed: <that>", upstream's message. Unimplemented counts
  as valid; Unavailable is retried (the pass fails and backs off). `ValidateEarlyStoppingSettings`
  the same, when an early-stopping image is configured.
* `GetSuggestions`: the Experiment with the Suggestion's `status.algorithmSettings` laid over its
  algorithm settings (kubetune's status-only entries left out), every Trial of the Experiment
  except MetricsUnavailable ones, each with its objective, assignments, labels, start and
  completion time, its LAST condition only, and one value per observed metric chosen by the
  Trial's metric strategy (min/max fall back to latest when unavailable; no strategy: empty);
  `current_request_number` = `spec.requests - suggestionCount`, `total_request_number` =
  `spec.requests`. The reply's `algorithm` settings are merged into `status.algorithmSettings`.
* `GetEarlyStoppingRules` after `GetSuggestions` (when an early-stopping endpoint is given), with
  the same Experiment and Trials and `db_manager_address`; its rules go with every assignment of
  that request, as upstream.

Where kubetune differs: trial names are kubetune's deterministic `<experiment>-<hash of index>`
(a restart rewrites the same names; the reply's `trial_name` is not used), the reply's `labels`
are kept. A reply with fewer assignments than asked is taken as is (the rest is asked again on a
later pass); more is an error, as upstream.

`SetTrialStatus`: upstream's metrics collector calls it on the early-stopping service after it
stopped a trial, and upstream's medianstop service then marks the Trial EarlyStopped. kubetune's
collector marks the Trial itself (the one exception to one writer per field), so this process only
tells the image once per Trial it sees EarlyStopped, best effort (an image that patches the
Trial, as upstream's does, lacks the rights to: the Trial already is EarlyStopped).
"""

from __future__ import annotations

import argparse
import datetime
import logging
from collections.abc import Sequence
from typing import Any

import grpc

from kubetune import algorithmsettings, conditions, naming
from kubetune.api.common import AlgorithmSetting, ComparisonType, EarlyStoppingRule, ObjectiveSpec
from kubetune.api.common import ParameterAssignment as Assignment
from kubetune.api.experiment import Experiment, ParameterSpec
from kubetune.api.suggestion import Suggestion, TrialAssignment
from kubetune.api.trial import Trial
from kubetune.conditions import TrialCondition
from kubetune.flags import EnvDefault
from kubetune.katibapi import pb, pb_grpc
from kubetune.observations import UNAVAILABLE

log = logging.getLogger(__name__)

TIMEOUT = 60.0
"""Seconds per call, upstream's."""
DB_MANAGER_ADDRESS = "katib-db-manager.kubeflow:6789"
"""What upstream sends as `db_manager_address` unless its environment says otherwise."""
TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"

_OBJECTIVE = {"maximize": pb.MAXIMIZE, "minimize": pb.MINIMIZE}
_PARAMETER = {
    "double": pb.DOUBLE,
    "int": pb.INT,
    "discrete": pb.DISCRETE,
    "categorical": pb.CATEGORICAL,
}
_DISTRIBUTION = {
    "uniform": pb.UNIFORM,
    "logUniform": pb.LOG_UNIFORM,
    "normal": pb.NORMAL,
    "logNormal": pb.LOG_NORMAL,
}
_CONDITION = {
    TrialCondition.CREATED: pb.TrialStatus.CREATED,
    TrialCondition.RUNNING: pb.TrialStatus.RUNNING,
    TrialCondition.SUCCEEDED: pb.TrialStatus.SUCCEEDED,
    TrialCondition.KILLED: pb.TrialStatus.KILLED,
    TrialCondition.FAILED: pb.TrialStatus.FAILED,
    TrialCondition.METRICS_UNAVAILABLE: pb.TrialStatus.METRICSUNAVAILABLE,
    TrialCondition.EARLY_STOPPED: pb.TrialStatus.EARLYSTOPPED,
}
_COMPARISON = {
    pb.EQUAL: ComparisonType.EQUAL,
    pb.LESS: ComparisonType.LESS,
    pb.GREATER: ComparisonType.GREATER,
}
_REFUSALS = (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.UNKNOWN)


def _text(value: object) -> str:
    return "" if value is None else str(value)


def _set(settings: list[AlgorithmSetting], name: str, value: str) -> None:
    """Upstream's rule for settings (updateAlgorithmSettings): the same name is replaced in
    place, a new one appended."""
    for i, old in enumerate(settings):
        if old.name == name:
            settings[i] = AlgorithmSetting(name=name, value=value)
            return
    settings.append(AlgorithmSetting(name=name, value=value))


def overlaid(
    settings: Sequence[AlgorithmSetting] | None, status: Sequence[AlgorithmSetting] | None
) -> list[AlgorithmSetting]:
    """The Experiment's settings with the Suggestion status's laid over them, kubetune's
    status-only entries left out."""
    out = list(settings or ())
    for setting in status or ():
        if setting.name not in algorithmsettings.STATUS_ONLY:
            _set(out, setting.name, setting.value)
    return out


def merged(
    current: Sequence[AlgorithmSetting], reply: Sequence[Any] | None
) -> list[AlgorithmSetting]:
    """`status.algorithmSettings` after a reply's `algorithm.algorithm_settings`."""
    out = list(current)
    for setting in reply or ():
        _set(out, setting.name, setting.value)
    return out


def _objective(objective: ObjectiveSpec | None) -> Any:
    message = pb.ObjectiveSpec()
    if objective is None:
        return message
    message.type = _OBJECTIVE.get(str(objective.type or ""), pb.UNKNOWN)
    message.objective_metric_name = objective.objective_metric_name
    message.additional_metric_names.extend(objective.additional_metric_names or [])
    if objective.goal is not None:
        message.goal = float(objective.goal)
    return message


def _parameter(spec: ParameterSpec) -> Any:
    space = spec.feasible_space
    message = pb.ParameterSpec(
        name=spec.name,
        parameter_type=_PARAMETER.get(str(spec.parameter_type), pb.UNKNOWN_TYPE),
        feasible_space=pb.FeasibleSpace(
            max=_text(space.max),
            min=_text(space.min),
            list=[str(v) for v in space.values or []],
            step=_text(space.step),
        ),
    )
    if space.distribution is not None and str(space.distribution) in _DISTRIBUTION:
        message.feasible_space.distribution = _DISTRIBUTION[str(space.distribution)]
    return message


def experiment_message(
    experiment: Experiment, status_settings: Sequence[AlgorithmSetting] | None = None
) -> Any:
    """The Experiment as upstream's ConvertExperiment sends it (settings overlaid first)."""
    spec = experiment.spec
    algorithm = spec.algorithm
    message = pb.Experiment(name=experiment.metadata.name or "")
    message.spec.algorithm.algorithm_name = algorithm.algorithm_name if algorithm else ""
    for setting in overlaid(algorithm.algorithm_settings if algorithm else None, status_settings):
        message.spec.algorithm.algorithm_settings.add(name=setting.name, value=str(setting.value))
    message.spec.objective.CopyFrom(_objective(spec.objective))
    message.spec.parameter_specs.parameters.extend(_parameter(p) for p in spec.parameters or [])
    if spec.nas_config is not None:
        graph = spec.nas_config.graph_config
        if graph is not None:
            message.spec.nas_config.graph_config.num_layers = graph.num_layers or 0
            message.spec.nas_config.graph_config.input_sizes.extend(graph.input_sizes or [])
            message.spec.nas_config.graph_config.output_sizes.extend(graph.output_sizes or [])
        for operation in spec.nas_config.operations or []:
            op = message.spec.nas_config.operations.operation.add(
                operation_type=operation.operation_type or ""
            )
            op.parameter_specs.parameters.extend(_parameter(p) for p in operation.parameters or [])
    if spec.parallel_trial_count is not None:
        message.spec.parallel_trial_count = spec.parallel_trial_count
    if spec.max_trial_count is not None:
        message.spec.max_trial_count = spec.max_trial_count
    if spec.early_stopping is not None:
        message.spec.early_stopping.algorithm_name = spec.early_stopping.algorithm_name
        for s in spec.early_stopping.algorithm_settings or []:
            message.spec.early_stopping.algorithm_settings.add(name=s.name, value=str(s.value))
    return message


def _time(value: str | None) -> str:
    if not value:
        return ""
    if len(value) == 20 and value.endswith("Z"):
        return value  # what the API server writes: already upstream's format
    try:
        parsed = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return value
    return parsed.astimezone(datetime.UTC).strftime(TIME_FORMAT)


def _observation(trial: Trial) -> Any:
    """One value per metric, chosen by the Trial's strategy (upstream's convertTrialObservation)."""
    objective = trial.spec.objective
    strategies = {
        s.name: str(s.value) for s in (objective.metric_strategies if objective else None) or []
    }
    observation = trial.status.observation if trial.status else None
    metrics = []
    for metric in (observation.metrics if observation else None) or []:
        strategy = strategies.get(metric.name)
        value = ""
        if strategy == "min":
            value = _text(metric.latest if metric.min == UNAVAILABLE else metric.min)
        elif strategy == "max":
            value = _text(metric.latest if metric.max == UNAVAILABLE else metric.max)
        elif strategy == "latest":
            value = _text(metric.latest)
        metrics.append(pb.Metric(name=metric.name, value=value))
    return pb.Observation(metrics=metrics)


def trial_messages(trials: Sequence[Trial]) -> list[Any]:
    """The Trials as upstream's ConvertTrials sends them: MetricsUnavailable ones left out, only
    the last condition, in name order (the API server's list order). Messages are built whole
    by their constructors and the objective once per distinct one: 1,000 Trials go on every
    pass (bench/bridge.py)."""
    out = []
    objectives: dict[Any, Any] = {}
    for trial in sorted(trials, key=lambda t: t.metadata.name or ""):
        status = trial.status
        conds = (status.conditions if status else None) or []
        if conditions.is_true(conds, TrialCondition.METRICS_UNAVAILABLE):
            continue
        objective = trial.spec.objective
        key = (
            (
                objective.type,
                objective.objective_metric_name,
                tuple(objective.additional_metric_names or ()),
                objective.goal,
            )
            if objective is not None
            else None
        )
        if key not in objectives:
            objectives[key] = _objective(objective)
        spec = pb.TrialSpec(
            objective=objectives[key],
            parameter_assignments=pb.TrialSpec.ParameterAssignments(
                assignments=[
                    pb.ParameterAssignment(name=a.name, value=str(a.value))
                    for a in trial.spec.parameter_assignments or []
                ]
            ),
            labels=trial.spec.labels or {},
        )
        message_status = pb.TrialStatus(
            start_time=_time(status.start_time if status else None),
            completion_time=_time(status.completion_time if status else None),
            observation=_observation(trial),
            condition=_CONDITION.get(conds[-1].type, pb.TrialStatus.UNKNOWN)  # type: ignore[call-overload]
            if conds
            else pb.TrialStatus.CREATED,
        )
        out.append(pb.Trial(name=trial.metadata.name or "", spec=spec, status=message_status))
    return out


def rules_of(reply_rules: Sequence[Any]) -> list[EarlyStoppingRule]:
    return [
        EarlyStoppingRule(
            name=r.name,
            value=r.value,
            comparison=_COMPARISON.get(r.comparison, ComparisonType.EQUAL),
            start_step=int(r.start_step),
        )
        for r in reply_rules
    ]


class Bridge:
    """The gRPC side: stubs on localhost, what was validated, which early stops were told.

    Either service may be absent: kubetune's own algorithm beside a Katib early-stopping image
    uses only the early-stopping half (`searches` False)."""

    def __init__(
        self,
        endpoint: str,
        early_stopping_endpoint: str = "",
        *,
        db_manager_address: str = DB_MANAGER_ADDRESS,
        timeout: float = TIMEOUT,
    ) -> None:
        self.timeout = timeout
        self.db_manager_address = db_manager_address
        self.channel = grpc.insecure_channel(endpoint) if endpoint else None
        self.suggestion = pb_grpc.SuggestionStub(self.channel) if self.channel else None
        self.searches = self.suggestion is not None
        self.early_channel = (
            grpc.insecure_channel(early_stopping_endpoint) if early_stopping_endpoint else None
        )
        self.early = pb_grpc.EarlyStoppingStub(self.early_channel) if self.early_channel else None
        self.validated = ""
        self.told: set[str] = set()
        self.reply_settings: list[Any] = []
        self._pass: tuple[Suggestion, Any, list[Any]] | None = None

    def _messages(
        self, experiment: Experiment, suggestion: Suggestion, trials: Sequence[Trial]
    ) -> tuple[Any, list[Any]]:
        """The Experiment and Trials as sent, built once per pass (the pass hands the same
        Suggestion to `search` and `rules`): GetSuggestions and GetEarlyStoppingRules send the
        same, and converting 1,000 Trials is most of a pass (bench/bridge.py)."""
        if self._pass is None or self._pass[0] is not suggestion:
            status = suggestion.status
            self._pass = (
                suggestion,
                experiment_message(experiment, status.algorithm_settings if status else None),
                trial_messages(trials),
            )
        return self._pass[1], self._pass[2]

    def _validate(self, call: Any, request: Any, what: str) -> str | None:
        try:
            call(request, timeout=self.timeout, wait_for_ready=True)
        except grpc.RpcError as e:
            code = e.code()
            if code in _REFUSALS:
                return f"{what} Error: {e.details()}"
            if code == grpc.StatusCode.UNIMPLEMENTED:
                log.info("%s is not implemented by the image: valid", what)
                return None
            raise
        return None

    def refusal(self, experiment: Experiment) -> str | None:
        """The image's refusal of the settings, or None; asked once per Experiment uid."""
        uid = str(experiment.metadata.uid)
        if self.validated == uid:
            return None
        message = experiment_message(experiment)
        refused = None
        if self.suggestion is not None:
            refused = self._validate(
                self.suggestion.ValidateAlgorithmSettings,
                pb.ValidateAlgorithmSettingsRequest(experiment=message),
                "ValidateAlgorithmSettings",
            )
        if refused is None and self.early is not None and experiment.spec.early_stopping:
            refused = self._validate(
                self.early.ValidateEarlyStoppingSettings,
                pb.ValidateEarlyStoppingSettingsRequest(early_stopping=message.spec.early_stopping),
                "ValidateEarlyStoppingSettings",
            )
        if refused is None:
            log.info("the image validated the settings")
            self.validated = uid
        return refused

    def search(
        self, experiment: Experiment, suggestion: Suggestion, trials: Sequence[Trial]
    ) -> KatibSearch:
        experiment_sent, trials_sent = self._messages(experiment, suggestion, trials)
        return KatibSearch(
            self,
            experiment_sent,
            trials_sent,
            experiment.metadata.name or "",
            suggestion.spec.requests or 0,
        )

    def settings(self, current: list[AlgorithmSetting]) -> list[AlgorithmSetting]:
        return merged(current, self.reply_settings)

    def rules(
        self, experiment: Experiment, suggestion: Suggestion, trials: Sequence[Trial]
    ) -> list[EarlyStoppingRule] | None:
        """The image's rules for the new assignments; None without an early-stopping image."""
        if self.early is None or experiment.spec.early_stopping is None:
            return None
        experiment_sent, trials_sent = self._messages(experiment, suggestion, trials)
        request = pb.GetEarlyStoppingRulesRequest(
            experiment=experiment_sent,
            trials=trials_sent,
            db_manager_address=self.db_manager_address,
        )
        reply = self.early.GetEarlyStoppingRules(request, timeout=self.timeout)
        return rules_of(reply.early_stopping_rules)

    def tell_early_stopped(self, trials: Sequence[Trial]) -> None:
        """SetTrialStatus once per Trial seen EarlyStopped (best effort, see the module doc)."""
        if self.early is None:
            return
        for trial in trials:
            name = trial.metadata.name or ""
            conds = trial.status.conditions if trial.status else None
            if name in self.told or not conditions.is_true(conds, TrialCondition.EARLY_STOPPED):
                continue
            self.told.add(name)
            try:
                self.early.SetTrialStatus(
                    pb.SetTrialStatusRequest(trial_name=name), timeout=self.timeout
                )
            except grpc.RpcError as e:
                log.info("SetTrialStatus %s: %s (the Trial is EarlyStopped already)", name, e)


class KatibSearch:
    """`algorithms.Algorithm` over one `GetSuggestions` call: the image holds the state, the
    Trials are sent whole on every call, so there is nothing to catch up."""

    exhausted = False

    def __init__(
        self, bridge: Bridge, experiment: Any, trials: list[Any], name: str, total: int
    ) -> None:
        self.bridge = bridge
        self.experiment = experiment
        self.trials = trials
        self.name = name
        self.total = total

    def catch_up(self, assignments: Sequence[TrialAssignment], outcomes: dict[str, Any]) -> int:
        return 0

    def next_assignments(self, start: int, count: int) -> list[TrialAssignment]:
        if count <= 0 or self.bridge.suggestion is None:
            return []
        reply = self.bridge.suggestion.GetSuggestions(
            pb.GetSuggestionsRequest(
                experiment=self.experiment,
                trials=self.trials,
                current_request_number=count,
                total_request_number=self.total,
            ),
            timeout=self.bridge.timeout,
        )
        got = list(reply.parameter_assignments)
        if len(got) > count:
            raise RuntimeError(
                f"the image returned {len(got)} assignments for a request of {count}: "
                "the response contains unexpected trials"
            )
        if len(got) < count:
            log.info("the image returned %d of %d assignments; asking again later", len(got), count)
        self.bridge.reply_settings = (
            list(reply.algorithm.algorithm_settings) if reply.HasField("algorithm") else []
        )
        return [
            TrialAssignment(
                name=naming.trial_name(self.name, str(start + i)),
                parameter_assignments=[
                    Assignment(name=a.name, value=a.value) for a in p.assignments
                ],
                labels=dict(p.labels) or None,
            )
            for i, p in enumerate(got)
        ]


def add_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--endpoint",
        action=EnvDefault,
        env="KUBETUNE_BRIDGE_ENDPOINT",
        default="localhost:6789",
        help="the Katib Suggestion service (the image's container in the same pod)",
    )
    parser.add_argument(
        "--early-stopping-endpoint",
        action=EnvDefault,
        env="KUBETUNE_BRIDGE_EARLY_STOPPING_ENDPOINT",
        default="",
        help="the Katib EarlyStopping service, if an early-stopping image runs in the pod",
    )
    parser.add_argument(
        "--db-manager-address",
        action=EnvDefault,
        env="KUBETUNE_DB_MANAGER_ADDRESS",
        default=DB_MANAGER_ADDRESS,
        help="sent as db_manager_address in GetEarlyStoppingRules (kubetune's db-manager)",
    )
    parser.add_argument(
        "--grpc-timeout",
        action=EnvDefault,
        env="KUBETUNE_BRIDGE_TIMEOUT",
        type=float,
        default=TIMEOUT,
        help="seconds per gRPC call",
    )


def from_args(args: argparse.Namespace) -> Bridge:
    return Bridge(
        args.endpoint,
        args.early_stopping_endpoint,
        db_manager_address=args.db_manager_address,
        timeout=float(args.grpc_timeout),
    )
