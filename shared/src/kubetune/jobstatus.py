"""Success or failure of any Kubernetes object, from the trial template's GJSON conditions.

Why: a Trial may run any kind (batch Job, TFJob, Argo Workflow, ...), so the trial template
says how to read the job's status with two GJSON expressions, ``successCondition`` and
``failureCondition``, as in Katib. Semantics (Katib v1beta1): the failure condition is tried
first, then the success condition; an expression *matches* when its result is an object or a
non-empty array; the (first) matched object's ``reason`` and ``message`` are carried into the
Trial; when neither matches the job is still running (or not started).

Telling "no match" from "bad expression": the Python ``gjson`` package raises the same
``GJSONParseError`` for a path that finds nothing (a Job with no ``status.conditions`` yet) as
for a malformed expression, whereas Go's gjson (Katib's) just returns an empty result. We
separate them in two places:

1. :func:`validate_expression` (the webhook's check, also run, cached, before every
   evaluation) rejects what is wrong whatever the document is:

   * syntax: the library parses the whole expression before it reads the document, so an error
     raised identically (same message and position) on three documents of different shape
     (``{}``, ``[]``, ``null``) cannot come from the data; an expression that reads the document
     always fails differently on a mapping than on a list at its first step;
   * unknown modifiers (``@bogus``), looked up in the library's own list of built-ins, wherever
     they appear (the library would only notice them once the data reaches them);
   * query values that are not JSON (``#(status==True)``: Go gjson silently never matches it,
     the Python library fails only when an element has that key).

2. At evaluation, a ``GJSONParseError`` whose message is one of the library's "the data has no
   such thing" errors (missing key, index out of range, no element matched a ``#(...)``, a step
   applied to a value of the wrong shape) is "no match"; any other error is reported as
   :class:`InvalidConditionExpression`, never swallowed. The list is tied to ``gjson`` 1.2.x
   and pinned by tests.

Evaluation (validation's included) goes through :mod:`kubetune.boundedgjson`: ``%`` is Go's
wildcard match in linear time, and a condition too long, too nested or too costly for its
document is refused with the bound it crossed (:class:`ConditionTooCostly` at evaluation), so
one Trial's condition can fail that Trial but never stall the process evaluating it.
"""

from __future__ import annotations

import enum
import functools
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import gjson

from kubetune import boundedgjson

__all__ = [
    "ARGO_WORKFLOW_CONDITIONS",
    "BATCH_JOB_CONDITIONS",
    "BATCH_JOB_INTERIM_CONDITIONS",
    "DEFAULT_CONDITIONS_BY_KIND",
    "KUBEFLOW_JOB_CONDITIONS",
    "TEKTON_PIPELINERUN_CONDITIONS",
    "TRAINJOB_CONDITIONS",
    "ConditionError",
    "ConditionEvaluationError",
    "ConditionRules",
    "ConditionTooCostly",
    "InvalidConditionExpression",
    "JobPhase",
    "JobStatus",
    "default_conditions",
    "evaluate",
    "evaluate_job",
    "evaluate_rules",
    "match",
    "validate_expression",
]


class ConditionError(Exception):
    """Base of this module's errors."""


def _shown(expression: object) -> str:
    """The expression for a message, cut short (it may be as long as a request allows)."""
    text = repr(expression)
    return text if len(text) <= 200 else f"{text[:200]}... ({len(text)} characters)"


class InvalidConditionExpression(ConditionError, ValueError):
    """The expression is not valid GJSON (or uses something this library cannot evaluate)."""

    def __init__(self, expression: object, reason: str) -> None:
        self.expression = expression
        self.reason = reason
        super().__init__(f"invalid condition expression {_shown(expression)}: {reason}")


class ConditionEvaluationError(ConditionError):
    """The expression matched something that is not an object, so no reason/message exists."""

    def __init__(self, expression: str, result: object) -> None:
        self.expression = expression
        self.result = result
        super().__init__(
            f"condition {expression!r} matched {json.dumps(result, default=str)[:200]}, "
            "expected an object or an array of objects"
        )


