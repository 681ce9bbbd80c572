"""Job status from GJSON conditions, against realistic status documents of each job kind."""

from __future__ import annotations

import copy
from typing import Any

import gjson
import pytest

from kubetune import jobstatus
from kubetune.jobstatus import (
    ARGO_WORKFLOW_CONDITIONS,
    BATCH_JOB_CONDITIONS,
    KUBEFLOW_JOB_CONDITIONS,
    TEKTON_PIPELINERUN_CONDITIONS,
    TRAINJOB_CONDITIONS,
    ConditionEvaluationError,
    ConditionRules,
    InvalidConditionExpression,
    JobPhase,
    default_conditions,
    evaluate_rules,
    match,
    validate_expression,
)

T0 = "2026-11-30T09:00:00Z"
T1 = "2026-11-30T09:05:00Z"


def cond(ctype: str, status: str, reason: str = "", message: str = "") -> dict[str, Any]:
    c: dict[str, Any] = {
        "type": ctype,
        "status": status,
        "lastProbeTime": T1,
        "lastTransitionTime": T1,
    }
    if reason:
        c["reason"] = reason
    if message:
        c["message"] = message
    return c


def batch_job(status: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "random-exp-abc123", "namespace": "kubeflow", "uid": "1f0c"},
        "spec": {"backoffLimit": 0, "completions": 1, "parallelism": 1, "template": {}},
        "status": status,
    }


JOB_PENDING = batch_job({})  # just created: the job controller has not written status yet
JOB_RUNNING = batch_job(
    {"active": 1, "ready": 1, "startTime": T0, "terminating": 0, "uncountedTerminatedPods": {}}
)
# Kubernetes >= 1.31 adds SuccessCriteriaMet/FailureTarget before the terminal condition.
JOB_COMPLETE = batch_job(
    {
        "startTime": T0,
        "completionTime": T1,
        "succeeded": 1,
        "ready": 0,
        "terminating": 0,
        "uncountedTerminatedPods": {},
        "conditions": [
            cond(
                "SuccessCriteriaMet",
                "True",
                "CompletionsReached",
                "Reached expected number of succeeded pods",
            ),
            cond(
                "Complete",
                "True",
                "CompletionsReached",
                "Reached expected number of succeeded pods",
            ),
        ],
    }
)
JOB_FAILURE_TARGET = batch_job(
    {
        "startTime": T0,
        "failed": 1,
        "terminating": 1,
        "uncountedTerminatedPods": {},
        "conditions": [
            cond(
                "FailureTarget",
                "True",
                "BackoffLimitExceeded",
                "Job has reached the specified backoff limit",
            ),
        ],
    }
)
JOB_FAILED = batch_job(
    {
        "startTime": T0,
        "failed": 1,
        "terminating": 0,
        "uncountedTerminatedPods": {},
        "conditions": [
            cond(
                "FailureTarget",
                "True",
                "BackoffLimitExceeded",
                "Job has reached the specified backoff limit",
            ),
            cond(
                "Failed",
                "True",
                "BackoffLimitExceeded",
                "Job has reached the specified backoff limit",
            ),
        ],
    }
)
JOB_RESUMED = batch_job(  # a Job that was suspended then resumed: Suspended=False must not count
    {
        "active": 1,
        "startTime": T0,
        "conditions": [cond("Suspended", "False", "JobResumed", "Job resumed")],
    }
)


def tfjob(conditions: list[dict[str, Any]], replica: dict[str, int]) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": "tfjob-mnist-x7k2", "namespace": "kubeflow"},
        "spec": {"tfReplicaSpecs": {"Worker": {"replicas": 2}}},
        "status": {
            "conditions": conditions,
            "replicaStatuses": {"Worker": replica},
            "startTime": T0,
        },
    }


