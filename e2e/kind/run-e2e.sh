#!/usr/bin/env bash
# Deploy kubetune with the kind overlay and run the end-to-end tests against kind.
set -euo pipefail
# shellcheck source=e2e/kind/common.sh
source "$(dirname "$0")/common.sh"
need kubectl

ctx="kind-${CLUSTER_NAME}"
kubectl --context "${ctx}" apply --server-side -k "${REPO_ROOT}/kustomize/overlays/kind"
kubectl --context "${ctx}" -n kubeflow wait deployment -l app.kubernetes.io/part-of=kubetune \
  --for=condition=Available --timeout=300s

kubeconfig="$(mktemp)"
trap 'rm -f "${kubeconfig}"' EXIT
kind get kubeconfig --name "${CLUSTER_NAME}" >"${kubeconfig}"
KUBECONFIG="${kubeconfig}" KUBETUNE_E2E_EXISTING_CLUSTER=1 \
  python -m pytest -m integration "${REPO_ROOT}/e2e/tests" "$@"
