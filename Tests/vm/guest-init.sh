#!/bin/sh
# /init of the rig's initramfs (busybox ash, PID 1 in the guest). prepare.sh copies it in;
# run.sh tells it what to do through files in the control share (tag "capfleet_ctl"):
#   config   shell assignments: VIVID_PARAMS, SHARE_DIR, VERBOSE
#   job.sh   the bash script that runs the command inside the chroot
# and gets back: started (guest uptime when the command began), rc (its exit code),
# error (why the rig itself failed, if it did).
# Everything here logs to the console (ttyS0): shown by run.sh --verbose or on failure.

export PATH=/bin
ctl=/ctl
root=/mnt/root

log() { echo "guest-init: $*" >/dev/console; }

# Power off at the end whatever happens; if the init itself died the kernel would
# panic, and panic=-1 plus qemu's -no-reboot turn that into a qemu exit too.
finish() {
    sync
    poweroff -f
    sleep 5
}

# A failure of the rig (not of the command): tell run.sh why, then power off.
fail() {
    log "ERROR: $*"
    [ -d "$ctl" ] && echo "$*" >"$ctl/error"
    finish
}

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev

# virtio, 9p and virtio-net are modules in Debian's kernel; load them in the order that
# prepare.sh got from modprobe --show-depends. vivid's own dependencies load meanwhile
# (each insmod takes ~50 ms under TCG); vivid itself waits for its parameters. ALSA's
# loopback card (snd-aloop: card id Loopback, two PCM devices, what is played into one's
# substream N is captured from the other's) comes up with them.
(
    while read -r mod; do
        [ "$mod" = vivid.ko ] && continue
        insmod "/lib/modules/$mod" || { log "insmod $mod failed"; exit 1; }
    done </etc/modules.vivid
    if [ -f /etc/modules.sound ]; then
        while read -r mod; do
            # A module already loaded for vivid (soundcore, snd-timer) is fine.
            [ -d "/sys/module/$(echo "${mod%.ko}" | tr - _)" ] && continue
            insmod "/lib/modules/$mod" || { log "insmod $mod failed"; exit 1; }
        done </etc/modules.sound
    fi
) &
vivid_deps=$!
while read -r mod; do
    insmod "/lib/modules/$mod" || fail "insmod $mod failed"
done </etc/modules.base

mkdir -p "$ctl"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 capfleet_ctl "$ctl" \
    || fail "cannot mount the control share"
[ -f "$ctl/config" ] || fail "no config in the control share"
. "$ctl/config"

wait "$vivid_deps" || fail "loading vivid's dependencies failed: $(dmesg | tail -n 3)"
# shellcheck disable=SC2086 # word splitting of the parameters is wanted
insmod /lib/modules/vivid.ko $VIVID_PARAMS \
    || fail "insmod vivid.ko $VIVID_PARAMS failed: $(dmesg | grep -i vivid | tail -n 3)"
[ -e /dev/video0 ] || fail "vivid loaded but /dev/video0 does not exist"

# Network: slirp's fixed addresses, no DHCP needed. restrict=on on the host side means
# only the guestfwd addresses (10.0.2.100:PORT) lead anywhere.
ip link set lo up
if [ -e /sys/class/net/eth0 ]; then
    ip link set eth0 up
    ip addr add 10.0.2.15/24 dev eth0
    ip route add default via 10.0.2.2
fi
hostname capfleet-vm

# The host's root, read-only; cache=loose because nothing changes it under us during
# a run that matters, and it makes exec and library loading much faster.
mount -t 9p -o ro,trans=virtio,version=9p2000.L,msize=512000,cache=loose hostroot "$root" \
    || fail "cannot mount the host root"
mount -t proc proc "$root/proc"
mount --rbind /sys "$root/sys"
mkdir -p /dev/pts /dev/shm
mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts /dev/pts
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
mount --rbind /dev "$root/dev"
mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
mount -t tmpfs -o mode=755 tmpfs "$root/run"
mkdir -p "$root/run/capfleet-vm"
mount --bind "$ctl" "$root/run/capfleet-vm"
if [ -n "$SHARE_DIR" ]; then
    # Same absolute path as on the host. Under /tmp or /run the mount point is in the
    # fresh tmpfs and has to be made.
    mkdir -p "$root$SHARE_DIR" 2>/dev/null
    mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,cache=mmap capfleet_share "$root$SHARE_DIR" \
        || fail "cannot mount the share at $SHARE_DIR"
fi

# ttyS1/ttyS2 carry the command's stdout/stderr to the host: raw, so bytes pass unchanged.
stty -F /dev/ttyS1 raw -echo
stty -F /dev/ttyS2 raw -echo

cut -d' ' -f1 /proc/uptime >"$ctl/started"
[ "$VERBOSE" = 1 ] && log "starting the command at uptime $(cat "$ctl/started") s"
env -i chroot "$root" /bin/bash /run/capfleet-vm/job.sh </dev/null >/dev/ttyS1 2>/dev/ttyS2
rc=$?
# The last close of ttyS1/ttyS2 above waited for their output to drain.
echo "$rc" >"$ctl/rc"
[ "$VERBOSE" = 1 ] && log "command exited with $rc at uptime $(cut -d' ' -f1 /proc/uptime) s"
finish
