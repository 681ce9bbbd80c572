"""Trial pod injection (`/mutate-pod`): the collector sidecar and the wrapped training command.

Binding contract with pns-collector (`kubetune-contracts.md`, "Pod injection"): for a pod owned
(transitively) by a Trial, add the trial labels, `KATIB_TRIAL_NAME` on the primary container, the
istio annotation unless set; for a primary pod also `shareProcessNamespace`, the `metrics-volume`
emptyDir at the log dir, the command wrapped with `kubetune.wrapperscript.wrap_argv` (its own `$`
written `$$` for Kubernetes' `$(VAR)` expansion, the user's argv left as written and run as
Katib runs it, joined into one shell line) and the
sidecar `metrics-logger-and-collector` with the collector's exact flags.

`inject(pod, trial, namespace, config)` is pure and idempotent: every step checks whether it is
already done, so a pod mutated twice equals a pod mutated once. `find_trial` walks the owner
chain through an `Owners` seam (the API server in production); it confirms the trial label the
objectSelector selected the pod by, following only valid object names with matching uids.

Neighbours: `reviewing` (the admission plumbing), `lookups` (the real `Owners`).
"""

from __future__ import annotations

import copy
import posixpath
from collections.abc import Callable
from typing import Any, Protocol

from pydantic import ValidationError

from kubetune import errors, naming, procwait, wrapperscript
from kubetune.api import API_VERSION
from kubetune.api.common import CollectorKind, MetricsCollectorSpec, ObjectiveType
from kubetune.api.trial import Trial
from kubetune.config import ConfigError, KatibConfig
from kubetune_webhook.imagecommand import ImageCommand
from kubetune_webhook.validating import ClusterError

ImageCommands = Callable[[str], ImageCommand]
"""An image's ENTRYPOINT and CMD (`imagecommand.RegistryClient` with the pod's pull secrets);
raises `imagecommand.RegistryError`."""

LOG_DIR = procwait.DEFAULT_LOG_DIR
SIDECAR_NAME = "metrics-logger-and-collector"
CUSTOM_SIDECAR_NAME = "metrics-collector"
TRIAL_NAME_ENV = "KATIB_TRIAL_NAME"
STDOUT_METRICS_FILE = f"{LOG_DIR}/metrics.log"
WRAPPED_KINDS = (
    CollectorKind.STDOUT.value,
    CollectorKind.FILE.value,
    CollectorKind.TENSORFLOW_EVENT.value,
    CollectorKind.PROMETHEUS_METRIC.value,
)
REPORTING_KINDS = (CollectorKind.PUSH.value, CollectorKind.CUSTOM.value)
"""Collector kinds whose containers report to db-manager themselves: they get its token."""
DEFAULT_SCRAPE_PATH = "/metrics"
DEFAULT_SCRAPE_PORT = 8080
MAX_OWNER_DEPTH = 8
PBT_GENERATION_LABEL = "pbt.suggestion.katib.kubeflow.org/generation"
SUGGESTION_VOLUME = "suggestion-volume"


class Denied(Exception):
    """The pod cannot be admitted; the message says what to change."""


class Owners(Protocol):
    def get_object(
        self, api_version: str, kind: str, name: str, namespace: str, uid: str | None = None
    ) -> dict[str, Any] | None:
        """The object, None when it does not exist. Raises `validating.ClusterError`, and
        `kubetune.errors.InvalidName` for a name that cannot be an object's (never looked up).

        `uid` is the owner reference's: an answer kept from earlier may be reused only when
        its uid is that one."""
        ...


def _owner_refs(obj: dict[str, Any]) -> list[dict[str, Any]]:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    refs = [r for r in refs if isinstance(r, dict)]
    # The controller reference first: that is the owner that made this object.
    return sorted(refs, key=lambda r: not r.get("controller"))


