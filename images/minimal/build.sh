#!/usr/bin/env bash
# Builds the "minimal" Airlock template: the Debian cloud kernel plus an
# initramfs holding airlock-init (/init), airlock-agent, busybox and the
# virtio modules the agent channel needs.
#
# Usage: build.sh --agent PATH --init PATH --out DIR [--cache DIR] [--force]
#
# Output (all world-readable: QEMU runs as libvirt-qemu and must read them):
#   DIR/minimal/vmlinuz
#   DIR/minimal/initramfs.cpio.gz   byte-reproducible for identical inputs
#   DIR/minimal/template.json
#   DIR/minimal/DIGEST              "sha256:<hex>" + newline, where <hex> is the
#                                   sha256 of the ASCII concatenation of the hex
#                                   sha256 of vmlinuz and of initramfs.cpio.gz
# Must run as root (device node and uid 1000 ownership inside the archive).
set -euo pipefail
umask 022
export LC_ALL=C

readonly KERNEL_META=linux-image-cloud-amd64
readonly BUSYBOX=/bin/busybox
readonly BASH_STATIC=/bin/bash-static
# Fixed mtime for every archive member. Not 0: some tools (Python's zipfile)
# reject timestamps before 1980.
readonly ARCHIVE_EPOCH=1704067200 # 2024-01-01T00:00:00Z
# init_on_free=1: freed pages are zeroed, so a snapshot skips them (zero pages
# cost a few bytes in the migration stream): 101 -> 61 MB for an idle guest.
readonly CMDLINE="console=ttyS0 panic=-1 quiet init_on_free=1"
readonly VCPUS=1
readonly MEMORY_MIB=256

# Loaded in this order (each one's dependencies first). Built-in ones are
# skipped. REQUIRED must exist; OPTIONAL only if this kernel has them.
readonly REQUIRED_MODULES=(
    virtio_ring virtio virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci
    virtio_console virtio_rng virtio_blk virtio_net
    ext4
)
readonly OPTIONAL_MODULES=(
    # ext4 asks the crypto API for "crc32c" at mount time; without modprobe
    # in the guest it must already be registered.
    crc32c_generic
    # Free page reporting (a virtio balloon that returns freed pages).
    virtio_balloon
    vsock vmw_vsock_virtio_transport_common vmw_vsock_virtio_transport
)

log() { printf 'minimal: %s\n' "$*" >&2; }
die() { printf 'minimal: error: %s\n' "$*" >&2; exit 1; }

usage() {
    cat >&2 <<EOF
usage: $0 --agent PATH --init PATH --out DIR [--cache DIR] [--force]
  --agent PATH   static airlock-agent binary (becomes /sbin/airlock-agent)
  --init  PATH   static airlock-init binary (becomes /init)
  --out   DIR    output root; the template goes to DIR/minimal
  --cache DIR    download/unpack cache (default: DIR/../cache)
  --force        rebuild even if the inputs are unchanged
EOF
    exit 2
}

AGENT="" INIT="" OUT="" CACHE="" FORCE=0
while (($#)); do
    case "$1" in
        --agent) AGENT=${2:?}; shift 2 ;;
        --init) INIT=${2:?}; shift 2 ;;
        --out) OUT=${2:?}; shift 2 ;;
        --cache) CACHE=${2:?}; shift 2 ;;
        --force) FORCE=1; shift ;;
        -h|--help) usage ;;
        *) log "unknown argument: $1"; usage ;;
    esac
done
[[ -n $AGENT && -n $INIT && -n $OUT ]] || usage
((EUID == 0)) || die "must run as root (the archive holds a device node and a uid 1000 home)"

for tool in apt-cache apt-get dpkg-deb depmod cpio gzip sha256sum ldd flock find sort; do
    command -v "$tool" >/dev/null || die "missing tool: $tool"
done

# The initramfs has no C library, so every executable in it must be static.
require_static() {
    local what=$1 file=$2
    [[ -f $file && -x $file ]] || die "$what: $file is not an executable file"
    if ldd "$file" 2>/dev/null | grep -qE '=>|ld-linux'; then
        die "$what: $file is dynamically linked; the initramfs needs a static binary"
    fi
}
require_static agent "$AGENT"
require_static init "$INIT"
[[ -e $BUSYBOX ]] || die "$BUSYBOX not found (apt-get install busybox-static)"
require_static busybox "$BUSYBOX"
[[ -e $BASH_STATIC ]] || die "$BASH_STATIC not found (apt-get install bash-static)"
require_static bash "$BASH_STATIC"

AGENT=$(realpath "$AGENT")
INIT=$(realpath "$INIT")
OUT=$(realpath -m "$OUT")
CACHE=$(realpath -m "${CACHE:-$OUT/../cache}")
DEST=$OUT/minimal
SCRIPT=$(realpath "${BASH_SOURCE[0]}")

