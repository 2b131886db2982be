#!/usr/bin/env bash
# Prepares the QEMU test rig in .build-vm/ (at the repository root):
#   - downloads Debian's current linux-image-*-amd64 package (not installed, only unpacked),
#   - extracts the uncompressed vmlinux from its vmlinuz (QEMU boots it via its PVH entry,
#     about twice as fast as the bzImage under TCG),
#   - builds a busybox initramfs with vivid, snd-aloop, virtio, 9p and virtio-net modules and
#     Tests/vm/guest-init.sh as /init.
# Idempotent: everything is cached per kernel package and version; the initramfs is also
# rebuilt when guest-init.sh or this script change. A second run takes well under a second.
#
# Environment: CAPFLEET_VM_DIR (default <repo>/.build-vm),
#              CAPFLEET_VM_KERNEL_PKG (default: what linux-image-amd64 depends on).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
out=${CAPFLEET_VM_DIR:-$repo/.build-vm}

say() { echo "prepare.sh: $*"; }
die() { echo "prepare.sh: error: $*" >&2; exit 1; }

# Every tool with the Debian package that provides it, so a failure says what to install.
need() { command -v "$1" >/dev/null 2>&1 || die "'$1' not found; install it: apt-get install $2"; }
need apt-get apt
need apt-cache apt
need dpkg-deb dpkg
need depmod kmod
need modprobe kmod
need cpio cpio
need python3 python3
need xz xz-utils
need qemu-system-x86_64 qemu-system-x86
need socat socat
# The initramfs needs the statically linked busybox; the plain "busybox" package is dynamic.
[ "$(dpkg-query -W -f='${Status}' busybox-static 2>/dev/null)" = "install ok installed" ] \
    || die "busybox-static is not installed; install it: apt-get install busybox-static"
busybox=/bin/busybox

# Two prepare.sh at once (parallel CI jobs) would build into the same directory.
mkdir -p "$out"
exec 9>"$out/.lock"
flock 9

# --- which kernel ----------------------------------------------------------------------
resolve_pkg() {
    if [ -n "${CAPFLEET_VM_KERNEL_PKG:-}" ]; then
        pkg=$CAPFLEET_VM_KERNEL_PKG
        ver=$(apt-cache policy "$pkg" 2>/dev/null | awk '$1 == "Candidate:" { print $2; exit }')
    else
        # The metapackage pins the real package's exact version: one apt-cache call (~0.7 s).
        read -r pkg ver < <(apt-cache show --no-all-versions linux-image-amd64 2>/dev/null \
            | sed -n 's/^Depends:.*\(linux-image-[0-9][^ ,]*\) (= \([^)]*\)).*/\1 \2/p' | head -n 1) || true
    fi
    [ -n "${pkg:-}" ] && [ -n "${ver:-}" ] && [ "$ver" != "(none)" ]
}
if ! resolve_pkg; then
    if [ -e "$out/current/vmlinux" ] && [ -z "${CAPFLEET_VM_KERNEL_PKG:-}" ]; then
        # Offline or no apt lists: keep using what was prepared before.
        say "apt does not know linux-image-amd64 (no apt lists?); using the cached $(readlink "$out/current")"
        pkg='' ver=''
    elif [ "$(id -u)" = 0 ]; then
        say "apt lists are missing; running apt-get update"
        apt-get update -qq
        resolve_pkg || die "apt cannot resolve ${CAPFLEET_VM_KERNEL_PKG:-linux-image-amd64} even after apt-get update"
    else
        die "apt cannot resolve linux-image-amd64; run 'apt-get update' (as root) first"
    fi
fi

