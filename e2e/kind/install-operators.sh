#!/usr/bin/env bash
# Install the real Argo Workflows controller and Kubeflow training operator, and cert-manager
# (the kind overlay takes the webhook's serving certificate from it).
set -euo pipefail
# shellcheck source=e2e/kind/common.sh
source "$(dirname "$0")/common.sh"
need kubectl

ctx="kind-${CLUSTER_NAME}"
kubectl --context "${ctx}" apply -f \
  "https://github.com/cert-manager/cert-manager/releases/download/${CERT_MANAGER_VERSION}/cert-manager.yaml"
kubectl --context "${ctx}" create namespace argo --dry-run=client -o yaml \
  | kubectl --context "${ctx}" apply -f -
kubectl --context "${ctx}" apply -n argo -f \
  "https://github.com/argoproj/argo-workflows/releases/download/${ARGO_VERSION}/install.yaml"
kubectl --context "${ctx}" apply --server-side -k \
  "github.com/kubeflow/training-operator.git/manifests/overlays/standalone?ref=${TRAINING_OPERATOR_VERSION}"
kubectl --context "${ctx}" -n argo rollout status deployment/workflow-controller --timeout=300s
kubectl --context "${ctx}" -n kubeflow rollout status deployment/training-operator --timeout=300s
kubectl --context "${ctx}" -n cert-manager rollout status deployment/cert-manager-webhook --timeout=300s
