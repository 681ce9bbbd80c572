"""kubetune's configuration, in the format of Katib's `katib-config`
(docs/reference/katib-config.md).

One document (`apiVersion: config.kubeflow.org/v1beta1`, `kind: KatibConfig`) with `init`
(read once at start) and `runtime` (algorithm images and resources, collector images, early
stopping). Every service reads the same file, mounted from the ConfigMap `katib-config` (key
`katib-config.yaml`); with no file, `default()` gives a configuration that works out of the box
with kubetune's own images. Lookups fail with upstream's messages.

Katib-protocol images (`protocol`): a `runtime.suggestions[]` or `runtime.earlyStoppings[]`
entry whose image is a Katib gRPC service (Katib's own `kubeflowkatib/suggestion-*` images, or a
team's custom algorithm) runs through kubetune's bridge: the suggestion-controller puts that image
in the algorithm pod as Katib would and adds kubetune's `suggestion-algorithm bridge` sidecar,
which calls the image on localhost and writes the Suggestion's status. `protocol: katib-grpc`
says so explicitly and `protocol: kubetune` says the opposite; unset, an entry is Katib-protocol
when its algorithm is not one kubetune implements or its image is one of Katib's
(`kubeflowkatib/`). `bridgeImage` names the sidecar's image (default: the image of the
`random` entry when that entry is kubetune's, else kubetune's stock algorithm image).

Default suggestion resources: the algorithm keeps every finished trial in memory (Optuna's
study, scikit-optimize's model), and Katib's 100Mi limit OOM-kills Bayesian optimization after a
few dozen trials. kubetune asks for 128Mi and allows 1Gi, measured to hold TPE and GP-based
Bayesian optimization over 1,000 trials (see bench/).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ConfigDict, Field, ValidationError, field_validator

from kubetune.api.base import FreeForm, WireModel
from kubetune.api.errors import describe

CONFIG_MAP_NAME = "katib-config"
CONFIG_KEY = "katib-config.yaml"
IMAGE_REGISTRY = "ghcr.io/kubetune"
IMAGE_TAG = "0.1.0"
SUGGESTION_IMAGE = f"{IMAGE_REGISTRY}/suggestion-algorithm:{IMAGE_TAG}"
COLLECTOR_IMAGE = f"{IMAGE_REGISTRY}/pns-collector:{IMAGE_TAG}"

ALGORITHMS = (
    "random",
    "grid",
    "tpe",
    "multivariate-tpe",
    "cmaes",
    "sobol",
    "nsga2",
    "nsga3",
    "bayesianoptimization",
    "hyperband",
    "pbt",
    "darts",
    "enas",
)
EARLY_STOPPINGS = ("medianstop", "optuna-median", "optuna-percentile", "optuna-successive-halving")
"""kubetune's own early-stopping algorithms (`kubetune.earlystopping`, same layer: not imported)."""
COLLECTOR_KINDS = ("StdOut", "File", "TensorFlowEvent", "PrometheusMetric")
DEFAULT_TRIAL_RESOURCES = (
    "Job.v1.batch",
    "TFJob.v1.kubeflow.org",
    "PyTorchJob.v1.kubeflow.org",
    "MPIJob.v1.kubeflow.org",
    "XGBoostJob.v1.kubeflow.org",
    "TrainJob.v1alpha1.trainer.kubeflow.org",
    "Workflow.v1alpha1.argoproj.io",
)


KUBETUNE_PROTOCOL = "kubetune"
KATIB_GRPC = "katib-grpc"
PROTOCOLS = (KUBETUNE_PROTOCOL, KATIB_GRPC)
KATIB_IMAGE_MARKER = "kubeflowkatib/"
"""Katib's published images (`docker.io/kubeflowkatib/suggestion-hyperopt`, ...) speak gRPC."""


def _protocol(value: str | None) -> str | None:
    if value is not None and value not in PROTOCOLS:
        raise ValueError(
            f"unknown protocol {value!r}; use katib-grpc (a Katib gRPC image, run through "
            "kubetune's bridge) or kubetune (kubetune's own suggestion-algorithm)"
        )
    return value


class ConfigError(ValueError):
    """The configuration lacks an entry, or an entry lacks its image."""


