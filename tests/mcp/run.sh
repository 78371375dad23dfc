#!/usr/bin/env bash
# ctest e2e_mcp_sdk: a real airlockd on a fresh data dir, driven over
# Streamable HTTP (/mcp) and `airlock mcp` (stdio) by the official MCP SDK
# (tests/mcp/mcp-test.mjs), pinned in tests/mcp/package.json; scripts/setup
# installs it into build/mcp-sdk.
set -euo pipefail
root=$(cd "$(dirname "$(readlink -f "$0")")/../.." && pwd)
build=$(readlink -f "${1:-$root/build}")
sdk=$build/mcp-sdk
[[ -f $sdk/node_modules/@modelcontextprotocol/sdk/package.json ]] ||
  { echo "the MCP SDK is not installed: run scripts/setup"; exit 1; }
source "$root/tests/support/airlockd.sh"
airlockd_start "$build" mcp
mint() {
  curl -fsS -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
    -d "{\"tenant\":\"$1\",\"role\":\"$2\",\"name\":\"mcp-$2\"}" "$url/v1/keys" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["key"])'
}
export AIRLOCK_URL=$url ADMIN_KEY=$key AGENT_KEY=$(mint acme agent) APPROVER_KEY=$(mint acme approver) \
  OTHER_KEY=$(mint globex agent) AIRLOCK_CLI=$build/bin/airlock
cp "$root/tests/mcp/mcp-test.mjs" "$sdk/mcp-test.mjs"
(cd "$sdk" && timeout 900 node --test --test-reporter=spec mcp-test.mjs)