class ConditionTooCostly(ConditionError):
    """The expression could not be evaluated on this document within the evaluation bounds."""

    def __init__(self, expression: str, reason: str) -> None:
        self.expression = expression
        self.reason = reason
        super().__init__(
            f"condition {_shown(expression)} cannot be evaluated within bounds: it {reason}; "
            "simplify the expression"
        )


@dataclass(frozen=True)
class ConditionRules:
    """A trial template's ``successCondition`` / ``failureCondition`` pair."""

    success_condition: str
    failure_condition: str


class JobPhase(enum.Enum):
    """What the conditions say about the job."""

    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    RUNNING = "Running"  # neither condition matched: running or not started yet


@dataclass(frozen=True)
class JobStatus:
    """The job's phase, with the matched object's reason and message (empty when none)."""

    phase: JobPhase
    reason: str = ""
    message: str = ""
    matched: Mapping[str, Any] | None = None


# Katib's defaults and documented examples (reference section 6).
BATCH_JOB_CONDITIONS = ConditionRules(
    success_condition='status.conditions.#(type=="Complete")#|#(status=="True")#',
    failure_condition='status.conditions.#(type=="Failed")#|#(status=="True")#',
)
BATCH_JOB_INTERIM_CONDITIONS = ConditionRules(
    success_condition='status.conditions.#(type=="SuccessCriteriaMet")#|#(status=="True")#',
    failure_condition='status.conditions.#(type=="FailureTarget")#|#(status=="True")#',
)
"""batch/v1's interim conditions (Kubernetes >= 1.31): the outcome is decided, `Complete` or
`Failed` follows once the pods' finalizers are removed (see `evaluate_job`)."""
KUBEFLOW_JOB_CONDITIONS = ConditionRules(
    success_condition='status.conditions.#(type=="Succeeded")#|#(status=="True")#',
    failure_condition='status.conditions.#(type=="Failed")#|#(status=="True")#',
)
TRAINJOB_CONDITIONS = ConditionRules(
    success_condition='status.conditions.#(type=="Complete")#|#(status=="True")#',
    failure_condition='status.conditions.#(type=="Failed")#|#(status=="True")#',
)
ARGO_WORKFLOW_CONDITIONS = ConditionRules(
    success_condition='status.[@this].#(phase=="Succeeded")#',
    failure_condition='status.[@this].#(phase=="Failed")#',
)
TEKTON_PIPELINERUN_CONDITIONS = ConditionRules(
    success_condition='status.conditions.#(type=="Succeeded")#|#(status=="True")#',
    failure_condition='status.conditions.#(type=="Succeeded")#|#(status=="False")#',
)

# Kind -> (API group, defaults): what the Experiment webhook fills in when the template is silent.
DEFAULT_CONDITIONS_BY_KIND: Mapping[str, tuple[str, ConditionRules]] = {
    "Job": ("batch", BATCH_JOB_CONDITIONS),
    "TFJob": ("kubeflow.org", KUBEFLOW_JOB_CONDITIONS),
    "PyTorchJob": ("kubeflow.org", KUBEFLOW_JOB_CONDITIONS),
    "XGBoostJob": ("kubeflow.org", KUBEFLOW_JOB_CONDITIONS),
    "MPIJob": ("kubeflow.org", KUBEFLOW_JOB_CONDITIONS),
    "TrainJob": ("trainer.kubeflow.org", TRAINJOB_CONDITIONS),
}


def default_conditions(kind: str, api_version: str | None = None) -> ConditionRules | None:
    """Katib's default conditions for ``kind``; None for kinds that must bring their own.

    Keyed by kind like Katib's webhook; when ``api_version`` is given its group must match too,
    so a custom ``Job`` kind of another group does not get batch/v1's rules.
    """
    entry = DEFAULT_CONDITIONS_BY_KIND.get(kind)
    if entry is None:
        return None
    group, rules = entry
    if api_version is not None:
        actual_group = api_version.rpartition("/")[0] if "/" in api_version else ""
        if actual_group != group:
            return None
    return rules