def find_trial(
    pod: dict[str, Any], namespace: str, owners: Owners, *, strict: bool = True
) -> dict[str, Any] | None:
    """The Trial owning the pod through its owner chain (Job -> Pod, Workflow -> Pod, ...).

    An owner reference is followed only when its name is a valid object name (anything else,
    `../other-namespace/...` included, cannot be an owner and is never sent to the API server)
    and the object found has the reference's uid. A lookup that fails raises
    `validating.ClusterError` when `strict`, else that branch is a dead end: a pod without the
    trial label must be admitted whatever the webhook may read.
    """
    seen: set[tuple[str, str]] = set()
    frontier = [pod]
    for _ in range(MAX_OWNER_DEPTH):
        next_frontier = []
        for obj in frontier:
            for ref in _owner_refs(obj):
                kind, api_version, name = ref.get("kind"), ref.get("apiVersion"), ref.get("name")
                if not (
                    isinstance(kind, str) and isinstance(api_version, str) and isinstance(name, str)
                ):
                    continue
                if (kind, name) in seen:
                    continue
                seen.add((kind, name))
                uid = ref.get("uid")
                uid = uid if isinstance(uid, str) and uid else None
                try:
                    owner = owners.get_object(api_version, kind, name, namespace, uid)
                except errors.InvalidName:
                    continue
                except ClusterError:
                    if strict:
                        raise
                    continue
                if owner is None:
                    continue
                if uid is not None and (owner.get("metadata") or {}).get("uid") != uid:
                    continue  # another object of that name: not this pod's owner
                if kind == "Trial" and api_version == API_VERSION:
                    return owner
                next_frontier.append(owner)
        if not next_frontier:
            return None
        frontier = next_frontier
    return None


# --- command wrapping -------------------------------------------------------------------------


def escape_dollars(text: str) -> str:
    """`$` -> `$$`, so Kubernetes' `$(VAR)` expansion hands the text to `sh` unchanged."""
    return text.replace("$", "$$")


def wrapped_command(argv: list[str], kind: str) -> list[str]:
    """`sh -c <script> kubetune-wrapper words...` (`wrapperscript.wrap_argv`): the wrapper's `$`
    escaped, the user's elements (and their `$(VAR)`) left as written, one element each.

    The elements run as Katib runs them, joined with spaces into one shell line, but the
    joining happens inside the shell: a joined `sh -c` string is one exec argument, which
    grows past Linux's 128 KiB with 2,000 parameters. For StdOut the wrapper also tees
    stdout+stderr into the metrics file the collector reads.
    """
    metrics_file = STDOUT_METRICS_FILE if kind == CollectorKind.STDOUT.value else None
    wrapped = wrapperscript.wrap_argv(argv, LOG_DIR, metrics_file=metrics_file)
    sh, c, script, argv0, *rest = wrapped
    return [sh, c, escape_dollars(script), argv0, *rest]


def _wrapped_marker() -> str:
    return escape_dollars(wrapperscript.sh_register(LOG_DIR))


def is_wrapped(container: dict[str, Any]) -> bool:
    command = container.get("command") or []
    return (
        len(command) >= 3
        and command[:2] == ["sh", "-c"]
        and isinstance(command[2], str)
        and _wrapped_marker() in command[2]
    )