CREATED = cond("Created", "True", "TFJobCreated", "TFJob kubeflow/tfjob-mnist-x7k2 is created.")
RUNNING = cond("Running", "True", "TFJobRunning", "TFJob kubeflow/tfjob-mnist-x7k2 is running.")
NOT_RUNNING = {**RUNNING, "status": "False"}
TFJOB_CREATED = tfjob([CREATED], {})
TFJOB_RUNNING = tfjob([CREATED, RUNNING], {"active": 2})
TFJOB_SUCCEEDED = tfjob(
    [
        CREATED,
        NOT_RUNNING,
        cond(
            "Succeeded",
            "True",
            "TFJobSucceeded",
            "TFJob kubeflow/tfjob-mnist-x7k2 successfully completed.",
        ),
    ],
    {"succeeded": 2},
)
TFJOB_FAILED = tfjob(
    [
        CREATED,
        NOT_RUNNING,
        cond(
            "Failed",
            "True",
            "TFJobFailed",
            "TFJob kubeflow/tfjob-mnist-x7k2 has failed because 1 Worker replica(s) failed.",
        ),
    ],
    {"active": 1, "failed": 1},
)


def workflow(phase: str | None, message: str = "") -> dict[str, Any]:
    status: dict[str, Any] = {}
    if phase is not None:
        status = {"phase": phase, "startedAt": T0, "progress": "0/1", "nodes": {}}
        if message:
            status["message"] = message
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "Workflow",
        "metadata": {"name": "argo-exp-abc", "namespace": "kubeflow"},
        "spec": {"entrypoint": "main"},
        "status": status,
    }


@pytest.mark.parametrize(
    ("job", "phase", "reason", "message"),
    [
        (JOB_PENDING, JobPhase.RUNNING, "", ""),
        (JOB_RUNNING, JobPhase.RUNNING, "", ""),
        (JOB_RESUMED, JobPhase.RUNNING, "", ""),
        # FailureTarget alone: pods still terminating, the Job is not Failed yet.
        (JOB_FAILURE_TARGET, JobPhase.RUNNING, "", ""),
        (
            JOB_COMPLETE,
            JobPhase.SUCCEEDED,
            "CompletionsReached",
            "Reached expected number of succeeded pods",
        ),
        (
            JOB_FAILED,
            JobPhase.FAILED,
            "BackoffLimitExceeded",
            "Job has reached the specified backoff limit",
        ),
    ],
)
def test_batch_job(job: dict[str, Any], phase: JobPhase, reason: str, message: str) -> None:
    got = evaluate_rules(job, BATCH_JOB_CONDITIONS)
    assert (got.phase, got.reason, got.message) == (phase, reason, message)


def _interim_only(job: dict[str, Any], kind: str) -> dict[str, Any]:
    """`job` as the Job controller leaves it between its two status writes: the interim
    condition is there, the terminal one not yet."""
    out = copy.deepcopy(job)
    out["status"]["conditions"] = [c for c in out["status"]["conditions"] if c["type"] == kind]
    return out


def test_a_batch_job_is_decided_by_its_interim_condition_with_the_default_rules() -> None:
    success = _interim_only(JOB_COMPLETE, "SuccessCriteriaMet")
    failure = _interim_only(JOB_FAILED, "FailureTarget")
    got = jobstatus.evaluate_job(success, BATCH_JOB_CONDITIONS, "Job", "batch/v1")
    assert (got.phase, got.reason) == (JobPhase.SUCCEEDED, "CompletionsReached")
    got = jobstatus.evaluate_job(failure, BATCH_JOB_CONDITIONS, "Job", "batch/v1")
    assert (got.phase, got.reason) == (JobPhase.FAILED, "BackoffLimitExceeded")
    # The terminal conditions still decide, failure first.
    assert jobstatus.evaluate_job(JOB_FAILED, BATCH_JOB_CONDITIONS, "Job", "batch/v1").phase is (
        JobPhase.FAILED
    )
    running = jobstatus.evaluate_job(JOB_RUNNING, BATCH_JOB_CONDITIONS, "Job", "batch/v1")
    assert running.phase is JobPhase.RUNNING


def test_custom_rules_and_other_kinds_are_not_read_through_interim_conditions() -> None:
    success = _interim_only(JOB_COMPLETE, "SuccessCriteriaMet")
    custom = jobstatus.ConditionRules(
        success_condition='status.conditions.#(type=="Complete")#|#(status=="True")#',
        failure_condition='status.conditions.#(type=="Failed")#',
    )
    assert jobstatus.evaluate_job(success, custom, "Job", "batch/v1").phase is JobPhase.RUNNING
    other = jobstatus.evaluate_job(success, BATCH_JOB_CONDITIONS, "Job", "example.com/v1")
    assert other.phase is JobPhase.RUNNING