if [ -n "$pkg" ]; then
    kver=${pkg#linux-image-}          # the kernel's uname -r, e.g. 6.1.0-56-amd64
    dir=$out/$pkg-${ver//[:~]/_}
else
    dir=$(readlink -f "$out/current")
    kver=$(cat "$dir/kernel-release")
fi
mkdir -p "$dir"

# --- kernel package ----------------------------------------------------------------------
deb=$(find "$dir" -maxdepth 1 -name 'linux-image-*.deb' | head -n 1)
if [ -z "$deb" ]; then
    say "downloading $pkg=$ver"
    # As root apt would warn that its _apt sandbox user cannot write here; stay root.
    (cd "$dir" && apt-get download -q -o APT::Sandbox::User=root "$pkg=$ver" >/dev/null) \
        || die "apt-get download $pkg=$ver failed"
    deb=$(find "$dir" -maxdepth 1 -name 'linux-image-*.deb' | head -n 1)
    [ -n "$deb" ] || die "apt-get download left no .deb in $dir"
fi
echo "$kver" >"$dir/kernel-release"

# The unpacked package (~400 MB) is only needed while building; removed at the end.
tree=$dir/unpacked
unpack() {
    [ -d "$tree/lib/modules/$kver" ] && return
    say "unpacking $(basename "$deb")"
    rm -rf "$tree"
    dpkg-deb -x "$deb" "$tree"
    [ -d "$tree/lib/modules/$kver" ] || die "$deb has no lib/modules/$kver"
}

# --- vmlinux -----------------------------------------------------------------------------
if [ ! -s "$dir/vmlinux" ]; then
    unpack
    say "extracting vmlinux from vmlinuz-$kver"
    python3 - "$tree/boot/vmlinuz-$kver" "$dir/vmlinux.tmp" <<'EOF'
# The bzImage's setup header says where the compressed kernel is (payload_offset/length,
# boot protocol >= 2.08); its magic bytes say how it is compressed.
import gzip, lzma, struct, subprocess, sys
src, dst = sys.argv[1], sys.argv[2]
img = open(src, "rb").read()
if img[0x202:0x206] != b"HdrS":
    sys.exit(f"{src}: not a bzImage")
setup_sects = img[0x1F1] or 4
off, length = struct.unpack_from("<II", img, 0x248)
payload = img[(setup_sects + 1) * 512 + off:][:length]
if payload.startswith(b"\xfd7zXZ\x00"):
    data = lzma.LZMADecompressor().decompress(payload)      # stops at the stream's end
elif payload.startswith(b"\x28\xb5\x2f\xfd"):
    try:
        data = subprocess.run(["zstd", "-dc"], input=payload, stdout=subprocess.PIPE, check=True).stdout
    except FileNotFoundError:
        sys.exit("the kernel is zstd-compressed and zstd is missing: apt-get install zstd")
elif payload.startswith(b"\x1f\x8b"):
    data = gzip.GzipFile(fileobj=__import__("io").BytesIO(payload)).read()
else:
    sys.exit(f"{src}: unknown compression, payload starts with {payload[:6].hex()}")
if data[:4] != b"\x7fELF" or data[4] != 2:
    sys.exit(f"{src}: the payload is not a 64-bit ELF")
# QEMU's -kernel boots an ELF only through the PVH entry: a Xen ELF note of type 18
# (XEN_ELFNOTE_PHYS32_ENTRY) in a PT_NOTE segment.
phoff, = struct.unpack_from("<Q", data, 0x20)
phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
pvh = False
for i in range(phnum):
    p_type, _, p_offset, _, _, p_filesz = struct.unpack_from("<IIQQQQ", data, phoff + i * phentsize)
    if p_type != 4:
        continue
    pos, end = p_offset, p_offset + p_filesz
    while pos + 12 <= end:
        namesz, descsz, ntype = struct.unpack_from("<III", data, pos)
        name = data[pos + 12:pos + 12 + namesz].rstrip(b"\0")
        pvh |= name == b"Xen" and ntype == 18
        pos += 12 + (namesz + 3) // 4 * 4 + (descsz + 3) // 4 * 4
if not pvh:
    sys.exit(f"{src}: the extracted vmlinux has no PVH entry note; QEMU cannot boot it")
open(dst, "wb").write(data)
print(f"prepare.sh: vmlinux is {len(data) >> 20} MiB, with a PVH entry")
EOF
    mv "$dir/vmlinux.tmp" "$dir/vmlinux"
fi

# --- initramfs ---------------------------------------------------------------------------
base_mods="virtio_pci virtio_net 9pnet_virtio 9p"   # loaded first, before the control share
vivid_mods="vivid"                                  # loaded with run.sh's --vivid parameters
sound_mods="snd-aloop"                              # ALSA's loopback card, for the microphone tests
# The recipe's fingerprint: rebuild when the init or this script change.
recipe=$(cat "$here/guest-init.sh" "${BASH_SOURCE[0]}" "$busybox" | sha256sum | cut -c1-16)
if [ "$(cat "$dir/initramfs.recipe" 2>/dev/null)" != "$recipe" ] || [ ! -s "$dir/initramfs.cpio" ]; then
    unpack
    say "building the initramfs (busybox, modules for: $base_mods $vivid_mods $sound_mods)"
    # The package ships no modules.dep (its postinst runs depmod); make one in the tree.
    depmod -b "$tree" "$kver"
    stage=$dir/initramfs.stage
    rm -rf "$stage"
    mkdir -p "$stage"/{bin,dev,proc,sys,etc,mnt/root,lib/modules}
    cp "$busybox" "$stage/bin/busybox"
    for applet in $("$busybox" --list); do
        [ "$applet" = busybox ] || ln -s busybox "$stage/bin/$applet"
    done
    cp "$here/guest-init.sh" "$stage/init"
    chmod 755 "$stage/init"
    # Module load order from modprobe itself (dependencies first, each once), as flat
    # file names; compressed modules are decompressed because busybox insmod can't.
    add_mods() {  # list-file module...
        local list=$1 line path name
        shift
        for m in "$@"; do
            modprobe -d "$tree" -S "$kver" --show-depends "$m" || die "modprobe cannot resolve $m"
        done | while read -r line; do
            case $line in
                insmod\ *) path=$(echo "$line" | awk '{print $2}') ;;
                builtin\ *) continue ;;
                *) die "unexpected modprobe output: $line" ;;
            esac
            name=$(basename "$path"); name=${name%.xz}; name=${name%.zst}; name=${name%.gz}
            [ -e "$stage/lib/modules/$name" ] && continue
            case $path in
                *.xz) xz -dc "$path" >"$stage/lib/modules/$name" ;;
                *.zst) zstd -qdc "$path" >"$stage/lib/modules/$name" ;;
                *.gz) gzip -dc "$path" >"$stage/lib/modules/$name" ;;
                *) cp "$path" "$stage/lib/modules/$name" ;;
            esac
            echo "$name"
        done >"$list"
    }
    add_mods "$stage/etc/modules.base" $base_mods
    add_mods "$stage/etc/modules.vivid" $vivid_mods
    grep -qx vivid.ko "$stage/etc/modules.vivid" || die "vivid.ko is not in $pkg"
    add_mods "$stage/etc/modules.sound" $sound_mods
    grep -qx snd-aloop.ko "$stage/etc/modules.sound" || die "snd-aloop.ko is not in $pkg"
    echo "$kver" >"$stage/etc/kernel-release"
    # Uncompressed: the guest unpacks it faster than it could decompress it under TCG.
    (cd "$stage" && find . | LC_ALL=C sort | cpio --quiet -o -H newc -R 0:0) >"$dir/initramfs.cpio.tmp"
    mv "$dir/initramfs.cpio.tmp" "$dir/initramfs.cpio"
    echo "$recipe" >"$dir/initramfs.recipe"
    say "initramfs: $(du -k "$dir/initramfs.cpio" | cut -f1) KiB, $(wc -l <"$stage/etc/modules.base") + $(wc -l <"$stage/etc/modules.vivid") + $(wc -l <"$stage/etc/modules.sound") modules"
    rm -rf "$stage"
fi

# --- done --------------------------------------------------------------------------------
rm -rf "$tree"
ln -sfn "$(basename "$dir")" "$out/current"
# Other kernels' caches are dead weight once this one is complete.
for old in "$out"/linux-image-*; do
    [ "$old" = "$dir" ] || [ ! -d "$old" ] || { say "removing the old $(basename "$old")"; rm -rf "$old"; }
done
say "ready: kernel $kver ($(basename "$dir")) in $out/current"
