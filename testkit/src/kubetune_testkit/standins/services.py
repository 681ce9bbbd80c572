"""Stand-ins for kubetune's own services, so a test of one service decides what the others wrote.

Each writes exactly what that service writes (one writer per field, docs/reference/crds.md):
the algorithm its assignments in the Suggestion status, the trial-controller a Trial's
conditions, the collector a Trial's observation, the experiment-controller the Experiment's
conditions, the Suggestion's spec and the Trials.
"""

from __future__ import annotations

from typing import Any

from kubetune import errors, naming
from kubetune.kube import EXPERIMENTS, PODS, SUGGESTIONS, TRIALS, Kube, Obj
from kubetune_testkit import builders
from kubetune_testkit.builders import observation
from kubetune_testkit.waiting import wait_for

STAMP = "2026-01-01T00:00:00Z"


def assignment(experiment: str, index: int) -> Obj:
    """The algorithm's assignment number `index`: its contract name and an `lr` value."""
    return {
        "name": naming.trial_name(experiment, str(index)),
        "parameterAssignments": [{"name": "lr", "value": f"0.0{index % 9 + 1}"}],
    }


class StandInAlgorithm:
    """Stands in for the suggestion-algorithm: appends assignments up to `spec.requests`.

    Names follow the contract (`naming.trial_name(experiment, index)`), written in one patch
    with `suggestionCount`, guarded by the resourceVersion. `extra` hands out more than
    requested, to check that the controller never creates more than it may.
    """

    def __init__(self, kube: Kube, namespace: str, experiment: str) -> None:
        self.kube = kube
        self.namespace = namespace
        self.experiment = experiment

    def suggestion(self) -> Obj | None:
        return self.kube.get_or_none(SUGGESTIONS, self.experiment, self.namespace)

    def fulfil(self, extra: int = 0) -> int:
        """Fill the assignments up to requests (+extra); returns how many there are."""
        while True:
            suggestion = self.suggestion()
            if suggestion is None:
                return 0
            status = suggestion.get("status") or {}
            current = list(status.get("suggestions") or [])
            wanted = int((suggestion.get("spec") or {}).get("requests") or 0) + extra
            if len(current) >= wanted:
                return len(current)
            current += [assignment(self.experiment, i) for i in range(len(current), wanted)]
            try:
                self.kube.patch(
                    SUGGESTIONS,
                    self.experiment,
                    {
                        "metadata": {"resourceVersion": suggestion["metadata"]["resourceVersion"]},
                        "status": {"suggestions": current, "suggestionCount": len(current)},
                    },
                    self.namespace,
                    subresource="status",
                )
                return len(current)
            except errors.Conflict:
                continue

    def compact(self, names: set[str]) -> None:
        """Reduce the entries of `names` to their name, as the algorithm does once their
        Trials exist."""
        suggestion = self.suggestion()
        assert suggestion is not None
        entries = [
            {"name": a["name"]} if a["name"] in names else a
            for a in (suggestion.get("status") or {}).get("suggestions") or []
        ]
        self.kube.patch(
            SUGGESTIONS,
            self.experiment,
            {
                "metadata": {"resourceVersion": suggestion["metadata"]["resourceVersion"]},
                "status": {"suggestions": entries},
            },
            self.namespace,
            subresource="status",
        )

    def set_conditions(self, conditions: list[Obj], **extra: Any) -> None:
        """Write the Suggestion's conditions as the suggestion-controller would."""
        assert self.suggestion() is not None
        status = {"conditions": conditions, **extra}
        self.kube.patch(
            SUGGESTIONS, self.experiment, {"status": status}, self.namespace, subresource="status"
        )


def trial_status(state: str, value: float | None = None, metric: str = "accuracy") -> Obj:
    """A Trial's status in `state` (Created, Running, Succeeded, Failed, ...), with an
    observation of `metric` when `value` is given."""
    conditions = [
        {"type": "Created", "status": "True", "reason": "TrialCreated", "lastUpdateTime": STAMP},
    ]
    if state != "Created":
        conditions.append(
            {"type": state, "status": "True", "reason": f"Trial{state}", "lastUpdateTime": STAMP}
        )
    status: Obj = {"conditions": conditions}
    if value is not None:
        status["observation"] = observation(value, metric)
    return status


def set_trial(
    kube: Kube, namespace: str, name: str, state: str, accuracy: float | None = None
) -> None:
    """Stands in for the trial-controller and the collector: conditions and observation."""
    status = trial_status(state, accuracy)
    kube.patch(TRIALS, name, {"status": status}, namespace, subresource="status")


def observe(
    kube: Kube, namespace: str, name: str, value: str | float | None, metric: str = "accuracy"
) -> None:
    """Stands in for the collector: write `status.observation` (`unavailable` for None)."""
    kube.patch(
        TRIALS,
        name,
        {"status": {"observation": observation(value, metric)}},
        namespace,
        subresource="status",
    )


