#!/usr/bin/env bash
# Builds the "debian" Airlock template: a Debian bookworm root filesystem
# (mmdebstrap, Debian's own packages) with python3, git, nodejs/npm,
# build-essential, curl, ca-certificates, procps, sudo and jq, as an ext4 image turned
# into a read-only qcow2 base. It boots the minimal template's kernel and
# initramfs: airlock-init mounts the disk (airlock.root=/dev/vda on the
# command line), carries the agent over in /run and switches root, so the
# root filesystem does not depend on the agent's version and is rebuilt only
# when this recipe changes.
#
# Usage: build.sh --minimal DIR --out DIR [--cache DIR] [--force]
#        build.sh --base-only --out DIR [--cache DIR]
#   --base-only builds the root filesystem and its base.qcow2 alone: they do
#   not need the minimal template, so setup runs this while it compiles.
#
# Output (world-readable, root-owned: QEMU reads, never writes, the base):
#   DIR/debian/vmlinuz, initramfs.cpio.gz   copies of the minimal template's
#   DIR/debian/base.qcow2                   the root filesystem
#   DIR/debian/template.json, DIGEST
set -euo pipefail
umask 022
export LC_ALL=C

readonly SUITE=bookworm
readonly PACKAGES=python3,python3-pip,python3-venv,git,nodejs,npm,ca-certificates,curl,wget,build-essential,procps,iproute2,less,xz-utils,unzip,zip,sudo,jq,file
readonly DISK_SIZE=6G
readonly CMDLINE="console=ttyS0 panic=-1 quiet init_on_free=1 airlock.root=/dev/vda"
# The sandbox user (uid 1000, as in the minimal template) with sudo and no
# password, as E2B's base has it (the guest's root is inside the threat model:
# every boundary that matters is the VM's), a hostname, and no apt lists or
# docs: they are dead weight in a base.
readonly HOOKS=(
    'chroot "$1" useradd --create-home --uid 1000 --user-group --shell /bin/bash user'
    'echo "user ALL=(ALL:ALL) NOPASSWD: ALL" >"$1/etc/sudoers.d/user" && chmod 0440 "$1/etc/sudoers.d/user"'
    'echo airlock >"$1/etc/hostname"'
    'printf "127.0.0.1 localhost airlock\n::1 localhost\n" >"$1/etc/hosts"'
    'sh "$AIRLOCK_PACKAGE_PROXY_HOOK" "$1"'
    'chroot "$1" python3 - <"$AIRLOCK_PRECOMPILE_WHEELS"'
    'rm -rf "$1"/var/lib/apt/lists/* "$1"/usr/share/doc/* "$1"/usr/share/man/* "$1"/var/cache/apt/*.bin'
)
# Bump when the image layout below changes (what goes into the ext4 image).
readonly LAYOUT_VERSION=1
readonly VCPUS=1
readonly MEMORY_MIB=512
# TCG's translated-code cache per QEMU: node and npm translate far more code
# than one busybox guest, and a small cache is flushed over and over (an npm
# install: 26 s at 256 MiB, over 290 s at 16). Not used under KVM.
readonly TCG_CACHE_MIB=256

log() { printf 'debian: %s\n' "$*" >&2; }
die() { printf 'debian: error: %s\n' "$*" >&2; exit 1; }
usage() { echo "usage: $0 --minimal DIR --out DIR [--cache DIR] [--force] | --base-only --out DIR [--cache DIR]" >&2; exit 2; }

MINIMAL="" OUT="" CACHE="" FORCE=0 BASE_ONLY=0
while (($#)); do
    case "$1" in
        --minimal) MINIMAL=${2:?}; shift 2 ;;
        --out) OUT=${2:?}; shift 2 ;;
        --cache) CACHE=${2:?}; shift 2 ;;
        --force) FORCE=1; shift ;;
        --base-only) BASE_ONLY=1; shift ;;
        *) usage ;;
    esac
