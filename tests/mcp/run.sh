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
data=$(mktemp -d /tmp/airlock-mcp.XXXXXX)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
url=http://127.0.0.1:$port
"$build/bin/airlockd" --listen "127.0.0.1:$port" --data-dir "$data" >"$data/server.log" 2>&1 &
pid=$!
cleanup() {
  local code=$?
  if kill -0 "$pid" 2>/dev/null; then
    for id in $(curl -fsS -H "Authorization: Bearer $key" "$url/v1/sandboxes" 2>/dev/null |
      python3 -c 'import json,sys; print("\n".join(s["id"] for s in json.load(sys.stdin)["sandboxes"]))' 2>/dev/null); do
      curl -fsS -X DELETE -H "Authorization: Bearer $key" "$url/v1/sandboxes/$id" >/dev/null 2>&1 || true
    done
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  if [[ $code != 0 ]]; then echo "== airlockd log (tail)"; tail -40 "$data/server.log"; fi
  rm -rf "$data"
  exit "$code"
}
key=""
trap cleanup EXIT
deadline=$((SECONDS + 90))
until curl -fsS "$url/healthz" >/dev/null 2>&1; do
  kill -0 "$pid" 2>/dev/null || { echo "airlockd exited at start"; exit 1; }
  ((SECONDS < deadline)) || { echo "airlockd not up in 90 s"; exit 1; }
  sleep 0.2
done
key=$(cat "$data/admin.key")
mint() {
  curl -fsS -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
    -d "{\"tenant\":\"$1\",\"role\":\"$2\",\"name\":\"mcp-$2\"}" "$url/v1/keys" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["key"])'
}
export AIRLOCK_URL=$url ADMIN_KEY=$key AGENT_KEY=$(mint acme agent) APPROVER_KEY=$(mint acme approver) \
  OTHER_KEY=$(mint globex agent) AIRLOCK_CLI=$build/bin/airlock
cp "$root/tests/mcp/mcp-test.mjs" "$sdk/mcp-test.mjs"
(cd "$sdk" && timeout 900 node --test --test-reporter=spec mcp-test.mjs)