def watched_names(pod: dict[str, Any], primary: str, wait_all: bool) -> list[str]:
    """The containers whose processes the collector waits for: the primary one first, then
    those the pod's `kubetune.kubeflow.org/training-containers` annotation names, unless the
    collector's katib-config entry says `waitAllProcesses: false` (then only the primary)."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    extra = str(annotations.get(naming.ANNOTATION_TRAINING_CONTAINERS) or "")
    names = [primary]
    if wait_all:
        names += [n.strip() for n in extra.split(",") if n.strip() and n.strip() not in names]
    return list(dict.fromkeys(names))


def wrap_container(
    container: dict[str, Any], kind: str, image_commands: ImageCommands | None = None
) -> None:
    """Wrap the container's command; without `command`, the image's ENTRYPOINT and CMD as
    `image_commands` reads them (refused when it is None: the lookup is switched off)."""
    if is_wrapped(container):
        return
    name = container.get("name")
    command = container.get("command")
    args = [str(a) for a in container.get("args") or []]
    if not command and image_commands is None:
        raise Denied(
            f"container {name!r} has no command: kubetune wraps the training "
            "command so the metrics collector can wait for it, and reading the image's "
            "ENTRYPOINT is switched off (katib-config init.controller.imageCommandLookup); "
            f"set `command` on container {name!r} in the trial "
            "template (e.g. command: [python3, train.py])"
        )
    if not command:
        assert image_commands is not None
        image = str(container.get("image") or "")
        if not image:
            raise Denied(f"container {name!r} has neither a command nor an image; set `image`")
        argv = image_commands(image).argv(args)
        if not argv:
            raise Denied(
                f"container {name!r} has no command and image {image!r} has neither ENTRYPOINT "
                f"nor CMD; set `command` on container {name!r} in the trial template"
            )
    else:
        argv = [str(a) for a in [*command, *args]]
    for i, arg in enumerate(argv):
        if len(arg.encode()) > wrapperscript.MAX_ARG_BYTES:
            raise Denied(
                f"container {name!r}: argument {i} of command+args is {len(arg.encode())} "
                f"bytes; Linux cannot start a process with an argument over "
                f"{wrapperscript.MAX_ARG_BYTES} bytes (MAX_ARG_STRLEN); split it into several "
                "arguments or pass it in a file"
            )
    container["command"] = wrapped_command(argv, kind)
    container.pop("args", None)


# --- sidecar ----------------------------------------------------------------------------------


def metrics_path(mc: MetricsCollectorSpec, kind: str) -> str:
    fsp = mc.source.file_system_path if mc.source else None
    if kind == CollectorKind.STDOUT.value or fsp is None or not fsp.path:
        return STDOUT_METRICS_FILE
    return fsp.path


def scrape_url(mc: MetricsCollectorSpec) -> str:
    """The training's metrics endpoint as the sidecar reaches it: the pod's one network
    namespace, so 127.0.0.1 unless `httpGet.host` names another address (the webhook has
    already checked that the port is a positive integer and the path absolute)."""
    http_get = (mc.source.http_get if mc.source else None) or {}
    scheme = "https" if str(http_get.get("scheme") or "HTTP").upper() == "HTTPS" else "http"
    host = str(http_get.get("host") or "127.0.0.1")
    port = int(str(http_get.get("port") or DEFAULT_SCRAPE_PORT))
    path = str(http_get.get("path") or DEFAULT_SCRAPE_PATH)
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # an IPv6 address
    return f"{scheme}://{host}:{port}{path}"


def metrics_dir(mc: MetricsCollectorSpec, kind: str) -> str | None:
    """The directory the collector reads, when it is not the log dir itself."""
    if kind not in (CollectorKind.FILE.value, CollectorKind.TENSORFLOW_EVENT.value, "Custom"):
        return None
    fsp = mc.source.file_system_path if mc.source else None
    if fsp is None or not fsp.path:
        return None
    path = fsp.path
    directory = (
        path.rstrip("/") or "/"
        if fsp.kind is not None and fsp.kind.value == "Directory"
        else posixpath.dirname(path)
    )
    directory = posixpath.normpath(directory)
    if directory == LOG_DIR or directory.startswith(LOG_DIR + "/"):
        return None
    return directory


def collector_args(
    trial: Trial, namespace: str, kind: str, mc: MetricsCollectorSpec, expected: int
) -> list[str]:
    """The pns-collector flags, exactly as the contract names them."""
    objective = trial.spec.objective
    if objective is None or not objective.objective_metric_name:
        raise Denied(
            f"Trial {trial.metadata.name} has no spec.objective.objectiveMetricName; the "
            "metrics collector cannot know what to collect"
        )
    otype = objective.type.value if isinstance(objective.type, ObjectiveType) else ""
    args = [
        "--trial-name",
        trial.metadata.name or "",
        "--namespace",
        namespace,
        "--objective-metric",
        objective.objective_metric_name,
        "--objective-type",
        otype or "minimize",
    ]
    if objective.additional_metric_names:
        args += ["--additional-metrics", ";".join(objective.additional_metric_names)]
    if objective.metric_strategies:
        args += [
            "--metric-strategies",
            ";".join(f"{s.name}={s.value.value}" for s in objective.metric_strategies),
        ]
    args += ["--collector-kind", kind, "--metrics-path", metrics_path(mc, kind)]
    if kind == CollectorKind.PROMETHEUS_METRIC.value:
        args += ["--metrics-url", scrape_url(mc)]
    fsp = mc.source.file_system_path if mc.source else None
    if kind == CollectorKind.STDOUT.value:
        args += ["--format", "TEXT"]
    elif kind == CollectorKind.FILE.value:
        args += ["--format", fsp.format.value if fsp and fsp.format else "TEXT"]
    filters = (mc.source.filter.metrics_format if mc.source and mc.source.filter else None) or []
    for regex in filters:
        args += ["--filter", regex]
    args += ["--log-dir", LOG_DIR, "--expected-processes", str(expected)]
    for rule in trial.spec.early_stopping_rules or []:
        args += [
            "--early-stop-rule",
            f"{rule.name};{rule.value};{rule.comparison.value};{rule.start_step or 0}",
        ]
    return args


def _mount(container: dict[str, Any], path: str) -> None:
    mounts = container.setdefault("volumeMounts", [])
    if any(m.get("mountPath") == path for m in mounts if isinstance(m, dict)):
        return
    mounts.append({"name": naming.METRICS_VOLUME, "mountPath": path})


def _sidecar(
    trial: Trial,
    namespace: str,
    kind: str,
    mc: MetricsCollectorSpec,
    config: KatibConfig,
    expected: int,
) -> dict[str, Any]:
    try:
        entry = config.metrics_collector(kind)
    except ConfigError as e:
        raise Denied(f"cannot inject the metrics collector: {e}") from e
    sidecar: dict[str, Any] = {
        "name": SIDECAR_NAME,
        "image": entry.image,
        "args": collector_args(trial, namespace, kind, mc, expected),
    }
    if entry.image_pull_policy:
        sidecar["imagePullPolicy"] = entry.image_pull_policy
    if entry.resources:
        sidecar["resources"] = copy.deepcopy(entry.resources)
    return sidecar


# --- the whole mutation -----------------------------------------------------------------------


def needs_experiment(trial_manifest: dict[str, Any]) -> bool:
    """Whether injection needs the Trial's Experiment: a PBT trial (its generation label, set
    by the algorithm) gets the suggestion's volume, at a path only the Experiment names."""
    labels = (trial_manifest.get("metadata") or {}).get("labels") or {}
    return isinstance(labels, dict) and PBT_GENERATION_LABEL in labels


