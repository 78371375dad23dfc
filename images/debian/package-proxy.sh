#!/bin/sh
# Points the guest's package managers at airlockd's package proxy (a
# customize hook of build.sh; $1 is the root filesystem). The guest has no
# network but loopback: npm, pip and apt reach their registries only through
# the proxy's guest ports (4873 npm, 3141 PyPI, 3142 apt), where the host
# applies the sandbox's package rules. apt keeps its Debian keyring and
# verifies the archive's signatures itself; each source is served under the
# last path segment of its URI (the same name airlockd gives an apt
# upstream), e.g. …/debian -> http://127.0.0.1:3142/debian.
# npm's retry waits (10 s, then up to 60 s) suit a distant registry; the
# proxy answers from this host after its own upstream fetch, and what it
# answers 5xx for (an integrity failure, an upstream that is down) is not
# different a minute later: npm still retries twice, after 1 s and 5 s.
set -eu
root=$1
cat >"$root/etc/npmrc" <<'NPMRC'
registry=http://127.0.0.1:4873/
audit=false
fund=false
update-notifier=false
fetch-retry-mintimeout=1000
fetch-retry-maxtimeout=5000
NPMRC
mkdir -p "$root/usr/etc"
cp "$root/etc/npmrc" "$root/usr/etc/npmrc"
cat >"$root/etc/pip.conf" <<'PIP'
[global]
index-url = http://127.0.0.1:3141/simple/
trusted-host = 127.0.0.1
PIP
# Loopback is never sent through the egress proxy that http_proxy names.
cat >"$root/etc/apt/apt.conf.d/90airlock-package-proxy" <<'APT'
Acquire::http::Proxy::127.0.0.1 "DIRECT";
Acquire::Retries "0";
APT
for f in "$root"/etc/apt/sources.list "$root"/etc/apt/sources.list.d/*.list "$root"/etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    sed -E -i 's#(https?|mirror\+https?)://[^ ]*/([A-Za-z0-9._-]+)/?( |$)#http://127.0.0.1:3142/\2\3#g' "$f"
done
