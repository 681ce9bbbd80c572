#!/usr/bin/env bash
# Build one image per kubetune service and load them into the kind cluster.
set -euo pipefail
# shellcheck source=e2e/kind/common.sh
source "$(dirname "$0")/common.sh"
need docker
need kind

for svc in "${SERVICES[@]}"; do
  image="kubetune/${svc}:${IMAGE_TAG}"
  echo "building ${image}"
  docker build -t "${image}" -f "${REPO_ROOT}/services/${svc}/Dockerfile" "${REPO_ROOT}"
  kind load docker-image --name "${CLUSTER_NAME}" "${image}"
done