done
[[ -n $OUT && ( -n $MINIMAL || $BASE_ONLY == 1 ) ]] || usage
((EUID == 0)) || die "must run as root (mmdebstrap in root mode, file ownership in the image)"
for tool in mmdebstrap mkfs.ext4 qemu-img sha256sum flock tar; do
    command -v "$tool" >/dev/null || die "missing tool: $tool"
done
if ((!BASE_ONLY)); then
    [[ -f $MINIMAL/vmlinuz && -f $MINIMAL/initramfs.cpio.gz && -f $MINIMAL/DIGEST ]] ||
        die "$MINIMAL is not a built minimal template"
    MINIMAL=$(realpath "$MINIMAL")
fi
OUT=$(realpath -m "$OUT")
CACHE=$(realpath -m "${CACHE:-$OUT/../cache}")
DEST=$OUT/debian
SCRIPT=$(realpath "${BASH_SOURCE[0]}")
mkdir -p "$DEST" "$CACHE"
chmod 0755 "$OUT" "$DEST"
exec 9>"$DEST/.lock"
flock 9

sha() { sha256sum "$1" | cut -d' ' -f1; }

# The root filesystem depends on its recipe only (suite, packages, hooks,
# layout); the template also on the minimal template's boot files.
# The hooks' scripts are part of the recipe: the package-proxy hook (npmrc,
# pip.conf, apt sources) and the bytecode for venv's pip (precompile-wheels.py).
export AIRLOCK_PACKAGE_PROXY_HOOK AIRLOCK_PRECOMPILE_WHEELS
AIRLOCK_PACKAGE_PROXY_HOOK=$(dirname "$(realpath "${BASH_SOURCE[0]}")")/package-proxy.sh
AIRLOCK_PRECOMPILE_WHEELS=$(dirname "$(realpath "${BASH_SOURCE[0]}")")/precompile-wheels.py
RECIPE=$(printf '%s\n' "$SUITE" "$PACKAGES" "${HOOKS[@]}" "$LAYOUT_VERSION" "$(sha "$AIRLOCK_PACKAGE_PROXY_HOOK")" \
    "$(sha "$AIRLOCK_PRECOMPILE_WHEELS")" | sha256sum | cut -d' ' -f1)
STAMP=$DEST/.inputs
if ((BASE_ONLY)) && [[ -f $DEST/base.qcow2 && "$(cat "$DEST/.base-recipe" 2>/dev/null)" == "$RECIPE" ]]; then
    echo "debian base up to date"
    exit 0
fi
((BASE_ONLY)) || INPUTS=$(printf '%s\n' "recipe=$RECIPE" "cmdline=$CMDLINE" "script=$(sha "$SCRIPT")" "minimal=$(cat "$MINIMAL/DIGEST")")
if ((!FORCE && !BASE_ONLY)) && [[ -f $STAMP && -f $DEST/template.json && -f $DEST/base.qcow2 ]] &&
    [[ "$(cat "$STAMP")" == "$INPUTS" ]]; then
    echo "debian template up to date"
    exit 0
fi

# ---------------------------------------------------------------- root filesystem

