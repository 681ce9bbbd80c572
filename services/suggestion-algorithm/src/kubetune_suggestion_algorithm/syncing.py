"""One pass of the algorithm process: read Suggestion, Experiment and Trials, write assignments.

Neighbours: `main` runs `Syncer.sync` whenever a watched object changes (and periodically);
`studying` holds the algorithm's state. The only write is one merge patch of the Suggestion's
status subresource carrying `metadata.resourceVersion` (optimistic concurrency) and only the
fields this process owns (contract): `suggestions`, `suggestionCount` (same patch, so they never
disagree) and `algorithmSettings`. A Conflict means another writer came first: re-read, retry.

Invalid settings never crash the process: the problem is logged once and the pass waits for the
Suggestion to change (the suggestion-controller marks it Failed with the same problems).

The Suggestion stays small by design (etcd refuses objects above ~1.5 MiB; 2,000 parameters make
one assignment ~80 KB): an assignment whose Trial exists keeps only its `name` in
`status.suggestions` (the Trial's spec holds its parameters; positions, and so indexes and
`suggestionCount`, are unchanged), so only the assignments not yet turned into Trials (at most
parallelTrialCount) are stored whole. And before writing, the pass measures the object: new
assignments that would take it above `max_bytes` wait for a later pass (when Trials exist and
their entries shrink). When not even one fits, or the API server refuses the write as too
large anyway, a Warning Event `ObjectTooLarge` on the Experiment names the object, its size and
the fix (the Experiment's status belongs to the experiment-controller).

At scale even the names add up (100,000 Trials: ~3 MB), so only the last `keep_named`
name-only entries at the head of the list are kept: `status.suggestions` is then the tail of
the assignment sequence, its first entry at index `suggestionCount - len(suggestions)`. The
dropped entries are exactly recoverable: the name of index i is `naming.trial_name(experiment,
i)` (every algorithm names them so; checked before an entry is dropped) and its parameters are
in its Trial, which is how a restart without the volume replays them.

With a `bridge` (`suggestion-algorithm bridge`, beside a Katib gRPC image) the same pass runs,
but the image validates the settings (its refusal is written as the status-only setting
`kubetune_validation_failed` for the suggestion-controller), computes the assignments and, with
an early-stopping image, the rules.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from kubetune import (
    algorithmsettings,
    conditions,
    errors,
    events,
    knownresults,
    multiobjective,
    naming,
    nas,
    observations,
)
from kubetune.algorithmsettings import Value
from kubetune.api.common import AlgorithmSetting, EarlyStoppingRule, ObjectiveType
from kubetune.api.experiment import Experiment
from kubetune.api.suggestion import Suggestion, TrialAssignment
from kubetune.api.trial import Trial
from kubetune.api.warmstart import WarmStartStatus
from kubetune.conditions import SuggestionCondition, TrialState
from kubetune.kube import EXPERIMENTS, SUGGESTIONS, Kube, Obj, Resource
from kubetune.runtime.ownwrites import OwnWrites, resource_version
from kubetune_suggestion_algorithm import algorithms, stoppingrules
from kubetune_suggestion_algorithm.outcomes import Outcome

if TYPE_CHECKING:
    from kubetune_suggestion_algorithm.studying import Search

log = logging.getLogger(__name__)

TOO_LARGE = "ObjectTooLarge"
DEFAULT_MAX_BYTES = 1024 * 1024
"""The Suggestion's size this process keeps below: etcd's default limit is 1.5 MiB per request,
and the object also carries metadata, managedFields and the other writers' fields."""


DEFAULT_KEEP_NAMED = 1000
"""Name-only entries kept at the head of `status.suggestions` (older ones are dropped)."""


def offset_of(stored: int, count: int | None) -> int:
    """The index of the first stored entry: `suggestionCount` counts the dropped ones too."""
    return max(0, (count or 0) - stored)


def droppable(stored: Sequence[dict[str, Any]], experiment: str, start: int, keep: int) -> int:
    """How many leading entries may go: name-only ones beyond the last `keep`, each named as
    its index says (entries before `start` were rebuilt from that rule already)."""
    leading = 0
    for entry in stored:
        if entry.keys() != {"name"}:
            break
        leading += 1
    drop = max(0, leading - keep)
    for index in range(start, drop):
        if stored[index]["name"] != naming.trial_name(experiment, str(index)):
            return index
    return drop


