#!/usr/bin/env bash
# Create (or reuse) a kind cluster for the kubetune end-to-end tests.
set -euo pipefail
# shellcheck source=e2e/kind/common.sh
source "$(dirname "$0")/common.sh"
need kind
need kubectl

if kind get clusters | grep -qx "${CLUSTER_NAME}"; then
  echo "kind cluster ${CLUSTER_NAME} already exists"
else
  kind create cluster --name "${CLUSTER_NAME}" --image "${KIND_NODE_IMAGE}" --wait 120s
fi
kubectl cluster-info --context "kind-${CLUSTER_NAME}"