TARBALL=$CACHE/debian-rootfs-${RECIPE:0:16}.tar
if [[ ! -f $TARBALL ]]; then
    SOURCES=$(ls /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
    [[ -n $SOURCES ]] || SOURCES=/etc/apt/sources.list
    log "mmdebstrap $SUITE (about 90 s)"
    tmp=$(mktemp "$CACHE/.rootfs.XXXXXX.tar")
    hook_args=()
    for h in "${HOOKS[@]}"; do hook_args+=(--customize-hook="$h"); done
    if ! mmdebstrap --variant=minbase --include="$PACKAGES" "${hook_args[@]}" \
        "$SUITE" "$tmp" "$SOURCES" >"$tmp.log" 2>&1; then
        tail -30 "$tmp.log" >&2
        rm -f "$tmp" "$tmp.log"
        die "mmdebstrap failed"
    fi
    rm -f "$tmp.log"
    mv "$tmp" "$TARBALL"
    # Older recipes' tarballs go, but for the two newest: the cache is shared
    # by every checkout on the machine, some of them at other commits.
    ls -t "$CACHE"/debian-rootfs-*.tar | tail -n +4 | xargs -r rm -f
fi

# ---------------------------------------------------------------- ext4 -> qcow2

STAGE=$(mktemp -d "$DEST/.stage.XXXXXX")
trap 'rm -rf "$STAGE"' EXIT
# The base depends on the recipe alone: a new agent or init (a new minimal
# template) only brings new boot files.
if [[ -f $DEST/base.qcow2 && "$(cat "$DEST/.base-recipe" 2>/dev/null)" == "$RECIPE" ]]; then
    cp --reflink=auto "$DEST/base.qcow2" "$STAGE/base.qcow2"
else
    log "ext4 image from $(basename "$TARBALL")"
    mkdir "$STAGE/root"
    tar -C "$STAGE/root" --numeric-owner -xpf "$TARBALL"
    mkdir -p "$STAGE/root/run" "$STAGE/root/dev/shm"
    E2FSPROGS_FAKE_TIME=1704067200 mkfs.ext4 -q -F -L airlock-root -U clear \
        -E root_owner=0:0,hash_seed=00000000-0000-0000-0000-000000000000 \
        -d "$STAGE/root" "$STAGE/root.ext4" "$DISK_SIZE" >/dev/null
    qemu-img convert -f raw -O qcow2 "$STAGE/root.ext4" "$STAGE/base.qcow2"
    rm -rf "$STAGE/root" "$STAGE/root.ext4"
fi
if ((BASE_ONLY)); then
    # The template's files stay as they were until the full build; its
    # stamp goes, so that the next one rebuilds them around this base.
    chmod 0644 "$STAGE/base.qcow2"
    rm -f "$STAMP"
    mv -f "$STAGE/base.qcow2" "$DEST/base.qcow2"
    printf '%s\n' "$RECIPE" >"$DEST/.base-recipe"
    log "base $(du -h --apparent-size "$DEST/base.qcow2" | cut -f1) (recipe ${RECIPE:0:16})"
    exit 0
fi
cp "$MINIMAL/vmlinuz" "$STAGE/vmlinuz"
cp "$MINIMAL/initramfs.cpio.gz" "$STAGE/initramfs.cpio.gz"
chmod 0644 "$STAGE/base.qcow2" "$STAGE/vmlinuz" "$STAGE/initramfs.cpio.gz"

DIGEST="sha256:$(printf '%s%s%s' "$(sha "$STAGE/vmlinuz")" "$(sha "$STAGE/initramfs.cpio.gz")" \
    "$(sha "$STAGE/base.qcow2")" | sha256sum | cut -d' ' -f1)"
KVER=$(sed -n 's/.*"kernel_version": "\([^"]*\)".*/\1/p' "$MINIMAL/template.json")
cat >"$STAGE/template.json" <<JSON
{
  "name": "debian",
  "kernel": "vmlinuz",
  "initrd": "initramfs.cpio.gz",
  "disk": "base.qcow2",
  "cmdline": "$CMDLINE",
  "vcpus": $VCPUS,
  "memory_mib": $MEMORY_MIB,
  "tcg_cache_mib": $TCG_CACHE_MIB,
  "kernel_version": "$KVER",
  "digest": "$DIGEST"
}
JSON
printf '%s\n' "$DIGEST" >"$STAGE/DIGEST"
chmod 0644 "$STAGE/template.json" "$STAGE/DIGEST"
rm -f "$STAMP"
for f in vmlinuz initramfs.cpio.gz base.qcow2 template.json DIGEST; do mv -f "$STAGE/$f" "$DEST/$f"; done
printf '%s\n' "$RECIPE" >"$DEST/.base-recipe"
printf '%s\n' "$INPUTS" >"$STAMP"
log "base $(du -h --apparent-size "$DEST/base.qcow2" | cut -f1), $DIGEST"
