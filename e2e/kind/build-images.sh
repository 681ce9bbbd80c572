#!/usr/bin/env bash
# Build every kubetune service image with the project's one build command (images/build.py:
# Debian base by debootstrap, images/Dockerfile per service) and load them into kind.
set -euo pipefail
# shellcheck source=e2e/kind/common.sh
source "$(dirname "$0")/common.sh"
need docker
need kind

python3 "${REPO_ROOT}/images/build.py" --tag "${IMAGE_TAG}" "${SERVICES[@]}"
for svc in "${SERVICES[@]}"; do
  kind load docker-image --name "${CLUSTER_NAME}" "kubetune/${svc}:${IMAGE_TAG}"
done