def find_experiment(
    trial_manifest: dict[str, Any], namespace: str, owners: Owners
) -> dict[str, Any] | None:
    """The Experiment that owns the Trial (its controller owner reference, the same uid), or
    None. Raises `validating.ClusterError` when it cannot be read."""
    for ref in _owner_refs(trial_manifest):
        if ref.get("kind") != "Experiment" or ref.get("apiVersion") != API_VERSION:
            continue
        name, uid = ref.get("name"), ref.get("uid")
        uid = uid if isinstance(uid, str) and uid else None
        if not isinstance(name, str):
            continue
        try:
            found = owners.get_object(API_VERSION, "Experiment", name, namespace, uid)
        except errors.InvalidName:
            continue
        if found is not None and (uid is None or (found.get("metadata") or {}).get("uid") == uid):
            return found
    return None


def find_suggestion(
    experiment: dict[str, Any], namespace: str, owners: Owners
) -> dict[str, Any] | None:
    """The Experiment's Suggestion (same name, owned by it), or None (not made yet, or a
    Suggestion of that name that is not this Experiment's). Raises
    `validating.ClusterError` when it cannot be read."""
    meta = experiment.get("metadata") or {}
    name, uid = str(meta.get("name") or ""), meta.get("uid")
    try:
        found = owners.get_object(
            API_VERSION, "Suggestion", naming.suggestion_name(name), namespace
        )
    except errors.InvalidName:
        return None
    refs = ((found or {}).get("metadata") or {}).get("ownerReferences") or []
    if any(isinstance(r, dict) and r.get("controller") and r.get("uid") == uid for r in refs):
        return found
    return None


def pbt_mount(
    experiment: dict[str, Any], trial_name: str, suggestion: dict[str, Any] | None = None
) -> tuple[str, dict[str, Any]] | None:
    """(claim name, volumeMount) of a PBT Experiment's trial: the suggestion's PVC at
    `suggestion_trial_dir`, subPath `<experiment>/<trial>` (the directory the algorithm made).
    The claim has Katib's name unless `suggestion` records the one the suggestion-controller
    chose because another owner held Katib's."""
    spec = experiment.get("spec") or {}
    algorithm = spec.get("algorithm") or {}
    if algorithm.get("algorithmName") != "pbt":
        return None
    settings = {
        str(s.get("name")): str(s.get("value"))
        for s in algorithm.get("algorithmSettings") or []
        if isinstance(s, dict)
    }
    path = settings.get("suggestion_trial_dir")
    if not path:
        return None
    name = str((experiment.get("metadata") or {}).get("name") or "")
    claim = naming.suggestion_pvc_name(naming.suggestion_name(name), "pbt")
    if suggestion is not None:
        meta = suggestion.get("metadata") or {}
        claim = naming.recorded_name(claim, naming.NAME_LIMIT, "PersistentVolumeClaim", meta)
    mount = {"name": SUGGESTION_VOLUME, "mountPath": path, "subPath": f"{name}/{trial_name}"}
    return claim, mount


