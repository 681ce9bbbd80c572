"""AdmissionReview v1 in and out, and the admission endpoints.

`parse` turns a request body into a `Review` or raises `BadRequest` (HTTP 400 with the reason:
not JSON, not an `admission.k8s.io/v1` AdmissionReview, no request uid). `Admission.handle`
dispatches by path and always answers a well-formed AdmissionReview: rule violations are denials
(code 400) whose message names the field and the fix; a failed API lookup is a denial with code
500 (the API server or the job controller retries); an unexpected error is logged and denied
with code 500, and the server keeps serving. A code-500 message ends with
`kubetune.admission.TRANSIENT`, so whoever reads it without the code (a Job's FailedCreate
Event) knows it passes.

Neighbours: `defaulting`, `validating`, `injecting`, `authorizing` (the rules), `serving`
(HTTPS), `lookups`.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from kubetune import admission, katibsidecar, naming
from kubetune.config import KatibConfig
from kubetune_webhook import (
    authorizing,
    defaulting,
    imagecommand,
    injecting,
    patching,
    permissions,
    pullsecrets,
    validating,
)

log = logging.getLogger(__name__)

API_VERSION = "admission.k8s.io/v1"
KIND = "AdmissionReview"
PATHS = ("/mutate-experiment", "/validate-experiment", "/mutate-pod", "/validate-trial-status")


class Cluster(
    validating.Cluster, injecting.Owners, permissions.Authorizer, pullsecrets.Reader, Protocol
):
    """Every read the endpoints make (`lookups.KubeCluster` in production)."""


class BadRequest(Exception):
    """The body is not an AdmissionReview we can answer: HTTP 400 with this message."""


@dataclass(frozen=True)
class Review:
    uid: str
    kind: str
    operation: str
    namespace: str
    name: str
    obj: Any
    old_obj: Any
    raw: dict[str, Any] = field(repr=False)


def parse(body: bytes) -> Review:
    try:
        data = json.loads(body)
    except (ValueError, RecursionError) as e:
        raise BadRequest(f"request body is not JSON: {e}") from e
    if not isinstance(data, dict):
        raise BadRequest(f"expected an {API_VERSION} {KIND} object, got {type(data).__name__}")
    if data.get("apiVersion") != API_VERSION or data.get("kind") != KIND:
        raise BadRequest(
            f"expected apiVersion {API_VERSION} kind {KIND}, got apiVersion "
            f"{data.get('apiVersion')!r} kind {data.get('kind')!r}; register the webhook with "
            "admissionReviewVersions: [v1]"
        )
    request = data.get("request")
    if not isinstance(request, dict) or not isinstance(request.get("uid"), str):
        raise BadRequest(f"{KIND} has no request.uid")
    kind = request.get("kind")
    return Review(
        uid=request["uid"],
        kind=str(kind.get("kind", "")) if isinstance(kind, dict) else "",
        operation=str(request.get("operation") or ""),
        namespace=str(request.get("namespace") or ""),
        name=str(request.get("name") or ""),
        obj=request.get("object"),
        old_obj=request.get("oldObject"),
        raw=request,
    )


def respond(
    uid: str,
    *,
    allowed: bool,
    message: str = "",
    code: int = 400,
    patch: patching.Patch | None = None,
    warnings: list[str] | None = None,
) -> dict[str, Any]:
    response: dict[str, Any] = {"uid": uid, "allowed": allowed}
    if warnings:
        response["warnings"] = warnings
    if not allowed:
        reason = {400: "BadRequest", 403: "Forbidden"}.get(code, "InternalError")
        if code >= 500:  # the Event of a refused pod shows the message, not the code
            message = admission.mark_transient(message)
        response["status"] = {"code": code, "reason": reason, "message": message}
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
    return {"apiVersion": API_VERSION, "kind": KIND, "response": response}


@dataclass(frozen=True)
class StatusWriters:
    """Who may write `trials/status` besides a Trial's own pods (`authorizing`)."""

    trusted: frozenset[str]
    reader: authorizing.Reader


