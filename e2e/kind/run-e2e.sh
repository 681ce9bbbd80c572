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
# Trial containers are real containers here: plain python images run python3 -c <code>, the
# digits training script runs in an image with NumPy and scikit-learn (the algorithm's image,
# loaded by build-images.sh). See e2e/tests/podcode.py.
KUBECONFIG="${kubeconfig}" KUBETUNE_E2E_EXISTING_CLUSTER=1 \
  KUBETUNE_E2E_TRAINING_IMAGE="${KUBETUNE_E2E_TRAINING_IMAGE:-kubetune/suggestion-algorithm:${IMAGE_TAG}}" \
  KUBETUNE_E2E_PYTHON_IMAGE="${KUBETUNE_E2E_PYTHON_IMAGE:-python:3.11}" \
  python -m pytest -m integration "${REPO_ROOT}/e2e/tests" "$@"