def test_batch_job_carries_the_matched_condition_object() -> None:
    got = evaluate_rules(JOB_COMPLETE, BATCH_JOB_CONDITIONS)
    assert got.matched is not None and got.matched["type"] == "Complete"


def test_failure_is_checked_before_success() -> None:
    both = copy.deepcopy(JOB_COMPLETE)
    both["status"]["conditions"].append(cond("Failed", "True", "DeadlineExceeded", "too slow"))
    got = evaluate_rules(both, BATCH_JOB_CONDITIONS)
    assert (got.phase, got.reason) == (JobPhase.FAILED, "DeadlineExceeded")


@pytest.mark.parametrize(
    ("job", "phase", "reason"),
    [
        (TFJOB_CREATED, JobPhase.RUNNING, ""),
        (TFJOB_RUNNING, JobPhase.RUNNING, ""),
        (TFJOB_SUCCEEDED, JobPhase.SUCCEEDED, "TFJobSucceeded"),
        (TFJOB_FAILED, JobPhase.FAILED, "TFJobFailed"),
    ],
)
def test_tfjob(job: dict[str, Any], phase: JobPhase, reason: str) -> None:
    got = evaluate_rules(job, KUBEFLOW_JOB_CONDITIONS)
    assert (got.phase, got.reason) == (phase, reason)
    if phase is JobPhase.FAILED:
        assert got.message.endswith("because 1 Worker replica(s) failed.")


def test_batch_rules_do_not_read_a_tfjob_as_succeeded() -> None:
    # batch/v1 looks for "Complete", which TFJob never sets: the kind's own rules matter.
    assert evaluate_rules(TFJOB_SUCCEEDED, BATCH_JOB_CONDITIONS).phase is JobPhase.RUNNING


@pytest.mark.parametrize(
    ("phase", "expected"),
    [
        (None, JobPhase.RUNNING),
        ("Pending", JobPhase.RUNNING),
        ("Running", JobPhase.RUNNING),
        ("Succeeded", JobPhase.SUCCEEDED),
        ("Failed", JobPhase.FAILED),
        # Katib's example failureCondition only knows "Failed": an Error'd workflow stays running.
        ("Error", JobPhase.RUNNING),
    ],
)
def test_argo_workflow_with_katib_example_rules(phase: str | None, expected: JobPhase) -> None:
    assert evaluate_rules(workflow(phase), ARGO_WORKFLOW_CONDITIONS).phase is expected


def test_argo_workflow_failure_carries_the_status_message() -> None:
    got = evaluate_rules(workflow("Failed", "child 'main' failed"), ARGO_WORKFLOW_CONDITIONS)
    assert (got.phase, got.message) == (JobPhase.FAILED, "child 'main' failed")


def test_argo_workflow_error_with_a_custom_failure_condition() -> None:
    rules = ConditionRules(
        success_condition=ARGO_WORKFLOW_CONDITIONS.success_condition,
        failure_condition='status.[@this].#(phase!="Succeeded")#|#(phase!="Running")#'
        '|#(phase!="Pending")#',
    )
    validate_expression(rules.failure_condition)
    assert evaluate_rules(workflow("Error", "pod deleted"), rules).phase is JobPhase.FAILED
    assert evaluate_rules(workflow("Failed"), rules).phase is JobPhase.FAILED
    assert evaluate_rules(workflow("Running"), rules).phase is JobPhase.RUNNING
    assert evaluate_rules(workflow("Succeeded"), rules).phase is JobPhase.SUCCEEDED


def test_tekton_pipelinerun() -> None:
    def run(status: str, reason: str) -> dict[str, Any]:
        return {"status": {"conditions": [cond("Succeeded", status, reason, f"Tasks: {reason}")]}}

    assert evaluate_rules(run("Unknown", "Running"), TEKTON_PIPELINERUN_CONDITIONS).phase is (
        JobPhase.RUNNING
    )
    assert evaluate_rules(run("True", "Succeeded"), TEKTON_PIPELINERUN_CONDITIONS).phase is (
        JobPhase.SUCCEEDED
    )
    failed = evaluate_rules(run("False", "Failed"), TEKTON_PIPELINERUN_CONDITIONS)
    assert (failed.phase, failed.reason) == (JobPhase.FAILED, "Failed")


