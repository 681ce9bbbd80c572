"""Which implementation runs an algorithm, behind the one interface `syncing` uses.

`indexed.IndexedSearch` runs random and grid (each point a pure function of its index);
`studying.Search` (an Optuna study on the data directory) runs the sampler-based algorithms,
and random or grid when the Experiment warm-starts or its volume already holds a study;
`hyperband.Hyperband` and `pbt.Pbt` keep no state of their own (the Suggestion's status and the
Trials are their state; pbt keeps the trials' checkpoints under the data directory). Every
implementation has `catch_up(assignments, outcomes)`, `next_assignments(start, count)` and
`exhausted`. `nasalgorithms` runs darts and enas (`nasConfig` instead of parameters).

Each implementation is imported when it is built: a random search never loads Optuna, NumPy
or scikit-optimize.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from kubetune.algorithmsettings import Value
from kubetune.api.experiment import NasConfig, ParameterSpec
from kubetune.api.suggestion import TrialAssignment
from kubetune_suggestion_algorithm import indexed
from kubetune_suggestion_algorithm.outcomes import Outcome

STATELESS = ("hyperband", "pbt")
"""Algorithms whose state is entirely in the cluster: no study, no volume needed."""
NAS = ("darts", "enas")
"""Algorithms searching `nasConfig` (no parameters)."""


class Algorithm(Protocol):
    exhausted: bool

    def catch_up(
        self, assignments: Sequence[TrialAssignment], outcomes: dict[str, Outcome]
    ) -> int: ...

    def next_assignments(self, start: int, count: int) -> list[TrialAssignment]: ...


def uid_seed(uid: str) -> int:
    """A seed fixed by the Experiment's uid: the same in every pod of one Experiment."""
    return int(hashlib.sha256(uid.encode()).hexdigest()[:8], 16)


def build(
    algorithm: str,
    settings: dict[str, Value],
    parameters: Sequence[ParameterSpec],
    *,
    experiment: str,
    uid: str,
    maximize: bool,
    data_dir: Path | None,
    study_name: str,
    nas_config: NasConfig | None = None,
    directions: Sequence[bool] = (),
    warm_start: bool = False,
) -> Algorithm:
    """The algorithm; `directions` (per objective, whether it is maximised) when there are
    several objectives: its study gets one direction each (`kubetune.multiobjective`);
    `warm_start`: known results go into a study, so random and grid keep one."""
    seed = settings.get("random_state")
    fixed = seed if isinstance(seed, int) else uid_seed(uid)
    if (
        algorithm in indexed.ALGORITHMS
        and not warm_start
        and (data_dir is None or not (data_dir / indexed.JOURNAL).exists())
    ):
        return indexed.IndexedSearch(algorithm, parameters, experiment, fixed)
    if algorithm in NAS:
        from kubetune_suggestion_algorithm import nasalgorithms

        config = nas_config or NasConfig()
        if algorithm == "darts":
            return nasalgorithms.Darts(settings, config, experiment)
        state = None if data_dir is None else data_dir / f"enas.{study_name}.npz"
        return nasalgorithms.Enas(settings, config, experiment, maximize, uid_seed(uid), state)
    if algorithm == "hyperband":
        from kubetune_suggestion_algorithm import hyperband

        return hyperband.Hyperband(
            settings,
            parameters,
            experiment,
            maximize,
            fixed,
        )
    if algorithm == "pbt":
        from kubetune_suggestion_algorithm import pbt

        return pbt.Pbt(
            settings,
            parameters,
            experiment,
            maximize,
            fixed,
            data_dir,
        )
    from kubetune_suggestion_algorithm import studying

    study = studying.open_study(
        data_dir, study_name, directions or maximize, seed if isinstance(seed, int) else None
    )
    return studying.Search(study, algorithm, settings, parameters, experiment)
