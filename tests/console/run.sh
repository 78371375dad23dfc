#!/usr/bin/env bash
# ctest e2e_console: the console in headless Chromium (Debian's chromium,
# driven by puppeteer-core, pinned in tests/console/package.json and installed
# by scripts/setup into build/console-test) against a real airlockd with real
# VMs, a git server for a workspace, and axe-core on every page. Screenshots
# of each page go to BUILD/console-shots.
set -euo pipefail
root=$(cd "$(dirname "$(readlink -f "$0")")/../.." && pwd)
build=$(readlink -f "${1:-$root/build}")
tools=$build/console-test
[[ -f $tools/node_modules/puppeteer-core/package.json ]] ||
  { echo "puppeteer-core is not installed: run scripts/setup"; exit 1; }
[[ -f $build/console/index.html ]] || { echo "the console is not built: run scripts/setup"; exit 1; }
chrome=$(command -v chromium) || { echo "chromium is not installed: run scripts/setup"; exit 1; }
source "$root/tests/support/airlockd.sh"
# The workspace's repository is served on loopback, which the operator opens.
airlockd_start "$build" console --egress-allow-cidr 127.0.0.1/32
# A repository for the workspace whose diff the review page shows, served
# read-only to anonymous readers.
repos=$data/repos
mkdir -p "$repos/src"
git -C "$repos/src" init -q -b main
printf 'def add(a, b):\n    return a + b\n' >"$repos/src/app.py"
git -C "$repos/src" add app.py
git -C "$repos/src" -c user.name=t -c user.email=t@t.invalid commit -qm base
git clone -q --bare "$repos/src" "$repos/app.git"
gitport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 "$root/tests/fixtures/git-http-server.py" --root "$repos" --port "$gitport" --user t \
  --password "p$RANDOM$RANDOM" --public app.git >"$data/git.log" 2>&1 &
gitpid=$!
chromepid=
stop_helpers() {
  local code=$?
  set +e  # a failed run's status must reach airlockd_cleanup, not end this trap
  kill "$gitpid" 2>/dev/null || true
  # puppeteer starts Chromium in a process group of its own: that group ends.
  if [[ $chromepid =~ ^[0-9]+$ ]] && kill -0 "$chromepid" 2>/dev/null; then kill -- "-$chromepid" 2>/dev/null || true; fi
  (exit "$code"); airlockd_cleanup
}
trap stop_helpers EXIT
mint() {
  curl -fsS -H "Authorization: Bearer $key" -H 'Content-Type: application/json' \
    -d "{\"tenant\":\"$1\",\"role\":\"$2\",\"name\":\"console-$2\"}" "$url/v1/keys" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["key"])'
}
mkdir -p "$build/console-shots"
export AIRLOCK_URL=$url ADMIN_KEY=$key AGENT_KEY=$(mint acme agent) APPROVER_KEY=$(mint acme approver) \
  CHROMIUM=$chrome SHOTS=$build/console-shots CHROME_PROFILE=$data/chrome CHROME_PID_FILE=$data/chrome.pid \
  REPO_URL=http://127.0.0.1:$gitport/app.git
cp "$root/tests/console/console-test.mjs" "$tools/console-test.mjs"
status=0
(cd "$tools" && timeout 900 node --test --test-reporter=spec --test-concurrency=1 console-test.mjs) || status=$?
chromepid=$(cat "$data/chrome.pid" 2>/dev/null || true)
exit "$status"