def compact(assignment: TrialAssignment, has_trial: bool) -> dict[str, Any]:
    """The stored form: the name only once its Trial exists (the Trial holds the rest)."""
    return {"name": assignment.name} if has_trial else assignment.to_wire()


def filled(
    assignments: Sequence[TrialAssignment], trials: dict[str, Trial]
) -> list[TrialAssignment]:
    """Stored assignments with the parameters of compacted ones taken back from their Trials
    (the study needs them to replay after a restart without its volume)."""
    out = []
    for assignment in assignments:
        trial = trials.get(assignment.name)
        if assignment.parameter_assignments is None and trial is not None:
            assignment = assignment.model_copy(
                update={"parameter_assignments": trial.spec.parameter_assignments}
            )
        out.append(assignment)
    return out


def size_of(obj: Obj) -> int:
    return len(json.dumps(obj, separators=(",", ":")).encode())


def outcome(experiment: Experiment, trial: Trial) -> Outcome | None:
    """What a Trial tells the algorithm, or None while it has nothing to tell (upstream: only
    Succeeded/EarlyStopped with an objective value teach; other endings are failures; an early
    stopped Trial without observation stays hidden until its metrics arrive)."""
    status = trial.status
    conds = status.conditions if status else None
    objective = experiment.spec.objective or trial.spec.objective
    observation = status.observation if status else None
    values = observations.objective_values(objective, observation) if objective else [None]
    # Several objectives teach only together: a trial missing one of them is a failure.
    told = (
        Outcome(values[0], tuple(v for v in values[1:] if v is not None))
        if all(v is not None for v in values)
        else Outcome(None)
    )
    state = conditions.trial_state(conds)
    if state is TrialState.EARLY_STOPPED:
        return told if told.value is not None else None
    if state is TrialState.SUCCEEDED:
        return told
    if state in (TrialState.FAILED, TrialState.KILLED, TrialState.METRICS_UNAVAILABLE):
        return Outcome(None)
    return None


class Bridging(Protocol):
    """What the pass asks of `bridge.Bridge` (kept abstract: no gRPC import here); `searches`
    False: only a Katib early-stopping image is bridged, kubetune's algorithm searches."""

    searches: bool

    def refusal(self, experiment: Experiment) -> str | None: ...

    def search(
        self, experiment: Experiment, suggestion: Suggestion, trials: Sequence[Trial]
    ) -> algorithms.Algorithm: ...

    def settings(self, current: list[AlgorithmSetting]) -> list[AlgorithmSetting]: ...

    def rules(
        self, experiment: Experiment, suggestion: Suggestion, trials: Sequence[Trial]
    ) -> list[EarlyStoppingRule] | None: ...

    def tell_early_stopped(self, trials: Sequence[Trial]) -> None: ...


def status_settings(
    current: Sequence[AlgorithmSetting] | None, exhausted: bool
) -> list[AlgorithmSetting]:
    kept = [s for s in current or () if s.name != algorithmsettings.SEARCH_EXHAUSTED]
    if exhausted:
        kept.append(AlgorithmSetting(name=algorithmsettings.SEARCH_EXHAUSTED, value="true"))
    return kept


Reader = Callable[[Resource], "Obj | None"]
"""How a pass reads its Suggestion or Experiment (the same name): a watch cache's copy in the
process (`reconciling`), a GET when none is given."""

Unchanged = tuple[str, str, int, frozenset[str], frozenset[tuple[str, Outcome]]]
"""What a pass's result depends on: the Suggestion's resourceVersion, the Experiment's uid and
generation (its spec), the Trials' names and their outcomes."""


@dataclass(frozen=True)
class ParsedTrial:
    """A Trial as parsed once per resourceVersion (and Experiment generation, for its
    outcome): a pass over 1,000 Trials would otherwise validate 1,000 objects."""

    key: tuple[str, str, int]
    trial: Trial
    outcome: Outcome | None


