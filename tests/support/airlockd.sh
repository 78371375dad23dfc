# Sourced by the SDK suites' run.sh (tests/e2b, tests/mcp): a real airlockd on
# a fresh data dir and a free port. On exit its sandboxes are deleted, it
# stops and its data dir goes (its log's tail printed when the suite failed).
# airlockd_start sets data, port, url, pid and key (the admin key).
airlockd_cleanup() {
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

airlockd_start() { # airlockd_start BUILD NAME [airlockd options...]
  local build=$1 name=$2
  shift 2
  data=$(mktemp -d "/tmp/airlock-$name.XXXXXX")
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  url=http://127.0.0.1:$port
  "$build/bin/airlockd" --listen "127.0.0.1:$port" --data-dir "$data" "$@" >"$data/server.log" 2>&1 &
  pid=$!
  key=""
  trap airlockd_cleanup EXIT
  local deadline=$((SECONDS + 90))
  until curl -fsS "$url/healthz" >/dev/null 2>&1; do
    kill -0 "$pid" 2>/dev/null || { echo "airlockd exited at start"; exit 1; }
    ((SECONDS < deadline)) || { echo "airlockd not up in 90 s"; exit 1; }
    sleep 0.2
  done
  key=$(cat "$data/admin.key")
}