# --- validation -------------------------------------------------------------------------------

_PROBES: tuple[gjson.JSONType, ...] = ({}, [], None)
_OPERATORS = ("==~", "!=~", "==", "!=", "<=", ">=", "!%", "=", "<", ">", "%")
_TRUTHINESS_VALUES = ("true", "false", "null", "*")
_MODIFIER_RE = re.compile(r'(?:^|(?<=[.|\[{,:]))@([^"\\,.|:@{}\[\]()]*)')


def _blank_strings(expr: str) -> str:
    """``expr`` with escapes and string literals blanked out (same length), for scanning."""
    out = list(expr)
    i, in_str = 0, False
    while i < len(expr):
        c = expr[i]
        if c == "\\":
            out[i] = "_"
            if i + 1 < len(expr):
                out[i + 1] = "_"
            i += 2
            continue
        if c == '"':
            in_str = not in_str
        elif in_str:
            out[i] = "_"
        i += 1
    return "".join(out)


def _query_bodies(expr: str) -> Iterator[tuple[str, str]]:
    """Each ``#(...)`` body as (blanked body, original body), nested ones included.

    One pass with a stack of open parentheses, so the cost stays linear in the expression."""
    blank = _blank_strings(expr)
    opened: list[tuple[int, bool]] = []  # (position, whether it opens a query)
    for i, c in enumerate(blank):
        if c == "(":
            opened.append((i, i > 0 and blank[i - 1] == "#"))
        elif c == ")" and opened:
            start, is_query = opened.pop()
            if is_query:
                yield blank[start + 1 : i], expr[start + 1 : i]


def _check_query_value(body_blank: str, body: str) -> str | None:
    """Why the ``#(...)`` body's value is invalid, or None."""
    if "#(" in body_blank:
        return None  # a nested query: its own body is checked separately
    best: tuple[int, str] | None = None
    for op in _OPERATORS:  # a longer operator is listed before its prefixes, so it wins ties
        pos = body_blank.find(op)
        if pos >= 0 and (best is None or pos < best[0]):
            best = (pos, op)
    if best is not None:
        pos, op = best
        value = body[pos + len(op) :].strip()
        if op in ("==~", "!=~"):
            if value not in _TRUTHINESS_VALUES:
                return f"{op} needs one of {', '.join(_TRUTHINESS_VALUES)}, got {value!r}"
            return None
        try:
            json.loads(value)
        except ValueError:
            return f'query value {value!r} is not JSON (quote strings: "{value}")'
    return None  # an existence query, #(key)


@functools.lru_cache(maxsize=1024)
def _validate(expr: str) -> None:
    if not expr.strip():
        raise InvalidConditionExpression(expr, "empty expression")
    outcomes: set[tuple[str, str, int | None]] = set()
    for probe in _PROBES:
        try:
            boundedgjson.get(probe, expr)
        except boundedgjson.BoundExceeded as err:
            raise InvalidConditionExpression(expr, f"it {err.reason}") from err
        except gjson.GJSONError as err:
            first_line = str(err).split("\n", 1)[0]
            outcomes.add((type(err).__name__, first_line, getattr(err, "position", None)))
        else:
            outcomes.add(("ok", "", None))
    if len(outcomes) == 1:
        kind, message, _ = next(iter(outcomes))
        if kind != "ok":
            raise InvalidConditionExpression(expr, message)
    builtins = gjson.GJSONObj.builtin_modifiers()
    for m in _MODIFIER_RE.finditer(_blank_strings(expr)):
        if m.group(1) not in builtins:
            raise InvalidConditionExpression(expr, f"unknown modifier @{m.group(1)}")
    for body_blank, body in _query_bodies(expr):
        problem = _check_query_value(body_blank, body)
        if problem is not None:
            raise InvalidConditionExpression(expr, problem)