def test_custom_kind_with_custom_expressions_on_its_own_fields() -> None:
    rules = ConditionRules(
        success_condition="status.[@this].#(succeeded==1)",  # single match: an object
        failure_condition='status.[@this].#(state=="Crashed")#',
    )
    sweep: dict[str, Any] = {
        "apiVersion": "example.com/v1",
        "kind": "Sweep",
        "status": {"state": "Working", "succeeded": 0},
    }
    assert evaluate_rules(sweep, rules).phase is JobPhase.RUNNING
    sweep["status"] = {"state": "Done", "succeeded": 1, "reason": "AllDone", "message": "ok"}
    got = evaluate_rules(sweep, rules)
    assert (got.phase, got.reason, got.message) == (JobPhase.SUCCEEDED, "AllDone", "ok")
    sweep["status"] = {"state": "Crashed", "reason": 42}  # non-string reason is rendered, not lost
    got = evaluate_rules(sweep, rules)
    assert (got.phase, got.reason, got.message) == (JobPhase.FAILED, "42", "")


@pytest.mark.parametrize(
    "doc",
    [
        {},  # no status at all
        {"status": None},
        {"status": {"conditions": {"type": "Complete"}}},  # wrong shape: a map, not a list
        {"status": {"conditions": "Complete"}},
        {"status": {"conditions": []}},
        {"status": {"conditions": [{"type": "Complete"}]}},  # no status field in the condition
    ],
)
def test_documents_without_the_data_are_no_match(doc: dict[str, Any]) -> None:
    assert evaluate_rules(doc, BATCH_JOB_CONDITIONS).phase is JobPhase.RUNNING


def test_match_returns_the_first_matching_object_or_none() -> None:
    assert (
        match(JOB_FAILED, 'status.conditions.#(status=="True")#')
        == JOB_FAILED["status"]["conditions"][0]
    )
    assert match(JOB_RUNNING, "status.conditions.5") is None
    assert match(JOB_RUNNING, "status.cond*") is None
    assert match(JOB_RUNNING, "status.active") is None  # a scalar result is never a match
    assert match(JOB_RUNNING, "status.uncountedTerminatedPods") == {}  # an object matches


def test_matching_a_non_object_is_an_evaluation_error() -> None:
    with pytest.raises(ConditionEvaluationError, match=r"status\.conditions\.#\.type"):
        match(JOB_COMPLETE, "status.conditions.#.type")


@pytest.mark.parametrize(
    "expr",
    [
        BATCH_JOB_CONDITIONS.success_condition,
        BATCH_JOB_CONDITIONS.failure_condition,
        KUBEFLOW_JOB_CONDITIONS.success_condition,
        TRAINJOB_CONDITIONS.failure_condition,
        ARGO_WORKFLOW_CONDITIONS.success_condition,
        TEKTON_PIPELINERUN_CONDITIONS.failure_condition,
        "status.[@this].#(succeeded==1)",
        "status.[@this].#(succeeded>=1)#",
        'status.conditions.#(type%"Succ*")#',
        'status.conditions.#(reason!="a)b|c@d")#',  # operators and specials inside a string
        "status.conditions.#(message)#",
        "status.conditions.#(message==~true)#",
        "status|@this",
        "@this.status",
        "{status}",
        "status.nodes.*",
    ],
)
def test_valid_expressions(expr: str) -> None:
    validate_expression(expr)


@pytest.mark.parametrize(
    ("expr", "why"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ('status.conditions.#(type=="Complete"', "Unbalanced parentheses"),
        ('status.conditions.#(type=="Complete")#|#(status=="True"', "Unbalanced parentheses"),
        ("status..phase", "two consecutive path delimiters"),
        (".status", "starting with a path delimiter"),
        ("status.", "Delimiter at the end"),
        ("@bogus", "Unknown modifier @bogus"),
        ("status|@bogus", "unknown modifier @bogus"),
        ('status.conditions.#(type=="Complete")#|@nope', "unknown modifier @nope"),
        (
            'status.conditions.#(type=="Complete")#|#(status==True)#',
            "query value 'True' is not JSON",
        ),
        ("status.conditions.#(type==Complete)#", "query value 'Complete' is not JSON"),
        ("status.conditions.#(message==~yes)#", "==~ needs one of"),
        ("!notjson", "literal"),
    ],
)
def test_malformed_expressions(expr: str, why: str) -> None:
    with pytest.raises(InvalidConditionExpression) as err:
        validate_expression(expr)
    assert err.value.expression == expr
    assert why.lower() in str(err.value).lower()
    assert repr(expr) in str(err.value)