@dataclass
class Syncer:
    kube: Kube
    namespace: str
    name: str
    algorithm: str
    data_dir: Path | None
    search: algorithms.Algorithm | None = None
    search_key: str = ""
    last_problem: str = ""
    passes: int = 0
    writes: list[int] = field(default_factory=list)
    max_bytes: int = DEFAULT_MAX_BYTES
    keep_named: int = DEFAULT_KEEP_NAMED
    reported: set[str] = field(default_factory=set)
    bridge: Bridging | None = None
    _names: list[str] = field(default_factory=list)
    _names_of: str = ""
    warm_start_dir: Path = Path(knownresults.MOUNT_ROOT)
    warm: WarmStartStatus | None = None
    read: Reader | None = None
    _written: OwnWrites = field(default_factory=OwnWrites)
    """The answer of this process's last status write: newer than a cache that has not seen
    the write's event yet."""
    _stale: str = ""
    """The resourceVersion of the last write's conflict: a reader's copy of it is stale."""
    _unchanged: Unchanged | None = None
    """The inputs of the last pass that wrote nothing: the same again writes nothing."""
    finished_seen: int = 0
    """How many finished Trials the last pass gave the algorithm (logged when it grows)."""
    _parsed: dict[str, ParsedTrial] = field(default_factory=dict)
    _experiment_parsed: tuple[tuple[str, int], Experiment] | None = None

    def dropped(self, experiment: str, offset: int) -> list[TrialAssignment]:
        """The entries before `offset`, rebuilt from the naming rule (names cached)."""
        if self._names_of != experiment:
            self._names, self._names_of = [], experiment
        while len(self._names) < offset:
            self._names.append(naming.trial_name(experiment, str(len(self._names))))
        return [TrialAssignment(name=n) for n in self._names[:offset]]

    def _search(
        self, experiment: Experiment, algorithm: str, settings: dict[str, Value]
    ) -> algorithms.Algorithm:
        key = json.dumps(
            [
                experiment.metadata.uid,
                algorithm,
                settings,
                [p.to_wire() for p in experiment.spec.parameters or []],
                experiment.spec.nas_config.to_wire() if experiment.spec.nas_config else None,
            ],
            sort_keys=True,
            default=str,
        )
        if self.search is None or key != self.search_key:
            objective = experiment.spec.objective
            self.search = algorithms.build(
                algorithm,
                settings,
                experiment.spec.parameters or [],
                experiment=experiment.metadata.name or self.name,
                uid=str(experiment.metadata.uid),
                maximize=objective is not None and objective.type == ObjectiveType.MAXIMIZE,
                directions=(
                    multiobjective.maximized(objective)
                    if multiobjective.is_multi(objective) and objective is not None
                    else ()
                ),
                data_dir=self.data_dir,
                study_name=f"{self.namespace}.{self.name}.{experiment.metadata.uid}",
                nas_config=experiment.spec.nas_config,
                warm_start=experiment.spec.warm_start is not None,
            )
            self.search_key = key
            self.warm = None
            if experiment.spec.warm_start is not None:
                from kubetune_suggestion_algorithm import studying

                if isinstance(self.search, studying.Search):
                    self.warm_start(experiment, self.search)
        return self.search

    def warm_start(self, experiment: Experiment, search: Search) -> None:
        """Known results into the new study before its first assignment, and an Event on the
        Experiment saying how many came and why some did not."""
        from kubetune_suggestion_algorithm import warmstarting

        imported = warmstarting.warm_start(
            search, self.kube, self.namespace, experiment, self.warm_start_dir
        )
        self.warm = imported.status
        for source in imported.status.sources or []:
            if source.message:
                imported.reasons.append(source.message)
        message = warmstarting.event_message(imported)
        if not message:
            return
        events.record(
            self.kube,
            EXPERIMENTS,
            {"metadata": {**experiment.to_wire()["metadata"], "namespace": self.namespace}},
            type_="Warning" if imported.reasons else "Normal",
            reason=warmstarting.EVENT_REASON,
            message=message,
            component="suggestion-algorithm",
            cause=f"{warmstarting.EVENT_REASON}/{experiment.metadata.uid}",
        )

    def _get(self, resource: Resource) -> Obj | None:
        if self.read is not None:
            return self.read(resource)
        return self.kube.get_or_none(resource, self.name, self.namespace)

    def _suggestion(self) -> Obj | None:
        """The Suggestion: the reader's, unless it is the very one this process's last write
        replaced (a cache that lags behind the write), then what that write returned."""
        raw = self._get(SUGGESTIONS)
        if raw is not None and self.read is not None and resource_version(raw) == self._stale:
            # The copy a write of this process conflicted with: ask the API server.
            raw = self.kube.get_or_none(SUGGESTIONS, self.name, self.namespace)
        return self._written.newest(self.name, raw)

    def _experiment(self, raw: Obj) -> Experiment:
        """The Experiment, parsed once per uid and generation (a pass reads only its spec and
        name; its status changes with every Trial)."""
        meta = raw.get("metadata") or {}
        key = (str(meta.get("uid") or ""), int(meta.get("generation") or 0))
        if self._experiment_parsed is None or self._experiment_parsed[0] != key or not key[1]:
            self._experiment_parsed = key, Experiment.model_validate(raw)
        return self._experiment_parsed[1]

    def _trials(
        self, experiment: Experiment, trial_objects: Iterable[Obj]
    ) -> tuple[list[Obj], dict[str, Trial], dict[str, Outcome]]:
        """The raw Trials, the parsed ones by name and their outcomes (parsed once per
        resourceVersion; an object without one is parsed every time)."""
        raw_trials = list(trial_objects)
        outcomes: dict[str, Outcome] = {}
        trials: dict[str, Trial] = {}
        parsed: dict[str, ParsedTrial] = {}
        generation = (str(experiment.metadata.uid), experiment.metadata.generation or 0)
        for obj in raw_trials:
            meta = obj.get("metadata") or {}
            name, version = meta.get("name"), meta.get("resourceVersion")
            if not name:
                continue
            key = (str(version), *generation)
            known = self._parsed.get(name)
            if known is None or known.key != key or not version:
                trial = Trial.model_validate(obj)
                known = ParsedTrial(key, trial, outcome(experiment, trial))
            parsed[name] = known
            trials[name] = known.trial
            if known.outcome is not None:
                outcomes[name] = known.outcome
        self._parsed = parsed
        return raw_trials, trials, outcomes

    def sync(self, trial_objects: Iterable[Obj]) -> bool:
        """One pass; True when it wrote (so another pass may have more to do)."""
        self.passes += 1
        raw = self._suggestion()
        experiment_raw = self._get(EXPERIMENTS)
        if raw is None or experiment_raw is None:
            log.info("waiting for Suggestion and Experiment %s/%s", self.namespace, self.name)
            return False
        experiment = self._experiment(experiment_raw)
        raw_trials, trials, outcomes = self._trials(experiment, trial_objects)
        inputs: Unchanged = (
            resource_version(raw),
            str(experiment.metadata.uid),
            experiment.metadata.generation or 0,
            frozenset(trials),
            frozenset(outcomes.items()),
        )
        if self.bridge is None and inputs == self._unchanged and inputs[0]:
            return False  # nothing this pass depends on changed since one that wrote nothing
        self._unchanged = None
        wrote = self._pass(raw, experiment_raw, experiment, raw_trials, trials, outcomes)
        if not wrote:
            self._unchanged = inputs
        return wrote

    def _pass(
        self,
        raw: Obj,
        experiment_raw: Obj,
        experiment: Experiment,
        raw_trials: list[Obj],
        trials: dict[str, Trial],
        outcomes: dict[str, Outcome],
    ) -> bool:
        suggestion = Suggestion.model_validate(raw)
        status = suggestion.status
        if status is not None and (
            conditions.is_true(status.conditions, SuggestionCondition.FAILED)
            or conditions.is_true(status.conditions, SuggestionCondition.SUCCEEDED)
        ):
            # A Succeeded Suggestion gets nothing more: an algorithm pod still terminating after
            # its Deployment went must not answer a restarted Experiment's new requests (Never
            # is never restarted; a FromVolume restart removes Succeeded first).
            return False
        search: algorithms.Algorithm | Literal[False] | None = False
        if self.bridge is not None:
            search = self.bridged(suggestion, experiment, list(trials.values()))
        if search is False:
            search = self.own_search(suggestion, experiment)
        if search is None:
            return False  # invalid settings, or an image refused them
        kept = (status.suggestions if status else None) or []
        offset = offset_of(len(kept), status.suggestion_count if status else None)
        experiment_name = experiment.metadata.name or self.name
        assignments = filled([*self.dropped(experiment_name, offset), *kept], trials)
        told = search.catch_up(assignments, outcomes)
        if told:
            log.info("told %d finished trials to the study", told)
        if len(outcomes) > self.finished_seen:
            log.info("the algorithm has seen %d finished trials", len(outcomes))
        self.finished_seen = len(outcomes)

        requests = suggestion.spec.requests or 0
        new = search.next_assignments(len(assignments), requests - len(assignments))
        rules = None
        if new and self.bridge is not None:
            rules = self.bridge.rules(experiment, suggestion, list(trials.values()))
        if rules:
            new = [a.model_copy(update={"early_stopping_rules": rules}) for a in new]
        elif new and rules is None:
            new = self.with_rules(new, experiment, raw_trials)
        current_settings = status.algorithm_settings if status else None
        settings_out = status_settings(current_settings, search.exhausted)
        if self.bridge is not None:
            settings_out = self.bridge.settings(settings_out)
        warm_changed = self.warm is not None and (
            status is None
            or status.warm_start is None
            or status.warm_start.model_dump() != self.warm.model_dump()
        )
        if (
            not new
            and not warm_changed
            and [s.to_wire() for s in settings_out] == [s.to_wire() for s in current_settings or []]
        ):
            return False
        if search.exhausted and not algorithmsettings.search_exhausted(current_settings):
            log.info(
                "the search space is exhausted after %d assignments", len(assignments) + len(new)
            )
        whole = [compact(a, a.name in trials) for a in assignments]
        start = droppable(whole, experiment_name, offset, self.keep_named)
        stored = whole[start:]
        wanted = len(new)
        overflow = 0  # the size with the fewest assignments that did not fit
        while True:
            every = stored + [a.to_wire() for a in new]
            fields: dict[str, Any] = {
                "suggestions": every,
                "suggestionCount": start + len(every),
                "algorithmSettings": [s.to_wire() for s in settings_out],
            }
            if self.warm is not None:
                fields["warmStart"] = self.warm.model_dump(
                    mode="json", by_alias=True, exclude_none=True
                )
            patch = {
                "metadata": {"resourceVersion": suggestion.metadata.resource_version},
                "status": fields,
            }
            size = size_of({**raw, "status": {**(raw.get("status") or {}), **fields}})
            if size <= self.max_bytes or not new:
                break
            overflow = size
            new = new[:-1]  # the rest waits until Trials exist and their entries shrink
        if len(new) < wanted:
            log.info(
                "handing out %d of %d assignments: more would make the Suggestion larger "
                "than %d bytes",
                len(new),
                wanted,
                self.max_bytes,
            )
            if not new and all(a.name in trials for a in assignments):
                # Nothing fits and no stored assignment waits for its Trial: waiting won't help.
                self.too_large(
                    experiment_raw,
                    "limit",
                    f"it would be {overflow} bytes with one more assignment, above this "
                    f"algorithm's limit of {self.max_bytes} bytes",
                )
            if not new and stored == list((raw.get("status") or {}).get("suggestions") or []):
                return False  # nothing to add, nothing to compact
        try:
            written = self.kube.patch(
                SUGGESTIONS, self.name, patch, self.namespace, subresource="status"
            )
        except errors.Conflict:
            log.info("Suggestion changed while computing; re-reading")
            self._stale = resource_version(raw)
            return True
        except errors.ApiError as e:
            if not errors.is_too_large(e):
                raise
            self.too_large(experiment_raw, "refused", f"the API server refused it: {e.message}")
            raise
        self._written.wrote(self.name, resource_version(raw), written)
        self.writes.append(len(new))
        if new:
            log.info("assigned %s", ", ".join(a.name for a in new))
        return True

    def own_search(
        self, suggestion: Suggestion, experiment: Experiment
    ) -> algorithms.Algorithm | None:
        """kubetune's algorithm for the Suggestion, or None while its settings are invalid."""
        spec_algorithm = suggestion.spec.algorithm or experiment.spec.algorithm
        algorithm = (spec_algorithm.algorithm_name if spec_algorithm else "") or self.algorithm
        if algorithm != self.algorithm:
            log.warning(
                "Suggestion asks for %s, this process was started for %s; using %s",
                algorithm,
                self.algorithm,
                algorithm,
            )
        settings_list = spec_algorithm.algorithm_settings if spec_algorithm else None
        parameters = experiment.spec.parameters or []
        problems = algorithmsettings.validate(
            algorithm, settings_list, parameters, experiment.spec.parallel_trial_count
        )
        problems[:0] = [
            p.message for p in nas.validate_config(algorithm, experiment.spec.nas_config)
        ]
        if multiobjective.is_multi(experiment.spec.objective):
            refused = multiobjective.refusal(algorithm)
            problems += [refused] if refused else []
        if problems:
            problem = "; ".join(problems)
            if problem != self.last_problem:
                log.error("invalid algorithm settings, waiting for a change: %s", problem)
                self.last_problem = problem
            return None
        self.last_problem = ""
        settings = algorithmsettings.parse(algorithm, settings_list, parameters)
        return self._search(experiment, algorithm, settings)

    def bridged(
        self, suggestion: Suggestion, experiment: Experiment, trials: Sequence[Trial]
    ) -> algorithms.Algorithm | Literal[False] | None:
        """The Katib image's search through the bridge (False: kubetune's algorithm searches,
        only early stopping is bridged), or None when an image refused the settings (then the
        refusal is in `status.algorithmSettings`)."""
        assert self.bridge is not None
        refused = self.bridge.refusal(experiment)
        if refused is not None:
            status = suggestion.status
            current = [
                s.to_wire()
                for s in (status.algorithm_settings if status else None) or []
                if s.name != algorithmsettings.VALIDATION_FAILED
            ]
            log.error("the algorithm image refused the settings: %s", refused)
            self.kube.patch(
                SUGGESTIONS,
                self.name,
                {
                    "metadata": {"resourceVersion": suggestion.metadata.resource_version},
                    "status": {
                        "algorithmSettings": [
                            *current,
                            {"name": algorithmsettings.VALIDATION_FAILED, "value": refused},
                        ]
                    },
                },
                self.namespace,
                subresource="status",
            )
            return None
        self.bridge.tell_early_stopped(trials)
        if not self.bridge.searches:
            return False
        return self.bridge.search(experiment, suggestion, trials)

    def with_rules(
        self, new: list[TrialAssignment], experiment: Experiment, trials: Sequence[Obj]
    ) -> list[TrialAssignment]:
        """The new assignments with the early-stopping rules of this moment (none without
        `spec.earlyStopping`, or while too few Trials succeeded); upstream attaches the same
        rules to every assignment of one request."""
        spec = experiment.spec.early_stopping
        objective = experiment.spec.objective
        if spec is None or objective is None or not objective.objective_metric_name:
            return new
        try:
            rules = stoppingrules.compute(
                spec,
                trials,
                objective.objective_metric_name,
                objective.type or ObjectiveType.UNKNOWN,
            )
        except ValueError as e:
            log.error("early stopping: %s; the new trials get no rules", e)
            return new
        if not rules:
            return new
        log.info(
            "early-stopping rules for %d new trial(s): %s",
            len(new),
            ", ".join(
                f"{r.name} {r.comparison.value} {r.value} from step {r.start_step}" for r in rules
            ),
        )
        return [a.model_copy(update={"early_stopping_rules": rules}) for a in new]

    def too_large(self, experiment: Obj, kind: str, why: str) -> None:
        """Say on the Experiment (a Warning Event, once per kind of cause: `limit` or `refused`)
        why no more Trials come; the sizes in `why` change from round to round."""
        message = (
            f"Suggestion {self.namespace}/{self.name} cannot hold more assignments: {why}. "
            f"Each assignment not yet turned into a Trial is stored whole; lower "
            f"parallelTrialCount or the number or length of the parameters"
        )
        log.error("%s", message)
        cause = f"{TOO_LARGE}/{kind}"
        if cause in self.reported:
            return
        involved = {
            "metadata": {
                **(experiment.get("metadata") or {}),
                "name": (experiment.get("metadata") or {}).get("name") or self.name,
                "namespace": self.namespace,
            }
        }
        if events.record(
            self.kube,
            EXPERIMENTS,
            involved,
            type_="Warning",
            reason=TOO_LARGE,
            message=message,
            component="suggestion-algorithm",
            cause=cause,
        ):
            self.reported.add(cause)


def trial_selector(experiment: str) -> str:
    return f"{naming.LABEL_EXPERIMENT}={naming.label_value(experiment)}"