mkdir -p "$DEST" "$CACHE"
chmod 0755 "$OUT" "$DEST"

# Two concurrent builds would race on the same output files.
exec 9>"$DEST/.lock"
flock 9

sha() { sha256sum "$1" | cut -d' ' -f1; }

# ---------------------------------------------------------------- up to date?

# Deliberately no apt query here: apt-cache costs about a second per call
# (this machine keeps no pkgcache.bin), and the kernel stays pinned to the
# one recorded in the stamp until another input changes or --force is given.
STAMP=$DEST/.inputs
INPUTS=$(printf '%s\n' \
    "agent=$(sha "$AGENT")" \
    "init=$(sha "$INIT")" \
    "busybox=$(sha "$BUSYBOX")" \
    "bash=$(sha "$BASH_STATIC")" \
    "script=$(sha "$SCRIPT")" \
    "wget=$(sha "$(dirname "$SCRIPT")/wget-wrapper.sh")")

if ((!FORCE)) && [[ -f $STAMP && -f $DEST/template.json && -f $DEST/DIGEST &&
    -f $DEST/vmlinuz && -f $DEST/initramfs.cpio.gz ]] &&
    [[ "$(grep -v '^kernel=' "$STAMP")" == "$INPUTS" ]]; then
    echo "minimal template up to date"
    exit 0
fi

# ---------------------------------------------------------------- kernel package

# One apt-cache call gives both the ABI package and its exact version:
# "Depends: linux-image-6.1.0-57-cloud-amd64 (= 6.1.192-3)". Only when apt
# knows nothing (no lists yet) fall back to whatever the cache holds.
ARCH=$(dpkg --print-architecture)
read -r KPKG KDEB_VERSION < <(apt-cache show --no-all-versions "$KERNEL_META" 2>/dev/null |
    sed -n 's/^Depends:.*\(linux-image-[^ ,]*\) (= \([^)]*\)).*/\1 \2/p' | head -n1) || true
if [[ -n ${KPKG:-} && -n ${KDEB_VERSION:-} ]]; then
    KDEB=$CACHE/${KPKG}_${KDEB_VERSION//:/%3a}_${ARCH}.deb
else
    KDEB=$(find "$CACHE" -maxdepth 1 -name 'linux-image-*-cloud-amd64_*.deb' | sort -V | tail -n1)
    [[ -n $KDEB ]] || die "apt-cache cannot resolve $KERNEL_META (run apt-get update) and the cache is empty"
    KPKG=$(basename "$KDEB"); KPKG=${KPKG%%_*}
    KDEB_VERSION=$(dpkg-deb -f "$KDEB" Version)
    log "apt-cache cannot resolve $KERNEL_META; using cached $(basename "$KDEB")"
fi
KVER=${KPKG#linux-image-}

# ---------------------------------------------------------------- fetch + unpack

if [[ ! -f $KDEB ]]; then
    log "downloading $KPKG $KDEB_VERSION"
    dl=$(mktemp -d "$CACHE/.download.XXXXXX")
    # Downloaded into a scratch dir and moved: an interrupted download must
    # never look like a cached one. apt warns that _apt cannot sandbox the
    # download into a root-only dir; harmless, so the log is shown on failure only.
    if ! (cd "$dl" && apt-get -q download "$KPKG=$KDEB_VERSION") >"$dl.log" 2>&1; then
        cat "$dl.log" >&2
        rm -rf "$dl" "$dl.log"
        die "apt-get download $KPKG failed"
    fi
    mv "$dl"/*.deb "$KDEB"
    rm -rf "$dl" "$dl.log"
fi

KDIR=${KDEB%.deb}
if [[ ! -f $KDIR/.complete ]]; then
    log "unpacking $(basename "$KDEB")"
    rm -rf "$KDIR" "$KDIR.partial"
    dpkg-deb -x "$KDEB" "$KDIR.partial"
    # The package ships no modules.dep (its postinst runs depmod on install).
    depmod -b "$KDIR.partial" "$KVER"
    touch "$KDIR.partial/.complete"
    mv "$KDIR.partial" "$KDIR"
fi
MODROOT=$KDIR/lib/modules/$KVER
VMLINUZ=$KDIR/boot/vmlinuz-$KVER
[[ -f $VMLINUZ && -f $MODROOT/modules.dep ]] || die "unexpected layout in $KDIR"

# ---------------------------------------------------------------- modules

declare -A MOD_PATH=() MOD_DEPS=() BUILTIN=() SOFTDEP_PRE=() VISITED=()
modname() { local n=${1##*/}; n=${n%%.ko*}; printf '%s' "${n//-/_}"; }

