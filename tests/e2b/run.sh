#!/usr/bin/env bash
# ctest e2e_e2b_sdk: a real airlockd on a fresh data dir, driven by the
# unmodified e2b SDK (tests/e2b/sdk-test.mjs) at two versions: the current one
# (v2 routes) and an older 2.x (v1 routes). scripts/setup installs both into
# build/e2b-sdk.
set -euo pipefail
root=$(cd "$(dirname "$(readlink -f "$0")")/../.." && pwd)
build=${1:-$root/build}
sdk=$build/e2b-sdk
for p in e2b e2b-v1routes; do
  [[ -f $sdk/node_modules/$p/package.json ]] || { echo "the e2b SDK ($p) is not installed: run scripts/setup"; exit 1; }
done
# E2B's base (Airlock's debian) warm, as a platform would run it: each of the
# suite's creates restores a booted guest instead of booting one.
source "$root/tests/support/airlockd.sh"
airlockd_start "$build" e2b --public-domain localhost --warm-templates debian
warm() {
  curl -fsS -H "Authorization: Bearer $key" "$url/v1/templates" |
    python3 -c 'import json,sys; sys.exit(0 if any(t["name"] == "debian" and t["warm"] for t in json.load(sys.stdin)["templates"]) else 1)'
}
deadline=$((SECONDS + 180))
until warm; do
  kill -0 "$pid" 2>/dev/null || { echo "airlockd exited"; exit 1; }
  ((SECONDS < deadline)) || { echo "the debian template is not warm in 180 s"; exit 1; }
  sleep 0.5
done
export E2B_API_KEY=e2b_${key#ak_} E2B_API_URL=$url E2B_SANDBOX_URL=$url AIRLOCK_URL=$url AIRLOCK_ADMIN_KEY=$key
cp "$root/tests/e2b/sdk-test.mjs" "$root/tests/e2b/template-test.mjs" "$sdk/"
for p in e2b e2b-v1routes; do
  echo "== $p@$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["version"])' "$sdk/node_modules/$p/package.json")"
  (cd "$sdk" && E2B_SDK=$p timeout 900 node --test --test-reporter=spec sdk-test.mjs)
done
# The Template builder (the newest SDK's API): a build, then a sandbox from it.
(cd "$sdk" && timeout 900 node --test --test-reporter=spec template-test.mjs)