def is_primary(pod: dict[str, Any], trial: Trial) -> bool:
    wanted = trial.spec.primary_pod_labels or {}
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return all(labels.get(k) == v for k, v in wanted.items())


def _watched_containers(
    pod: dict[str, Any],
    containers: list[Any],
    primary: str,
    kind: str,
    config: KatibConfig,
) -> list[dict[str, Any]]:
    """The containers the collector waits for, the primary first; Denied names a missing one."""
    try:
        wait_all = config.metrics_collector(kind).wait_all_processes is not False
    except ConfigError:
        wait_all = True  # the sidecar step reports the missing entry
    by_name = {c.get("name"): c for c in containers if isinstance(c, dict)}
    found = []
    for name in watched_names(pod, primary, wait_all):
        if name not in by_name:
            raise Denied(
                f"annotation {naming.ANNOTATION_TRAINING_CONTAINERS} names container {name!r}, "
                f"which is not in this pod (containers: {', '.join(map(str, by_name))}); "
                "list only training containers of the trial template"
            )
        found.append(by_name[name])
    return found


def trial_name_env(trial_name: str) -> dict[str, Any]:
    """`KATIB_TRIAL_NAME` from the pod's trial label through the downward API, as upstream
    injects it; a literal only when the name does not fit a label value (it would be
    shortened there, and the SDK's `report_metrics` needs the exact name)."""
    if naming.label_value(trial_name) != trial_name:
        return {"name": TRIAL_NAME_ENV, "value": trial_name}
    path = f"metadata.labels['{naming.LABEL_TRIAL}']"
    # apiVersion as the API server defaults it, so the admitted pod equals the stored one.
    ref = {"apiVersion": "v1", "fieldPath": path}
    return {"name": TRIAL_NAME_ENV, "valueFrom": {"fieldRef": ref}}


def mount_db_manager_token(spec: dict[str, Any], containers: list[dict[str, Any]]) -> None:
    """A Push or Custom trial's proof for db-manager: a projected token of the pod's service
    account for the audience `kubetune-db-manager` (bound to the pod, refreshed by the kubelet;
    useless against the API server), mounted read-only in `containers` (those that report),
    its path in `KUBETUNE_DB_MANAGER_TOKEN_FILE`."""
    token = {
        "audience": naming.DB_MANAGER_AUDIENCE,
        "expirationSeconds": 3600,
        "path": posixpath.basename(naming.DB_MANAGER_TOKEN_FILE),
    }
    _add_named(
        spec.setdefault("volumes", []),
        {
            "name": naming.DB_MANAGER_TOKEN_VOLUME,
            "projected": {"sources": [{"serviceAccountToken": token}]},
        },
    )
    for container in containers:
        mount = {"mountPath": naming.DB_MANAGER_TOKEN_DIR, "readOnly": True}
        _add_named(
            container.setdefault("volumeMounts", []),
            {"name": naming.DB_MANAGER_TOKEN_VOLUME, **mount},
        )
        _add_named(
            container.setdefault("env", []),
            {"name": naming.DB_MANAGER_TOKEN_ENV, "value": naming.DB_MANAGER_TOKEN_FILE},
        )


def _add_named(items: list[Any], item: dict[str, Any]) -> None:
    """Append `item` unless an entry of its name is there (a pod mutated twice equals once)."""
    if not any(isinstance(i, dict) and i.get("name") == item["name"] for i in items):
        items.append(item)