# One awk pass instead of a subshell per line: modules.dep has ~1100 lines.
MODNAME_AWK='function modname(p) { sub(/.*\//, "", p); sub(/\.ko.*/, "", p); gsub(/-/, "_", p); return p }'
while IFS=$'\t' read -r name path deps; do
    MOD_PATH[$name]=$path
    MOD_DEPS[$path]=$deps
done < <(awk -F': *' "$MODNAME_AWK"' { print modname($1) "\t" $1 "\t" $2 }' "$MODROOT/modules.dep")
while read -r name; do
    BUILTIN[$name]=1
done < <(awk "$MODNAME_AWK"' NF { print modname($1) }' "$MODROOT/modules.builtin")
if [[ -f $MODROOT/modules.softdep ]]; then
    # "softdep ext4 pre: crc32c post: ..." -> the names between pre: and post:
    while read -r kw name rest; do
        [[ $kw == softdep && $rest == *pre:* ]] || continue
        pre=${rest#*pre:}; pre=${pre%%post:*}
        SOFTDEP_PRE[${name//-/_}]=$pre
    done <"$MODROOT/modules.softdep"
fi

ORDERED=()
visit() { # $1 = module path relative to MODROOT; appends after its dependencies
    local path=$1 i soft
    if [[ -n ${VISITED[$path]:-} ]]; then return 0; fi
    VISITED[$path]=1
    # Soft pre-dependencies may be aliases (e.g. "crc32c"); only real module
    # names can be resolved without modprobe, the rest are best effort.
    for soft in ${SOFTDEP_PRE[$(modname "$path")]:-}; do
        soft=${soft//-/_}
        if [[ -n ${MOD_PATH[$soft]:-} ]]; then visit "${MOD_PATH[$soft]}"; fi
    done
    # modules.dep lists the most basic modules last: walk it backwards so
    # the result reads bottom-up (virtio_ring before virtio, ...).
    local -a list
    read -r -a list <<<"${MOD_DEPS[$path]}"
    for ((i = ${#list[@]} - 1; i >= 0; i--)); do visit "${list[i]}"; done
    ORDERED+=("$path")
}
want() { # $1 = name, $2 = required|optional
    local name=${1//-/_}
    if [[ -n ${BUILTIN[$name]:-} ]]; then
        log "module $name: built into the kernel"
    elif [[ -n ${MOD_PATH[$name]:-} ]]; then
        visit "${MOD_PATH[$name]}"
    elif [[ $2 == required ]]; then
        die "module $name: neither built in nor a module in $KVER"
    else
        log "module $name: not in this kernel, skipped"
    fi
}
for m in "${REQUIRED_MODULES[@]}"; do want "$m" required; done
for m in "${OPTIONAL_MODULES[@]}"; do want "$m" optional; done

# ---------------------------------------------------------------- staging tree

STAGE=$(mktemp -d "$DEST/.stage.XXXXXX")
trap 'rm -rf "$STAGE" "$DEST"/.initramfs.tmp.* "$DEST"/.vmlinuz.tmp.* "$DEST"/.meta.tmp.*' EXIT
chmod 0755 "$STAGE"

install -d -m 0755 "$STAGE"/{bin,sbin,usr/bin,usr/sbin,lib/modules,etc/airlock,dev,proc,sys,run,home,var}
install -d -m 1777 "$STAGE"/tmp "$STAGE"/var/tmp
install -d -m 0700 "$STAGE"/root
install -d -m 0755 -o 1000 -g 1000 "$STAGE"/home/user
# The kernel's built-in initramfs has one too, but a kernel built without
# it would start init with no console at all.
mknod -m 0600 "$STAGE"/dev/console c 5 1

install -m 0755 "$INIT" "$STAGE"/init
install -m 0755 "$AGENT" "$STAGE"/sbin/airlock-agent
strip --strip-unneeded "$STAGE"/sbin/airlock-agent  # debug info is for the host, not the guest
install -m 0755 "$BUSYBOX" "$STAGE"/bin/busybox
# ~270 applets: builtins only, apart from the one ln per link.
declare -A APPLET_DIRS=()
while read -r applet; do
    case "$applet" in
        bin/busybox) continue ;;
        # Our /init is PID 1; busybox's init/linuxrc would only confuse.
        sbin/init | linuxrc) continue ;;
    esac
    dir=${applet%/*}
    if [[ $dir != "$applet" && -z ${APPLET_DIRS[$dir]:-} ]]; then
        mkdir -p "$STAGE/$dir"
        APPLET_DIRS[$dir]=1
    fi
    ln -sfn /bin/busybox "$STAGE/$applet"
done < <("$BUSYBOX" --list-full)
# /bin/sh is bash, not busybox's ash: agents write bash (arrays, [[ ]],
# pipefail), and ash runs its own applets before looking at PATH, so a
# broken applet could not be mended by a script in /usr/bin. busybox wget
# crashes on -T here; the wrapper mends that (see the script).
install -m 0755 "$BASH_STATIC" "$STAGE"/bin/bash
ln -sfn bash "$STAGE"/bin/sh
rm -f "$STAGE"/usr/bin/wget
install -m 0755 "$(dirname "$SCRIPT")/wget-wrapper.sh" "$STAGE"/usr/bin/wget

: >"$STAGE"/etc/airlock/modules
for path in "${ORDERED[@]}"; do
    src=$MODROOT/$path
    rel=$KVER/${path%.ko*}.ko
    mkdir -p "$STAGE/lib/modules/$(dirname "$rel")"
    # finit_module wants plain ELF (the init passes no decompress flag).
    case "$path" in
        *.ko) install -m 0644 "$src" "$STAGE/lib/modules/$rel" ;;
        *.ko.xz) xz -dc "$src" >"$STAGE/lib/modules/$rel" ;;
        *.ko.zst) zstd -dcq "$src" >"$STAGE/lib/modules/$rel" ;;
        *.ko.gz) gzip -dc "$src" >"$STAGE/lib/modules/$rel" ;;
        *) die "unknown module format: $path" ;;
    esac
    printf '%s\n' "$rel" >>"$STAGE"/etc/airlock/modules
done

printf '%s\n' 'root:x:0:0:root:/root:/bin/sh' 'user:x:1000:1000:user:/home/user:/bin/sh' \
    >"$STAGE"/etc/passwd
printf '%s\n' 'root:x:0:' 'user:x:1000:' >"$STAGE"/etc/group
printf '%s\n' airlock >"$STAGE"/etc/hostname
printf '%s\n' '127.0.0.1 localhost airlock' '::1 localhost' >"$STAGE"/etc/hosts

find "$STAGE" -mindepth 1 -type d -exec chmod go+rx {} +
find "$STAGE" -mindepth 1 -type f -exec chmod go+r {} +
chmod 0700 "$STAGE"/root
chmod 0600 "$STAGE"/dev/console
find "$STAGE" -exec touch -h -d "@$ARCHIVE_EPOCH" {} +

# ---------------------------------------------------------------- archive

# Sorted names, fixed mtimes, renumbered inodes, no gzip name/time: the
# same inputs give the same bytes, so the digest identifies the content.
# "." stays in: the kernel applies its mode to /, which would otherwise
# keep rootfs's default 1777 and let any user litter the root directory.
INITRD_TMP=$(mktemp "$DEST/.initramfs.tmp.XXXXXX")
(cd "$STAGE" && find . | sort |
    cpio --quiet --reproducible -o -H newc) | gzip -n -6 >"$INITRD_TMP"

KERNEL_TMP=$(mktemp "$DEST/.vmlinuz.tmp.XXXXXX")
cp "$VMLINUZ" "$KERNEL_TMP"

chmod 0644 "$INITRD_TMP" "$KERNEL_TMP"
mv -f "$KERNEL_TMP" "$DEST/vmlinuz"
mv -f "$INITRD_TMP" "$DEST/initramfs.cpio.gz"

DIGEST="sha256:$(printf '%s%s' "$(sha "$DEST/vmlinuz")" "$(sha "$DEST/initramfs.cpio.gz")" |
    sha256sum | cut -d' ' -f1)"

META_TMP=$(mktemp "$DEST/.meta.tmp.XXXXXX")
cat >"$META_TMP" <<EOF
{
  "name": "minimal",
  "kernel": "vmlinuz",
  "initrd": "initramfs.cpio.gz",
  "cmdline": "$CMDLINE",
  "vcpus": $VCPUS,
  "memory_mib": $MEMORY_MIB,
  "kernel_version": "$KVER",
  "digest": "$DIGEST"
}
EOF
chmod 0644 "$META_TMP"
mv -f "$META_TMP" "$DEST/template.json"

META_TMP=$(mktemp "$DEST/.meta.tmp.XXXXXX")
printf '%s\n' "$DIGEST" >"$META_TMP"
chmod 0644 "$META_TMP"
mv -f "$META_TMP" "$DEST/DIGEST"

# Written last: an interrupted build never looks up to date.
printf '%s\n' "$INPUTS" "kernel=$KPKG $KDEB_VERSION" >"$STAMP"
chmod 0644 "$STAMP"

log "kernel $KVER, $(wc -l <"$STAGE"/etc/airlock/modules) modules, initramfs $(stat -c %s "$DEST/initramfs.cpio.gz") bytes"
log "$DIGEST"
