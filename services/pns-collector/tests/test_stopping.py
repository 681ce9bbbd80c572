"""Early-stopping rules: parsing and firing."""

from __future__ import annotations

import pytest

from kubetune.api.common import ComparisonType, ObjectiveType
from kubetune_pns_collector.stopping import EarlyStopper, Rule, RuleError, parse_rule


def test_parse() -> None:
    assert parse_rule("loss;0.5;less;2") == Rule("loss", 0.5, ComparisonType.LESS, 2)
    assert parse_rule("acc;1e-1;greater") == Rule("acc", 0.1, ComparisonType.GREATER, 0)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("loss;0.5", "want name;value;comparison;startStep"),
        ("loss;x;less;1", "is not a finite number"),
        ("loss;1_0;less;1", "is not a finite number"),  # Python's float() reads 10
        ("loss;\uff11;less;1", "is not a finite number"),
        ("loss;1;lower;1", "comparison must be equal, less or greater"),
        ("loss;1;less;two", "is no integer"),
        ("loss;1;less;-1", "must be >= 0"),
    ],
)
def test_bad_rules(text: str, message: str) -> None:
    with pytest.raises(RuleError, match=message):
        parse_rule(text)


def test_objective_rule_uses_the_best_value_so_far_from_start_step() -> None:
    # maximize accuracy; stop when the best accuracy is still below 0.6 at step >= 3
    stopper = EarlyStopper([parse_rule("acc;0.6;less;3")], "acc", ObjectiveType.MAXIMIZE)
    assert not stopper.observe("acc", "0.1")
    assert not stopper.observe("acc", "0.7")
    assert not stopper.observe("acc", "0.2")  # best is 0.7: not less than 0.6
    assert not stopper.triggered
    stopper = EarlyStopper([parse_rule("acc;0.6;less;3")], "acc", ObjectiveType.MAXIMIZE)
    assert not stopper.observe("acc", "0.1")
    assert not stopper.observe("acc", "0.2")
    assert stopper.observe("acc", "0.3")
    assert stopper.triggered


def test_all_rules_must_fire_and_text_values_are_ignored() -> None:
    rules = [parse_rule("loss;2;greater;0"), parse_rule("lr;0.1;equal;0")]
    stopper = EarlyStopper(rules, "acc", ObjectiveType.MAXIMIZE)
    assert not stopper.observe("loss", "nan")
    assert not stopper.observe("loss", "text")
    assert not stopper.observe("loss", "3")
    assert not stopper.observe("other", "3")
    assert stopper.observe("lr", "0.1")


def test_values_no_writer_may_store_never_fire_a_rule() -> None:
    """`1_0` is no 10, `１` no 1, a 200-digit number no value (the summary skips them too)."""
    stopper = EarlyStopper([parse_rule("loss;5;greater;0")], "acc", ObjectiveType.MAXIMIZE)
    for value in ("1_0", "\uff16", " 6", "9" * 200, "inf"):
        assert not stopper.observe("loss", value), value
    assert stopper.observe("loss", "6")
