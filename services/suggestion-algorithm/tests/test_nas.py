"""darts and enas: assignments that decode to valid architectures, the controller's gradients,
its learning, and its state across a restart."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kubetune import algorithmsettings, nas
from kubetune.api.common import AlgorithmSetting
from kubetune.api.experiment import NasConfig
from kubetune.api.suggestion import TrialAssignment
from kubetune_suggestion_algorithm import algorithms
from kubetune_suggestion_algorithm.controller import Controller, Node, Settings, Tape
from kubetune_suggestion_algorithm.outcomes import Outcome

CONFIG = NasConfig.model_validate(
    {
        "graphConfig": {"numLayers": 4, "inputSizes": [8, 8, 1], "outputSizes": [10]},
        "operations": [
            {
                "operationType": "convolution",
                "parameters": [
                    {"name": "filter_size", "parameterType": "categorical",
                     "feasibleSpace": {"list": ["3", "5"]}},
                    {"name": "num_filter", "parameterType": "int",
                     "feasibleSpace": {"min": "4", "max": "8", "step": "4"}},
                ],
            },
            {
                "operationType": "reduction",
                "parameters": [
                    {"name": "reduction_type", "parameterType": "categorical",
                     "feasibleSpace": {"list": ["max_pooling", "avg_pooling"]}},
                ],
            },
        ],
    }
)  # fmt: skip


def _build(algorithm: str, data_dir: Path | None, **settings: str) -> algorithms.Algorithm:
    listed = [AlgorithmSetting(name=k, value=v) for k, v in settings.items()]
    assert algorithmsettings.validate(algorithm, listed, None) == []
    return algorithms.build(
        algorithm,
        algorithmsettings.parse(algorithm, listed),
        [],
        experiment="nas",
        uid="uid-1",
        maximize=True,
        data_dir=data_dir,
        study_name="ns.nas.uid-1",
        nas_config=CONFIG,
    )


def _values(assignment: TrialAssignment) -> dict[str, str]:
    return {p.name: p.value for p in assignment.parameter_assignments or []}


def test_enas_assignments_decode_to_valid_architectures(tmp_path: Path) -> None:
    search = _build("enas", tmp_path, controller_train_steps="3")
    operations = nas.enas_operations(CONFIG.operations or [])
    assert len(operations) == 2 * 2 + 2
    handed: list[TrialAssignment] = []
    for start, count in ((0, 3), (3, 2), (5, 4)):
        new = search.next_assignments(start, count)
        assert [a.name for a in new] == [f"nas-{a.name[4:]}" for a in new] and len(new) == count
        handed += new
        search.catch_up(handed, {a.name: Outcome(0.5) for a in handed})
    assert len({a.name for a in handed}) == len(handed)
    for assignment in handed:
        values = _values(assignment)
        assert list(values) == ["architecture", "nn_config"]
        layers, config = nas.decode_enas(values["architecture"], values["nn_config"])
        assert len(layers) == 4
        for index, layer in enumerate(layers):
            assert 0 <= layer[0] < len(operations) and len(layer) == index + 1
            assert config["embedding"][str(layer[0])] == json.loads(
                json.dumps(operations[layer[0]])
            )
        assert config["input_sizes"] == [8, 8, 1] and config["output_sizes"] == [10]


def test_darts_hands_every_trial_the_search_space() -> None:
    search = _build("darts", None, num_epochs="2")
    first, second = search.next_assignments(0, 2)
    assert _values(first) == _values(second)
    values = _values(first)
    settings = json.loads(values["algorithm-settings"].replace("'", '"'))
    assert settings["num_epochs"] == "2" and settings["w_lr"] == 0.025
    space = json.loads(values["search-space"].replace("'", '"'))
    assert space == ["convolution_3x3", "convolution_5x5", "reduction_max_poolingxmax_pooling",
                     "reduction_avg_poolingxavg_pooling"]  # fmt: skip
    assert values["num-layers"] == "4"


def _loss(controller: Controller, params: dict[str, np.ndarray], seed: int) -> float:
    """The training loss of the architecture drawn with this seed, at these weights."""
    tape = Tape()
    controller.params = params
    controller.rng = np.random.default_rng(seed)
    sample = controller.sample(tape, {k: Node(v) for k, v in params.items()})
    assert sample.skip_penalty is not None
    return float(sample.log_prob.value) * 0.3 + 0.8 * float(sample.skip_penalty.value)


def test_controller_gradients_match_finite_differences() -> None:
    controller = Controller(3, 5, Settings(hidden_size=6), seed=1)
    params = {k: v * 30 for k, v in controller.params.items()}  # away from 0: real gradients
    tape = Tape()
    controller.rng = np.random.default_rng(7)
    leaves = {k: Node(v) for k, v in params.items()}
    sample = controller.sample(tape, leaves)
    assert sample.skip_penalty is not None
    loss = tape.add(tape.scale(sample.log_prob, 0.3), tape.scale(sample.skip_penalty, 0.8))
    names = list(params)
    grads = dict(zip(names, tape.grads(loss, [leaves[k] for k in names]), strict=True))
    rng = np.random.default_rng(0)
    for name in names:
        for _ in range(4):
            index = tuple(int(rng.integers(n)) for n in params[name].shape)
            eps = 1e-6
            up = {k: v.copy() for k, v in params.items()}
            down = {k: v.copy() for k, v in params.items()}
            up[name][index] += eps
            down[name][index] -= eps
            numeric = (_loss(controller, up, 7) - _loss(controller, down, 7)) / (2 * eps)
            assert grads[name][index] == pytest.approx(numeric, rel=1e-4, abs=1e-8), name


def test_controller_learns_which_operation_pays() -> None:
    """REINFORCE: rewarding architectures made of operation 0 makes it the likely choice."""
    controller = Controller(2, 4, Settings(hidden_size=16, learning_rate=0.05), seed=3)

    def share_of_zero() -> float:
        arcs = [controller.architecture() for _ in range(200)]
        return sum(arc[0] == 0 for arc in arcs) / len(arcs)

    before = share_of_zero()
    for _ in range(150):
        # train() draws its own architecture: reward it afterwards through the baseline trick
        state = controller.rng.bit_generator.state
        arc = controller.architecture()
        controller.rng.bit_generator.state = state
        controller.train(1.0 if arc[0] == 0 else 0.0)
    assert share_of_zero() > max(0.6, before + 0.3)


def test_enas_state_survives_a_restart(tmp_path: Path) -> None:
    search = _build("enas", tmp_path, controller_train_steps="5")
    first = search.next_assignments(0, 2)
    search.catch_up(first, {first[0].name: Outcome(0.9)})
    second = search.next_assignments(2, 1)
    state = tmp_path / "enas.ns.nas.uid-1.npz"
    assert state.exists()

    again = _build("enas", tmp_path, controller_train_steps="5")
    assert isinstance(again, type(search))
    # the batch the old pod handed out (its write may have been lost) comes back unchanged,
    assert again.next_assignments(2, 1) == second
    # and the controller continues from its 5 training steps, not from scratch.
    again.catch_up(first + second, {first[0].name: Outcome(0.9)})
    fresh = _build("enas", None, controller_train_steps="5")
    fresh.catch_up(first + second, {first[0].name: Outcome(0.9)})
    third = again.next_assignments(3, 1)
    assert third[0].name != second[0].name
    restored = Controller(4, 6, Settings(), 0)
    meta = restored.load(state)
    assert meta is not None and meta["train_step"] == 10 and meta["start"] == 3


def test_enas_state_of_another_shape_is_ignored(tmp_path: Path) -> None:
    state = tmp_path / "other.npz"
    Controller(2, 3, Settings(hidden_size=8), 0).save(state, {"start": 0, "arcs": []})
    assert Controller(4, 6, Settings(), 0).load(state) is None
    state.write_bytes(b"not a state")
    assert Controller(4, 6, Settings(), 0).load(state) is None