def test_non_string_expression_is_invalid() -> None:
    with pytest.raises(InvalidConditionExpression, match="expected a string"):
        validate_expression(None)
    with pytest.raises(InvalidConditionExpression):
        validate_expression(["status"])


def test_evaluate_rejects_a_malformed_expression_even_when_data_is_missing() -> None:
    # On a Job without conditions the library would fail at the missing key first and the
    # bad part would look like "no match"; validation must catch it anyway.
    rules = ConditionRules(
        success_condition='status.conditions.#(type=="Complete")#|#(status==True)#',
        failure_condition=BATCH_JOB_CONDITIONS.failure_condition,
    )
    for job in (JOB_PENDING, JOB_COMPLETE):
        with pytest.raises(InvalidConditionExpression, match="status==True"):
            evaluate_rules(job, rules)


def test_expression_errors_only_the_data_reveals_are_not_swallowed() -> None:
    expr = 'status.conditions.#(=="x")'  # valid syntax, meaningless on a list of objects
    validate_expression(expr)
    assert match(JOB_PENDING, expr) is None
    with pytest.raises(InvalidConditionExpression, match="require a key"):
        match(JOB_COMPLETE, expr)


def test_invalid_condition_expression_is_a_value_error() -> None:
    assert issubclass(InvalidConditionExpression, ValueError)
    assert issubclass(InvalidConditionExpression, jobstatus.ConditionError)


@pytest.mark.parametrize(
    ("kind", "api_version", "expected"),
    [
        ("Job", "batch/v1", BATCH_JOB_CONDITIONS),
        ("Job", None, BATCH_JOB_CONDITIONS),
        ("TFJob", "kubeflow.org/v1", KUBEFLOW_JOB_CONDITIONS),
        ("PyTorchJob", "kubeflow.org/v1", KUBEFLOW_JOB_CONDITIONS),
        ("XGBoostJob", "kubeflow.org/v1", KUBEFLOW_JOB_CONDITIONS),
        ("MPIJob", "kubeflow.org/v2beta1", KUBEFLOW_JOB_CONDITIONS),
        ("TrainJob", "trainer.kubeflow.org/v1alpha1", TRAINJOB_CONDITIONS),
        ("Workflow", "argoproj.io/v1alpha1", None),
        ("PipelineRun", "tekton.dev/v1", None),
        ("Job", "example.com/v1", None),  # someone else's "Job" kind
        ("Pod", "v1", None),
    ],
)
def test_default_conditions(
    kind: str, api_version: str | None, expected: ConditionRules | None
) -> None:
    assert default_conditions(kind, api_version) == expected


def test_job_and_trainjob_defaults_match_katib() -> None:
    assert (
        ConditionRules(
            'status.conditions.#(type=="Complete")#|#(status=="True")#',
            'status.conditions.#(type=="Failed")#|#(status=="True")#',
        )
        == BATCH_JOB_CONDITIONS
    )
    assert KUBEFLOW_JOB_CONDITIONS.success_condition == (
        'status.conditions.#(type=="Succeeded")#|#(status=="True")#'
    )
    assert TEKTON_PIPELINERUN_CONDITIONS.failure_condition == (
        'status.conditions.#(type=="Succeeded")#|#(status=="False")#'
    )


# --- bounded evaluation: one condition must never stall the process evaluating it ------------


def _job_with_types(*types: str) -> dict[str, Any]:
    return batch_job({"conditions": [cond(t, "True", reason=f"R{i}") for i, t in enumerate(types)]})