class Admission:
    """The endpoints, wired with the configuration and the cluster seam in `main`."""

    def __init__(
        self,
        config: KatibConfig,
        cluster: Cluster,
        options: validating.Options = validating.Options(),  # noqa: B008 - frozen
        status_writers: StatusWriters | None = None,
        images: imagecommand.RegistryClient | None = None,
        katib_webhook_present: Callable[[], bool] = lambda: False,
    ) -> None:
        self.config = config
        # While Katib's webhook configurations exist (`katibguard.py`), trial pods are Katib's
        # to inject: admitted unchanged, never injected twice.
        self.katib_webhook_present = katib_webhook_present
        self.cluster = cluster
        self.options = options
        self.status_writers = status_writers
        self.images = images or imagecommand.RegistryClient()

    def handle(self, path: str, body: bytes) -> tuple[int, dict[str, Any]]:
        """(HTTP status, JSON answer) for any body; never raises."""
        try:
            review = parse(body)
        except BadRequest as e:
            return 400, {"error": str(e)}
        try:
            if path == "/mutate-experiment":
                return 200, self.mutate_experiment(review)
            if path == "/validate-experiment":
                return 200, self.validate_experiment(review)
            if path == "/mutate-pod":
                return 200, self.mutate_pod(review)
            if path == "/validate-trial-status" and self.status_writers is not None:
                return 200, self.validate_trial_status(review)
        except Exception as e:
            log.exception("admission %s failed for %s %s", path, review.kind, review.name)
            return 200, respond(review.uid, allowed=False, code=500, message=f"internal error: {e}")
        return 404, {"error": f"no admission endpoint {path}; use one of {', '.join(PATHS)}"}

    def _wrong_kind(self, review: Review, expected: str) -> dict[str, Any] | None:
        if review.kind != expected:
            return respond(
                review.uid,
                allowed=False,
                message=f"this endpoint admits {expected} objects, got {review.kind or 'nothing'}",
            )
        return None

    def mutate_experiment(self, review: Review) -> dict[str, Any]:
        wrong = self._wrong_kind(review, "Experiment")
        if wrong is not None:
            return wrong
        return respond(review.uid, allowed=True, patch=defaulting.patch(review.obj))

    def validate_experiment(self, review: Review) -> dict[str, Any]:
        wrong = self._wrong_kind(review, "Experiment")
        if wrong is not None:
            return wrong
        if review.operation == "DELETE":
            return respond(review.uid, allowed=True)
        problems = validating.validate(
            review.obj,
            review.old_obj,
            operation=review.operation,
            namespace=review.namespace,
            config=self.config,
            cluster=self.cluster,
            options=self.options,
        )
        author_warnings: list[str] = []
        if not problems and review.operation == "CREATE":
            problems, author_warnings = self._author_check(review)
        if not problems:
            return respond(
                review.uid,
                allowed=True,
                warnings=validating.warnings(
                    review.obj,
                    operation=review.operation,
                    namespace=review.namespace,
                    cluster=self.cluster,
                    options=self.options,
                )
                + author_warnings,
            )
        name = review.name or _name(review.obj)
        retry = any("; retry" in p for p in problems)
        return respond(
            review.uid,
            allowed=False,
            code=500 if retry else 400,
            message=f"Experiment {name} is invalid: " + "; ".join(problems),
        )

    def _author_check(self, review: Review) -> tuple[list[str], list[str]]:
        """The author must hold the rights kubetune uses for them (`permissions`): the denials
        and the warnings (a trial kind not installed yet)."""
        experiment, _ = validating.load(review.obj, "object")
        user = review.raw.get("userInfo")
        if experiment is None or not isinstance(user, dict):
            return [], []
        namespace = review.namespace or experiment.metadata.namespace or ""
        verdict = permissions.check(experiment, namespace, user, self.cluster)
        return verdict.problems, verdict.warnings

    def mutate_pod(self, review: Review) -> dict[str, Any]:
        """Inject into a Trial's pod; admit every other pod unchanged.

        The objectSelector sends only pods labelled `katib.kubeflow.org/trial` (the
        trial-controller labels every pod template of a trial's job). The owner walk confirms
        the label: a labelled pod that no Trial of that name owns is denied (the label is
        reserved: taking it off is the user's fix; stripping it could break the selector of
        whatever made the pod), and one whose owners cannot be read is denied with code 500 so
        it is retried rather than run without its collector. A pod without the label (a
        configuration without that objectSelector) is admitted unchanged unless the walk finds
        its Trial; a failed lookup never denies it.
        """
        wrong = self._wrong_kind(review, "Pod")
        if wrong is not None:
            return wrong
        pod = review.obj
        meta = pod.get("metadata") if isinstance(pod, dict) else None
        if not isinstance(meta, dict):
            return respond(review.uid, allowed=True)  # not a pod we could own; the server judges
        labels = meta.get("labels")
        claimed = labels.get(naming.LABEL_TRIAL) if isinstance(labels, dict) else None
        namespace = review.namespace or str(meta.get("namespace") or "")
        if claimed is None:
            try:
                trial = injecting.find_trial(pod, namespace, self.cluster, strict=False)
            except Exception:
                log.exception("owner walk failed for an unlabelled pod; admitting it unchanged")
                return respond(review.uid, allowed=True)
            if trial is None:
                return respond(review.uid, allowed=True)
        else:
            try:
                trial = injecting.find_trial(pod, namespace, self.cluster, strict=True)
            except validating.ClusterError as e:
                return respond(
                    review.uid,
                    allowed=False,
                    code=500,
                    message=f"pod is labelled {naming.LABEL_TRIAL}={claimed} but its owners "
                    f"cannot be read to confirm it belongs to that Trial: {e}; retry (a pod "
                    "that is not a trial's must not carry that label: remove it)",
                )
            owner = str((trial or {}).get("metadata", {}).get("name") or "")
            if trial is None or naming.label_value(owner) != claimed:
                found = f"it belongs to Trial {owner}" if trial else "no Trial owns it"
                return respond(
                    review.uid,
                    allowed=False,
                    message=f"metadata.labels[{naming.LABEL_TRIAL}]: {claimed!r} is reserved for "
                    f"the pods of Trial {claimed}, but {found}; remove the label from this "
                    "pod (or its template)",
                )
        spec = pod.get("spec")
        containers = spec.get("containers") if isinstance(spec, dict) else None
        if not isinstance(containers, list) or not containers:
            return respond(
                review.uid,
                allowed=False,
                message="spec.containers: a pod needs at least one container",
            )
        katib = katibsidecar.katib_sidecar(pod)
        if katib is not None:
            # Katib's webhook mutated it first: a second wrapper and sidecar would break it.
            warning = (
                f"pod of Trial {_name(trial)} already carries Katib's metrics collector "
                f"(container {katib}), admitted without kubetune's: Katib's webhook "
                f"(MutatingWebhookConfiguration {katibsidecar.KATIB_WEBHOOK}) still runs; "
                "remove it, kubetune replaces it"
            )
            log.warning("%s", warning)
            return respond(review.uid, allowed=True, warnings=[warning])
        if self.katib_webhook_present():
            warning = (
                f"pod of Trial {_name(trial)} admitted without kubetune's metrics collector: "
                f"Katib's webhook configurations ({katibsidecar.KATIB_WEBHOOK}) are installed, "
                "so kubetune does not inject beside them; run `kubetune katib-check` for what "
                "to remove"
            )
            log.warning("%s", warning)
            return respond(review.uid, allowed=True, warnings=[warning])
        experiment = suggestion = None
        if injecting.needs_experiment(trial):
            try:
                experiment = injecting.find_experiment(trial, namespace, self.cluster)
                if experiment is not None:
                    suggestion = injecting.find_suggestion(experiment, namespace, self.cluster)
            except validating.ClusterError as e:
                return respond(
                    review.uid,
                    allowed=False,
                    code=500,
                    message=f"the Experiment of Trial {_name(trial)} or its Suggestion cannot be "
                    "read to mount "
                    f"its checkpoint volume: {e}; retry",
                )
            if experiment is None:
                return respond(
                    review.uid,
                    allowed=False,
                    message=f"Trial {_name(trial)} carries {injecting.PBT_GENERATION_LABEL} but "
                    "no Experiment owns it, so its checkpoint volume is unknown; create PBT "
                    "Trials through an Experiment",
                )
        lookup = self.config.init.controller.image_command_lookup
        try:
            mutated = injecting.inject(
                pod,
                trial,
                namespace,
                self.config,
                experiment,
                suggestion,
                self._image_commands(pod, namespace) if lookup else None,
            )
        except injecting.Denied as e:
            return respond(review.uid, allowed=False, message=str(e))
        except imagecommand.RegistryError as e:
            return respond(
                review.uid, allowed=False, code=500 if e.transient else 400, message=str(e)
            )
        except validating.ClusterError as e:
            return respond(
                review.uid,
                allowed=False,
                code=500,
                message=f"the pod's imagePullSecrets cannot be read to look up its image's "
                f"command: {e}; retry",
            )
        return respond(review.uid, allowed=True, patch=patching.diff(pod, mutated))

    def _image_commands(self, pod: dict[str, Any], namespace: str) -> injecting.ImageCommands:
        """Reads an image's command with the pod's pull secrets (read at the first need).

        The platform of a multi-arch image: the pod's `kubernetes.io/os` and
        `kubernetes.io/arch` nodeSelector when it pins them (the node it can run on), else
        linux/amd64, the platform Katib resolves to."""
        spec = pod.get("spec") or {}
        selector = spec.get("nodeSelector")
        selector = selector if isinstance(selector, dict) else {}
        default_os, default_arch = imagecommand.DEFAULT_PLATFORM
        platform = (
            str(selector.get("kubernetes.io/os") or default_os),
            str(selector.get("kubernetes.io/arch") or default_arch),
        )
        credentials: dict[str, imagecommand.Credentials] | None = None

        def read(image: str) -> imagecommand.ImageCommand:
            nonlocal credentials
            if credentials is None:
                secrets = pullsecrets.read(pod, namespace, self.cluster)
                credentials = imagecommand.merge_credentials(secrets)
            return self.images.image_command(image, credentials, platform)

        return read

    def validate_trial_status(self, review: Review) -> dict[str, Any]:
        wrong = self._wrong_kind(review, "Trial")
        if wrong is not None:
            return wrong
        assert self.status_writers is not None
        verdict = authorizing.authorize(
            review.raw, self.status_writers.trusted, self.status_writers.reader
        )
        return respond(
            review.uid, allowed=verdict.allowed, message=verdict.message, code=verdict.code
        )


def _name(obj: Any) -> str:
    if isinstance(obj, dict) and isinstance(obj.get("metadata"), dict):
        return str(obj["metadata"].get("name") or obj["metadata"].get("generateName") or "")
    return ""
