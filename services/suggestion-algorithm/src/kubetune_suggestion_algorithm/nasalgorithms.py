"""`darts` and `enas` behind the `algorithms.Algorithm` interface.

darts searches inside each trial (the trial trains the supernet and prints `Best-Genotype`): the
algorithm only hands every trial the same search space and settings, so it keeps no state.

enas follows upstream's service call for call. The first request (no assignment yet) samples
architectures from the untrained controller; every later request first trains the controller
`controller_train_steps` times on the reward, the mean objective of all succeeded trials so far
(negated when minimizing), then samples. With a data directory (FromVolume) the controller, its
optimizer, baseline and random stream are saved after each request, with the batch just handed
out: a replacement pod, or a pass retried after a write conflict, gets that same batch back
instead of training twice, and continues where the old pod stopped.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from kubetune import naming, nas
from kubetune.algorithmsettings import Value
from kubetune.api.common import ParameterAssignment
from kubetune.api.experiment import NasConfig
from kubetune.api.suggestion import TrialAssignment
from kubetune_suggestion_algorithm.controller import Controller, Settings
from kubetune_suggestion_algorithm.outcomes import Outcome

log = logging.getLogger(__name__)


def _assignment(experiment: str, index: int, values: dict[str, str]) -> TrialAssignment:
    return TrialAssignment(
        name=naming.trial_name(experiment, str(index)),
        parameter_assignments=[ParameterAssignment(name=k, value=v) for k, v in values.items()],
    )


class Darts:
    """The same three assignments for every trial (upstream's service)."""

    exhausted = False

    def __init__(self, settings: dict[str, Value], nas_config: NasConfig, experiment: str) -> None:
        self.values = nas.darts_assignments(nas_config, dict(settings))
        self.experiment = experiment

    def catch_up(self, assignments: Sequence[TrialAssignment], outcomes: dict[str, Outcome]) -> int:
        return 0

    def next_assignments(self, start: int, count: int) -> list[TrialAssignment]:
        return [_assignment(self.experiment, start + i, self.values) for i in range(count)]


class Enas:
    """The LSTM controller proposing architectures and learning from the trials' rewards."""

    exhausted = False

    def __init__(
        self,
        settings: dict[str, Value],
        nas_config: NasConfig,
        experiment: str,
        maximize: bool,
        seed: int,
        state: Path | None,
    ) -> None:
        self.nas_config = nas_config
        self.operations = nas.enas_operations(nas_config.operations or [])
        graph = nas_config.graph_config
        self.num_layers = int(graph.num_layers or 0) if graph else 0
        self.settings = Settings.from_upstream(nas.enas_settings(dict(settings)))
        self.controller = Controller(self.num_layers, len(self.operations), self.settings, seed)
        self.experiment = experiment
        self.maximize = maximize
        self.state = state
        self.outcomes: dict[str, Outcome] = {}
        self.last_start = -1
        self.last_arcs: list[list[int]] = []
        if state is not None and state.exists():
            meta = self.controller.load(state)
            if meta is None:
                log.warning("enas state %s does not fit this Experiment; starting afresh", state)
            else:
                self.last_start = int(meta["start"])
                self.last_arcs = [list(a) for a in meta["arcs"]]
                log.info(
                    "enas controller restored from %s (%d training steps)",
                    state,
                    self.controller.train_step,
                )

    def catch_up(self, assignments: Sequence[TrialAssignment], outcomes: dict[str, Outcome]) -> int:
        told = len(set(outcomes) - set(self.outcomes))
        self.outcomes = dict(outcomes)
        return told

    def reward(self) -> float | None:
        """Upstream's: the mean objective of every succeeded trial, negated when minimizing."""
        values = [o.value for o in self.outcomes.values() if o.value is not None]
        if not values:
            return None
        mean = sum(values) / len(values)
        return mean if self.maximize else -mean

    def next_assignments(self, start: int, count: int) -> list[TrialAssignment]:
        if count <= 0:
            return []
        if start == self.last_start and count <= len(self.last_arcs):
            arcs = self.last_arcs[:count]  # a retried pass, or the pod before us handed these
        else:
            reward = self.reward() if start > 0 else None
            if start > 0 and reward is None:
                log.warning("no trial succeeded yet: sampling without training the controller")
            if reward is not None:
                self._train(reward)
            arcs = [self.controller.architecture() for _ in range(count)]
            self.last_start, self.last_arcs = start, arcs
            if self.state is not None:
                self.controller.save(self.state, {"start": start, "arcs": arcs})
        return [
            _assignment(
                self.experiment,
                start + i,
                nas.enas_assignments(
                    nas.enas_layers(arc, self.num_layers), self.nas_config, self.operations
                ),
            )
            for i, arc in enumerate(arcs)
        ]

    def _train(self, reward: float) -> None:
        every = self.settings.log_every_steps
        for step in range(1, self.settings.train_steps + 1):
            stats = self.controller.train(reward)
            if step % every == 0:
                log.info(
                    "controller step %d: loss %.4f, entropy %.9f, gradient norm %.7f, "
                    "baseline %.4f, skip rate %.4f",
                    self.controller.train_step,
                    stats.loss,
                    stats.entropy,
                    stats.grad_norm,
                    stats.baseline,
                    stats.skip_rate,
                )