@pytest.mark.parametrize(
    ("type_", "pattern", "matched"),
    [
        ("(a+)+b", "(a+)+b", True),  # regex syntax is literal text in Go's gjson
        ("aaab", "(a+)+b", False),
        ("abc", "a.c", False),
        ("a.c", "a.c", True),
        ("Complete", "Comp*", True),
        ("Complete", "C?mplete", True),
        ("C*", "C\\\\*", True),  # an escaped star (JSON "C\\*" is the pattern C\*)
        ("Cx", "C\\\\*", False),
    ],
)
def test_like_is_go_wildcard_matching_not_a_regex(type_: str, pattern: str, matched: bool) -> None:
    found = match(_job_with_types(type_), f'status.conditions.#(type%"{pattern}")')
    assert (found is not None) is matched
    not_found = match(_job_with_types(type_), f'status.conditions.#(type!%"{pattern}")')
    assert (not_found is None) is matched


@pytest.mark.timeout(120)
def test_pathological_like_pattern_ends_on_a_long_value() -> None:
    """Python's regex needed ~2**n steps for `(a+)+b` on n `a`s and a `c`: the thread hung."""
    job = _job_with_types("a" * 100_000 + "c", "Complete")
    assert match(job, 'status.conditions.#(type%"(a+)+b")') is None
    assert match(job, 'status.conditions.#(type%"*a*a*a*a*a*a*b")') is None
    assert match(job, 'status.conditions.#(type%"Comp*")') == job["status"]["conditions"][1]


def test_wildcard_keys_are_matched_without_regex() -> None:
    job = _job_with_types("(a+)+b")
    assert match(job, "stat*.conditions.0") == job["status"]["conditions"][0]
    assert match(job, "st?tus.conditions.0") == job["status"]["conditions"][0]
    assert match(job, "(a+)+*.conditions.0") is None


def test_too_long_expression_is_refused_with_the_bound() -> None:
    expr = "status." + "a" * 2000
    with pytest.raises(InvalidConditionExpression, match="at most 1024 are allowed"):
        validate_expression(expr)


def test_too_deep_nesting_is_refused_with_the_bound() -> None:
    expr = "status.conditions" + ".#(" * 40 + "a" + ")" * 40
    with pytest.raises(InvalidConditionExpression, match="at most 32 are allowed"):
        validate_expression(expr)


@pytest.mark.timeout(120)
def test_modifier_blowup_is_refused_at_validation() -> None:
    """Multipaths only reference their input, but @tostr writes out 2**k copies of it."""
    expr = "@this" + "|[@this,@this]" * 24 + "|@tostr"
    with pytest.raises(InvalidConditionExpression, match="gives a modifier more than"):
        validate_expression(expr)


def test_evaluation_past_the_cpu_deadline_fails_that_condition(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from kubetune import boundedgjson

    validate_expression('status.conditions.#(type%"Comp*")')  # valid and cached
    monkeypatch.setattr(boundedgjson, "MAX_CPU_SECONDS", -1.0)  # every step is past it
    with pytest.raises(jobstatus.ConditionTooCostly, match="cannot be evaluated within bounds"):
        match(JOB_COMPLETE, 'status.conditions.#(type%"Comp*")')


@pytest.mark.timeout(120)
def test_pathological_wildcard_key_ends_on_a_long_key() -> None:
    """The library made `*a*a*a*a*a*a*b` a regex that backtracks polynomially on a long key."""
    job = batch_job({"a" * 50_000 + "c": {"type": "x"}})
    assert match(job, "status.*a*a*a*a*a*a*b") is None


def test_a_parsed_expression_is_reused_without_carrying_state_between_documents() -> None:
    """Each expression is parsed once (`boundedgjson._parsed`); every evaluation starts afresh."""
    from kubetune import boundedgjson

    expr = 'status.conditions.#(type=="Complete")#|#(status=="True")#'
    done = {"status": {"conditions": [{"type": "Complete", "status": "True"}]}}
    running = {"status": {"conditions": [{"type": "Complete", "status": "False"}]}}
    assert boundedgjson.get(done, expr) == [{"type": "Complete", "status": "True"}]
    assert boundedgjson.get(running, expr) == []
    assert boundedgjson.get(done, "status.conditions.#.type") == ["Complete"]
    assert boundedgjson.get(running, "status.conditions.#") == 1
    # A malformed expression raises on every evaluation, not only the first.
    for _ in range(2):
        with pytest.raises(gjson.GJSONParseError, match="Unbalanced parentheses"):
            boundedgjson.get(done, "status.conditions.#(type==")
