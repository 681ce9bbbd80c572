"""kubetune's configuration, in the format of Katib's `katib-config` (reference §10).

One document (`apiVersion: config.kubeflow.org/v1beta1`, `kind: KatibConfig`) with `init`
(read once at start) and `runtime` (algorithm images and resources, collector images, early
stopping). Every service reads the same file, mounted from the ConfigMap `katib-config` (key
`katib-config.yaml`); with no file, `default()` gives a configuration that works out of the box
with kubetune's own images. Lookups fail with upstream's messages.

Default suggestion resources: the algorithm keeps every finished trial in memory (Optuna's
study, scikit-optimize's model), and Katib's 100Mi limit OOM-kills Bayesian optimization after a
few dozen trials. kubetune asks for 128Mi and allows 1Gi, measured to hold TPE and GP-based
Bayesian optimization over 1,000 trials (see bench/).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ConfigDict, Field, ValidationError

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
    "bayesianoptimization",
    "hyperband",
    "pbt",
    "darts",
    "enas",
)
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


class ConfigError(ValueError):
    """The configuration lacks an entry, or an entry lacks its image."""


class _Open(WireModel):
    model_config = ConfigDict(extra="allow")


class ControllerConfig(_Open):
    trial_resources: list[str] = Field(default_factory=lambda: list(DEFAULT_TRIAL_RESOURCES))
    inject_istio_annotation: bool = True


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


class EarlyStoppingConfig(_Open):
    algorithm_name: str
    image: str = ""
    image_pull_policy: str | None = None
    resources: FreeForm | None = None


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
