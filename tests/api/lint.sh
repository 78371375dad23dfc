#!/usr/bin/env bash
# ctest api_lint: both front doors' documents (api/openapi.yaml, api/e2b.yaml)
# pass Redocly's recommended rules with no error (warnings are printed, not fatal).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
redocly=$build/api-lint/node_modules/.bin/redocly
[[ -x $redocly ]] || { echo "api_lint: $redocly is missing: run scripts/setup"; exit 1; }
# No telemetry, no update check: CI has only the package registries.
export REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true
"$redocly" lint --format=summary "$root/api/openapi.yaml" "$root/api/e2b.yaml"
