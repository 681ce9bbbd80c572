#!/usr/bin/env bash
# Whole kind flow: cluster, images, operators, tests.
set -euo pipefail
here="$(dirname "$0")"
"${here}/create-cluster.sh"
"${here}/build-images.sh"
"${here}/install-operators.sh"
"${here}/run-e2e.sh" "$@"
