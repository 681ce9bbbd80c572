#!/usr/bin/env bash
# Shared settings for the kind scripts; sourced, never run.
# shellcheck disable=SC2034  # variables are used by the scripts that source this file
set -euo pipefail

CLUSTER_NAME="${KIND_CLUSTER_NAME:-kubetune}"
KIND_NODE_IMAGE="${KIND_NODE_IMAGE:-kindest/node:v1.35.0}"
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
IMAGE_TAG="${IMAGE_TAG:-dev}"
# The versions the local e2e run builds (localcluster.operators / thirdparty pins).
ARGO_VERSION="${ARGO_VERSION:-v3.7.9}"
TRAINING_OPERATOR_VERSION="${TRAINING_OPERATOR_VERSION:-v1.9.2}"
CERT_MANAGER_VERSION="${CERT_MANAGER_VERSION:-v1.16.2}"
SERVICES=(experiment-controller suggestion-controller suggestion-algorithm
          trial-controller webhook pns-collector db-manager)

need() {
  command -v "$1" >/dev/null 2>&1 || { echo "missing required tool: $1" >&2; exit 1; }
}