def validate_expression(expr: object) -> None:
    """Raise InvalidConditionExpression unless ``expr`` is a usable GJSON condition."""
    if not isinstance(expr, str):
        raise InvalidConditionExpression(expr, f"expected a string, got {type(expr).__name__}")
    _validate(expr)


# --- evaluation -------------------------------------------------------------------------------

# gjson 1.2.x messages that mean "the document does not contain that", i.e. no match.
_NO_DATA_PREFIXES = (
    "Mapping object does not have key ",
    "Query for first element does not match anything",
    "Index `",
    "No key matching pattern with wildcard ",
    "Queries are supported only for sequence like objects",
    "Integer query part on unsupported object type ",
    "Wildcard matching key ",
    "Expected a sequence like object for query part #",
    "Invalid or unsupported query part ",
)


def _query(obj: Mapping[str, Any], expr: str) -> Any:
    """The expression's raw result, or None when the document has nothing there."""
    validate_expression(expr)
    try:
        return boundedgjson.get(obj, expr)
    except boundedgjson.BoundExceeded as err:
        raise ConditionTooCostly(expr, err.reason) from err
    except gjson.GJSONParseError as err:
        if str(err).startswith(_NO_DATA_PREFIXES):
            return None
        raise InvalidConditionExpression(expr, str(err).split("\n", 1)[0]) from err
    except gjson.GJSONError:
        # A modifier failed on this document's values; Go gjson yields an empty result there.
        return None


def match(obj: Mapping[str, Any], expr: str) -> Mapping[str, Any] | None:
    """The first object ``expr`` matches in ``obj``, or None when it matches nothing.

    A match is an object or a non-empty array, as in Katib; a scalar result is no match (wrap
    a scalar field with ``[@this]`` and filter it, like the Argo example does).
    """
    result = _query(obj, expr)
    if isinstance(result, Mapping):
        return result
    if isinstance(result, list) and result:
        first = result[0]
        if isinstance(first, Mapping):
            return first
        raise ConditionEvaluationError(expr, result)
    return None


def _text(value: object) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, default=str)


def evaluate(
    obj: Mapping[str, Any], *, success_condition: str, failure_condition: str
) -> JobStatus:
    """The job's phase from its two conditions: failure first, then success, else running."""
    for expr, phase in (
        (failure_condition, JobPhase.FAILED),
        (success_condition, JobPhase.SUCCEEDED),
    ):
        matched = match(obj, expr)
        if matched is not None:
            return JobStatus(
                phase, _text(matched.get("reason")), _text(matched.get("message")), matched
            )
    return JobStatus(JobPhase.RUNNING)


def evaluate_rules(obj: Mapping[str, Any], rules: ConditionRules) -> JobStatus:
    """:func:`evaluate` with a :class:`ConditionRules` pair."""
    return evaluate(
        obj, success_condition=rules.success_condition, failure_condition=rules.failure_condition
    )


def evaluate_job(
    obj: Mapping[str, Any], rules: ConditionRules, kind: str, api_version: str
) -> JobStatus:
    """:func:`evaluate_rules`; for a batch/v1 Job judged by Katib's default rules, its interim
    conditions decide too. Why: the Job controller writes `SuccessCriteriaMet` (or
    `FailureTarget`) as soon as the outcome is known, then removes each pod's finalizer, then
    writes `Complete` (or `Failed`) with the same reason and message: reading the first saves
    those round trips on every Trial. Custom rules are the user's and are left exactly so."""
    state = evaluate_rules(obj, rules)
    if (
        state.phase is JobPhase.RUNNING
        and rules == BATCH_JOB_CONDITIONS
        and default_conditions(kind, api_version) is BATCH_JOB_CONDITIONS
    ):
        return evaluate_rules(obj, BATCH_JOB_INTERIM_CONDITIONS)
    return state