class _Open(WireModel):
    model_config = ConfigDict(extra="allow")


class ControllerConfig(_Open):
    trial_resources: list[str] = Field(default_factory=lambda: list(DEFAULT_TRIAL_RESOURCES))
    inject_istio_annotation: bool = True
    image_command_lookup: bool = True
    """Read a primary container's missing command from its image's registry (ENTRYPOINT and
    CMD), as Katib does; false (air-gapped clusters) refuses such a container instead."""


class InitConfig(_Open):
    controller: ControllerConfig = Field(default_factory=ControllerConfig)


class MetricsCollectorConfig(_Open):
    kind: str
    image: str = ""
    image_pull_policy: str | None = None
    resources: FreeForm | None = None
    wait_all_processes: bool | None = None


class SuggestionConfig(_Open):
    """A suggestion entry: core/v1 Container fields inline plus the volume settings."""

    algorithm_name: str
    image: str = ""
    image_pull_policy: str | None = None
    resources: FreeForm | None = None
    service_account_name: str | None = None
    volume_mount_path: str | None = None
    persistent_volume_claim_spec: FreeForm | None = None
    persistent_volume_spec: FreeForm | None = None
    persistent_volume_labels: dict[str, str] | None = None
    protocol: str | None = None
    bridge_image: str | None = None
    cleanup_image: str | None = None
    """kubetune extension: the image of the Pod that removes a FromVolume hostPath directory on
    its node; it must have `python3` on PATH (see `cleanup_image()` for the default)."""

    _check_protocol = field_validator("protocol")(_protocol)

    def katib_grpc(self) -> bool:
        """Whether the image speaks Katib's gRPC Suggestion API (so it runs through the bridge)."""
        return _katib_grpc(self.protocol, self.image, self.algorithm_name in ALGORITHMS)


class EarlyStoppingConfig(_Open):
    algorithm_name: str
    image: str = ""
    image_pull_policy: str | None = None
    resources: FreeForm | None = None
    protocol: str | None = None

    _check_protocol = field_validator("protocol")(_protocol)

    def katib_grpc(self) -> bool:
        """Whether the image speaks Katib's gRPC EarlyStopping API (kubetune's own early-stopping
        algorithms need no entry: the suggestion-algorithm computes their rules)."""
        return _katib_grpc(self.protocol, self.image, self.algorithm_name in EARLY_STOPPINGS)


def _katib_grpc(protocol: str | None, image: str, ours: bool) -> bool:
    if protocol:
        return protocol == KATIB_GRPC
    return not ours or KATIB_IMAGE_MARKER in image


class RuntimeConfig(_Open):
    metrics_collectors: list[MetricsCollectorConfig] = Field(default_factory=list)
    suggestions: list[SuggestionConfig] = Field(default_factory=list)
    early_stoppings: list[EarlyStoppingConfig] = Field(default_factory=list)