def inject(
    pod: dict[str, Any],
    trial_manifest: dict[str, Any],
    namespace: str,
    config: KatibConfig,
    experiment: dict[str, Any] | None = None,
    suggestion: dict[str, Any] | None = None,
    image_commands: ImageCommands | None = None,
) -> dict[str, Any]:
    """The pod as it should be admitted. Raises `Denied` with the fix in its message, and
    `imagecommand.RegistryError` when a command must be read from an image and cannot be.

    `experiment` (the Trial's, given when `needs_experiment`) adds the PBT checkpoint volume to
    the primary containers of a primary pod; `suggestion` (the Experiment's) names its claim."""
    try:
        trial = Trial.model_validate(trial_manifest)
    except ValidationError as e:
        raise Denied(f"the owning Trial is malformed: {e.errors()[0]['msg']}") from e
    trial_name = trial.metadata.name or ""
    out = copy.deepcopy(pod)
    meta = out.setdefault("metadata", {})
    labels = meta.setdefault("labels", {})
    for key, value in (trial.metadata.labels or {}).items():
        labels.setdefault(key, value)
    labels[naming.LABEL_TRIAL] = naming.label_value(trial_name)
    annotations = meta.get("annotations") or {}
    if (
        config.init.controller.inject_istio_annotation
        and naming.ISTIO_INJECT not in annotations
        and naming.ISTIO_INJECT not in labels
    ):
        meta["annotations"] = {**annotations, naming.ISTIO_INJECT: "false"}
    spec = out.setdefault("spec", {})
    containers = spec.get("containers") or []
    primary_name = trial.spec.primary_container_name
    primaries = [c for c in containers if isinstance(c, dict) and c.get("name") == primary_name]
    for container in primaries:
        env = container.setdefault("env", [])
        if not any(isinstance(e, dict) and e.get("name") == TRIAL_NAME_ENV for e in env):
            env.append(trial_name_env(trial_name))
    mc = trial.spec.metrics_collector or MetricsCollectorSpec()
    kind = (mc.collector.kind if mc.collector else None) or CollectorKind.STDOUT.value
    if kind in REPORTING_KINDS:
        mount_db_manager_token(spec, primaries)
    if not is_primary(out, trial):
        return out
    if not primaries:
        names = ", ".join(str(c.get("name")) for c in containers if isinstance(c, dict))
        raise Denied(
            f"primary container {primary_name!r} of Trial {trial_name} is not in this pod "
            f"(containers: {names or 'none'}); fix trialTemplate.primaryContainerName"
        )
    volumes = spec.setdefault("volumes", [])
    mount = pbt_mount(experiment, trial_name, suggestion) if experiment is not None else None
    if mount is not None:
        claim, volume_mount = mount
        if not any(isinstance(v, dict) and v.get("name") == SUGGESTION_VOLUME for v in volumes):
            volumes.append(
                {"name": SUGGESTION_VOLUME, "persistentVolumeClaim": {"claimName": claim}}
            )
        for container in primaries:
            mounts = container.setdefault("volumeMounts", [])
            if not any(isinstance(m, dict) and m.get("name") == SUGGESTION_VOLUME for m in mounts):
                mounts.append(dict(volume_mount))
    if kind in (CollectorKind.PUSH.value, CollectorKind.NONE.value):
        return out
    watched = _watched_containers(out, containers, primary_name or "", kind, config)
    sidecar_names = {SIDECAR_NAME, CUSTOM_SIDECAR_NAME}
    custom = mc.collector.custom_collector if mc.collector else None
    if kind == CollectorKind.CUSTOM.value and custom:
        sidecar_names.add(str(custom.get("name") or CUSTOM_SIDECAR_NAME))
    present = any(isinstance(c, dict) and c.get("name") in sidecar_names for c in containers)
    spec["shareProcessNamespace"] = True
    if not any(isinstance(v, dict) and v.get("name") == naming.METRICS_VOLUME for v in volumes):
        volumes.append({"name": naming.METRICS_VOLUME, "emptyDir": {}})
    extra_dir = metrics_dir(mc, kind)
    if kind in WRAPPED_KINDS:
        for container in primaries:
            wrap_container(container, kind, image_commands)
        for container in watched[1:]:
            # Only the primary container's output is the metrics source (as upstream).
            wrap_container(container, CollectorKind.FILE.value, image_commands)
    if present:
        return out
    if kind in WRAPPED_KINDS:
        sidecar = _sidecar(trial, namespace, kind, mc, config, len(watched))
    else:  # Custom: the user's container, verbatim
        if not custom:
            raise Denied("metricsCollector kind Custom needs collector.customCollector")
        sidecar = copy.deepcopy(custom)
        sidecar.setdefault("name", CUSTOM_SIDECAR_NAME)
        mount_db_manager_token(spec, [sidecar])  # Katib's custom collectors report there
    for container in [*primaries, *watched[1:], sidecar]:
        _mount(container, LOG_DIR)
        if extra_dir is not None:
            _mount(container, extra_dir)
    containers.append(sidecar)
    spec["containers"] = containers
    return out
