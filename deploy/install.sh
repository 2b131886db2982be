#!/usr/bin/env bash
# Installs CaptureFleet on a Debian host without the package (which is the simpler way:
# scripts/build-deb.sh, then `apt install ./capfleet_*.deb`). Puts the binary in
# PREFIX/bin, its manual pages in PREFIX/share/man and its bash, zsh and fish completions under
# PREFIX/share, the systemd units in /etc/systemd/system (pointing at that binary), the annotated
# settings in /etc/capfleet (never over ones already there), and adds the capfleet system user.
#
#   deploy/install.sh [--binary PATH] [--prefix DIR] [--root DIR] [--enable coordinator|agent]...
#
# --binary   default .build/release/capfleet (build it with `swift build -c release
#            --product capfleet --static-swift-stdlib`, so the host needs no Swift toolchain)
# --prefix   default /usr/local
# --root     install into DIR as if it were / (for images and tests): no user is added and
#            systemd is not touched
# --enable   then `systemctl enable --now capfleet-coordinator` (or -agent); repeatable
set -euo pipefail
cd "$(dirname "$0")/.."

binary=.build/release/capfleet prefix=/usr/local root="" enable=()
die() { echo "install.sh: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
    case $1 in
        --binary) binary=${2:?}; shift 2 ;;
        --prefix) prefix=${2:?}; shift 2 ;;
        --root) root=${2:?}; shift 2 ;;
        --enable)
            case ${2:-} in coordinator | agent) enable+=("capfleet-$2") ;; *) die "--enable takes coordinator or agent" ;; esac
            shift 2 ;;
        -h | --help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown argument $1 (see --help)" ;;
    esac
done
[ -x "$binary" ] || die "no binary at $binary: swift build -c release --product capfleet --static-swift-stdlib"
[ -n "$root" ] || [ "$(id -u)" -eq 0 ] || die "run as root (or give --root DIR)"
if [ -z "$root" ] && ldd "$binary" | grep -q 'libswiftCore.*not found'; then
    die "$binary needs the Swift runtime, which this host lacks: build it with --static-swift-stdlib"
fi

install -D -m 0755 "$binary" "$root$prefix/bin/capfleet"
echo "binary    $root$prefix/bin/capfleet ($("$binary" --version))"
scripts/install-manual-and-completions.sh "$binary" "$root" "$prefix"
for unit in capfleet-coordinator capfleet-agent; do
    mkdir -p "$root/etc/systemd/system"
    sed "s#/usr/bin/capfleet#$prefix/bin/capfleet#g" "deploy/systemd/$unit.service" >"$root/etc/systemd/system/$unit.service"
    chmod 0644 "$root/etc/systemd/system/$unit.service"
    echo "unit      $root/etc/systemd/system/$unit.service"
done
mkdir -p "$root/etc/capfleet"
for conf in coordinator agent; do
    target="$root/etc/capfleet/$conf.conf"
    if [ -e "$target" ]; then
        install -m 0644 "deploy/$conf.conf" "$target.example"
        echo "settings  $target kept; the new example is $target.example"
    else
        install -m 0644 "deploy/$conf.conf" "$target"
        echo "settings  $target"
    fi
done

if [ -z "$root" ]; then
    if ! getent passwd capfleet >/dev/null; then
        adduser --system --group --home /var/lib/capfleet --no-create-home --gecos "CaptureFleet" --quiet capfleet
        echo "user      capfleet (system)"
    fi
    # The settings may hold an enrollment token: root and the service only.
    chgrp capfleet "$root/etc/capfleet/coordinator.conf" "$root/etc/capfleet/agent.conf"
    chmod 0640 "$root/etc/capfleet/coordinator.conf" "$root/etc/capfleet/agent.conf"
    if [ -d /run/systemd/system ]; then
        systemctl daemon-reload
        for unit in "${enable[@]}"; do systemctl enable --now "$unit"; echo "enabled   $unit"; done
    elif [ ${#enable[@]} -gt 0 ]; then
        echo "systemd is not running here: start ${enable[*]} yourself" >&2
    fi
fi