class KatibConfig(_Open):
    api_version: str = "config.kubeflow.org/v1beta1"
    kind: str = "KatibConfig"
    init: InitConfig = Field(default_factory=InitConfig)
    runtime: RuntimeConfig = Field(default_factory=RuntimeConfig)

    def suggestion(self, algorithm: str) -> SuggestionConfig:
        """The entry for an algorithm (the last match wins, as upstream).

        Raises:
            ConfigError: no entry, or an entry without an image.
        """
        found = [s for s in self.runtime.suggestions if s.algorithm_name == algorithm]
        if not found:
            raise ConfigError(f"failed to find suggestion config for algorithm {algorithm}")
        if not found[-1].image:
            raise ConfigError(f"required value for image configuration of algorithm {algorithm}")
        return found[-1]

    def bridge_image(self, entry: SuggestionConfig) -> str:
        """The image of the bridge sidecar next to a Katib-protocol image: the entry's
        `bridgeImage`, else kubetune's own algorithm image as this config names it."""
        if entry.bridge_image:
            return entry.bridge_image
        for own in reversed(self.runtime.suggestions):
            if own.algorithm_name == "random" and own.image and not own.katib_grpc():
                return own.image
        return SUGGESTION_IMAGE

    def cleanup_image(self, entry: SuggestionConfig) -> str:
        """The image that removes an entry's hostPath directory on its node: the entry's
        `cleanupImage`, else the image whose `python3` already ran in the algorithm pod on that
        node (the entry's own kubetune image, or its bridge's)."""
        if entry.cleanup_image:
            return entry.cleanup_image
        if entry.image and not entry.katib_grpc():
            return entry.image
        return self.bridge_image(entry)

    def bridged_early_stopping(self, algorithm: str | None) -> EarlyStoppingConfig | None:
        """The Katib-protocol `earlyStoppings[]` entry for an algorithm, or None (no entry,
        no image, or one of kubetune's own algorithms without a Katib image)."""
        if not algorithm:
            return None
        found = [e for e in self.runtime.early_stoppings if e.algorithm_name == algorithm]
        if not found or not found[-1].image or not found[-1].katib_grpc():
            return None
        return found[-1]

    def metrics_collector(self, kind: str) -> MetricsCollectorConfig:
        found = [m for m in self.runtime.metrics_collectors if m.kind == kind]
        if not found:
            raise ConfigError(f"failed to find metrics collector config for kind {kind}")
        if not found[-1].image:
            raise ConfigError(f"required value for image configuration of metrics collector {kind}")
        return found[-1]

    def early_stopping(self, algorithm: str) -> EarlyStoppingConfig:
        found = [e for e in self.runtime.early_stoppings if e.algorithm_name == algorithm]
        if not found:
            raise ConfigError(f"failed to find early stopping config for algorithm {algorithm}")
        if not found[-1].image:
            raise ConfigError(
                f"required value for image configuration of early stopping {algorithm}"
            )
        return found[-1]


SUGGESTION_RESOURCES: dict[str, Any] = {
    "requests": {"cpu": "50m", "memory": "128Mi"},
    "limits": {"cpu": "1", "memory": "1Gi"},
}
COLLECTOR_RESOURCES: dict[str, Any] = {
    "requests": {"cpu": "10m", "memory": "32Mi"},
    "limits": {"cpu": "500m", "memory": "128Mi"},
}


PBT_CLAIM: dict[str, Any] = {
    "accessModes": ["ReadWriteMany"],
    "resources": {"requests": {"storage": "5Gi"}},
}
"""PBT's volume, as upstream's stock config: trial pods on any node read and write their
checkpoints on it while the algorithm copies them, so ReadWriteMany, and room for checkpoints."""


def default() -> KatibConfig:
    """Everything kubetune ships, usable with no ConfigMap at all."""
    return KatibConfig(
        runtime=RuntimeConfig(
            suggestions=[
                SuggestionConfig(
                    algorithm_name=name,
                    image=SUGGESTION_IMAGE,
                    resources=SUGGESTION_RESOURCES,
                    persistent_volume_claim_spec=PBT_CLAIM if name == "pbt" else None,
                )
                for name in ALGORITHMS
            ],
            metrics_collectors=[
                MetricsCollectorConfig(
                    kind=kind, image=COLLECTOR_IMAGE, resources=COLLECTOR_RESOURCES
                )
                for kind in COLLECTOR_KINDS
            ],
        )
    )


def parse(text: str, source: str = "katib-config") -> KatibConfig:
    """Parse a katib-config document.

    Raises:
        ConfigError: not YAML, or fields of the wrong shape (each named with its path).
    """
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"{source}: not valid YAML: {e}") from e
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a KatibConfig object")
    try:
        return KatibConfig.model_validate(data)
    except ValidationError as e:
        raise ConfigError(f"{source}: " + "; ".join(describe(e))) from e


def load(path: str | Path | None) -> KatibConfig:
    """The configuration from a file, or `default()` when no path is given."""
    if path is None:
        return default()
    return parse(Path(path).read_text(), str(path))


def from_config_map(config_map: dict[str, Any]) -> KatibConfig:
    text = (config_map.get("data") or {}).get(CONFIG_KEY)
    if text is None:
        raise ConfigError(f"ConfigMap {CONFIG_MAP_NAME} has no key {CONFIG_KEY}")
    return parse(text, f"ConfigMap {CONFIG_MAP_NAME}")


def default_yaml() -> str:
    return yaml.safe_dump(default().model_dump(mode="json", by_alias=True), sort_keys=False)