class StandInExperimentController:
    """Writes what the experiment-controller (and the trial-controller and collector of its
    Trials) would write for Experiment `name`: the Experiment and its conditions, the
    Suggestion and its requests, finished Trials; reads back the algorithm's assignments."""

    def __init__(self, kube: Kube, namespace: str, name: str = "exp") -> None:
        self.kube = kube
        self.namespace = namespace
        self.name = name

    def experiment(self) -> Obj:
        return self.kube.get(EXPERIMENTS, self.name, self.namespace)

    def suggestion(self) -> Obj:
        return self.kube.get(SUGGESTIONS, self.name, self.namespace)

    def create(
        self,
        algorithm: str,
        policy: str,
        parameters: list[Obj],
        settings: dict[str, str] | None = None,
        requests: int = 0,
        **fields: Any,
    ) -> None:
        """A running Experiment minimizing `loss` and its Suggestion asking for `requests`;
        `fields` are more spec fields by their JSON name (`warmStart={...}`)."""
        spec = builders.algorithm_spec(algorithm, settings or {})
        body = builders.experiment(
            self.name,
            self.namespace,
            objective_spec=builders.objective("loss", "minimize"),
            algorithm=spec,
            parameters=parameters,
            resumePolicy=policy,
            parallelTrialCount=3,
            maxTrialCount=10,
            **fields,
        )
        exp = self.kube.create(EXPERIMENTS, body, self.namespace)
        self.set_experiment([("Created", "True", "ExperimentCreated")])
        self.set_experiment([("Running", "True", "ExperimentRunning")])
        suggestion = builders.suggestion(
            self.name, self.namespace, algorithm=spec, requests=requests, resume=policy, owner=exp
        )
        self.kube.create(SUGGESTIONS, suggestion, self.namespace)

    def _write_conditions(self, conditions: list[Obj]) -> None:
        self.kube.patch(
            EXPERIMENTS,
            self.name,
            {"status": {"conditions": conditions}},
            self.namespace,
            subresource="status",
        )

    def set_experiment(self, changes: list[tuple[str, str, str]]) -> None:
        """Append/replace conditions in order (the last one is the Experiment's state)."""
        current = (self.experiment().get("status") or {}).get("conditions") or []
        for type_, status, reason in changes:
            current = [c for c in current if c["type"] != type_]
            current.append({"type": type_, "status": status, "reason": reason, "message": reason})
        self._write_conditions(current)

    def restart_experiment(self) -> None:
        """What the experiment-controller does on a restart: Restarting in, Succeeded/Failed out."""
        current = (self.experiment().get("status") or {}).get("conditions") or []
        kept = [c for c in current if c["type"] not in ("Succeeded", "Failed", "Restarting")]
        kept.append(
            {
                "type": "Restarting",
                "status": "True",
                "reason": "ExperimentRestarting",
                "message": "Experiment is restarted",
            }
        )
        self._write_conditions(kept)

    def request(self, count: int) -> None:
        self.kube.patch(SUGGESTIONS, self.name, {"spec": {"requests": count}}, self.namespace)

    def assignments(self) -> list[Obj]:
        """Whole assignments: one whose Trial exists keeps only its name in the Suggestion (the
        object stays small), so its parameters come from the Trial, as the algorithm does."""
        stored = list((self.suggestion().get("status") or {}).get("suggestions") or [])
        if all("parameterAssignments" in a for a in stored):
            return stored
        trials = {
            t["metadata"]["name"]: t["spec"] for t in self.kube.list_all(TRIALS, self.namespace)
        }
        return [
            a if "parameterAssignments" in a else {**a, **trials.get(a["name"], {})} for a in stored
        ]

    def wait_assignments(self, count: int, timeout: float = 120.0) -> list[Obj]:
        """At least `count` assignments, once the algorithm has made them."""

        def enough() -> list[Obj] | None:
            found = self.assignments()
            return found if len(found) >= count else None

        return wait_for(f"{count} assignments", enough, timeout)

    def finish(self, assignment: Obj, loss: float) -> None:
        """A Trial of the assignment that succeeded with this loss."""
        name = assignment["name"]
        if self.kube.get_or_none(TRIALS, name, self.namespace) is None:
            body = {
                "apiVersion": builders.API_VERSION,
                "kind": "Trial",
                "metadata": {
                    "name": name,
                    "namespace": self.namespace,
                    "labels": naming.trial_labels(self.name, name),
                },
                "spec": {"parameterAssignments": assignment["parameterAssignments"]},
            }
            self.kube.create(TRIALS, body, self.namespace)
        status = trial_status("Succeeded", loss, "loss")
        self.kube.patch(TRIALS, name, {"status": status}, self.namespace, subresource="status")

    def algorithm_pods(self) -> list[Obj]:
        """The algorithm's pods that are not being deleted."""
        return [
            p
            for p in self.kube.list_all(
                PODS, self.namespace, label_selector=f"{naming.LABEL_SUGGESTION}={self.name}"
            )
            if not (p.get("metadata") or {}).get("deletionTimestamp")
        ]
