#!/usr/bin/env bash
# Runs one host-built command as root inside a QEMU guest (TCG) that has the vivid virtual
# V4L2 camera driver loaded, and exits with the command's exit code.
# The guest sees the host's root read-only (chroot), so host binaries run unchanged; see
# Tests/vm/README.md. Needs Tests/vm/prepare.sh to have run.
set -euo pipefail
# A parent may hand us a blocked signal mask (Foundation's Process blocks nearly every
# signal in its children); bash's `wait` then never hears SIGCHLD and hangs until the
# timeout. Start again with an empty mask.
if [ -z "${CAPFLEET_RUN_SIGMASK_CLEARED:-}" ]; then
    export CAPFLEET_RUN_SIGMASK_CLEARED=1
    exec perl -e 'use POSIX; sigprocmask(SIG_SETMASK, POSIX::SigSet->new) or die; exec @ARGV or die "exec: $!"' -- "$BASH" "$0" "$@"
fi

usage() {
    cat <<'EOF'
usage: Tests/vm/run.sh [options] -- COMMAND [ARGS...]
  --vivid "PARAMS"      vivid module parameters (default: "n_devs=1 node_types=0x1")
  --share DIR           host directory mounted read-write at the same path in the guest
  --forward PORT[,PORT...]
                        guest's 10.0.2.100:PORT reaches host 127.0.0.1:PORT (repeatable);
                        the command gets CAPFLEET_HOST_ADDR=10.0.2.100
  --timeout SECONDS     kill the guest after this long, boot included (default 300)
  --env NAME=VALUE      set in the command's environment (repeatable)
  --cpus N              guest vCPUs (default 2, or $CAPFLEET_VM_CPUS)
  --memory MIB          guest RAM (default 1024)
  --verbose             show the guest kernel's messages and the rig's own on stderr
exit: COMMAND's exit code; 124 timeout; 125 the rig failed (usage, not prepared,
      qemu or guest boot failure); 130/143 interrupted by SIGINT/SIGTERM.
EOF
}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
vmdir=${CAPFLEET_VM_DIR:-$repo/.build-vm}/current
host_addr=10.0.2.100

die() { echo "run.sh: error: $*" >&2; exit 125; }

vivid="n_devs=1 node_types=0x1"
share=
ports=()
timeout=300
envs=()
cpus=${CAPFLEET_VM_CPUS:-2}
memory=1024
verbose=0
while [ $# -gt 0 ]; do
    case $1 in
        --vivid) [ $# -ge 2 ] || die "--vivid needs a value"; vivid=$2; shift 2 ;;
        --share) [ $# -ge 2 ] || die "--share needs a directory"; share=$2; shift 2 ;;
        --forward)
            [ $# -ge 2 ] || die "--forward needs ports"
            IFS=, read -r -a more <<<"$2"
            for p in "${more[@]}"; do
                [[ $p =~ ^[0-9]+$ ]] && [ "$p" -ge 1 ] && [ "$p" -le 65535 ] || die "bad port '$p'"
                ports+=("$p")
            done
            shift 2 ;;
        --timeout)
            [ $# -ge 2 ] && [[ $2 =~ ^[0-9]+$ ]] && [ "$2" -gt 0 ] || die "--timeout needs a number of seconds"
            timeout=$2; shift 2 ;;
        --env)
            [ $# -ge 2 ] && [[ $2 =~ ^[A-Za-z_][A-Za-z0-9_]*= ]] || die "--env needs NAME=VALUE"
            envs+=("$2"); shift 2 ;;
        --cpus) [ $# -ge 2 ] && [[ $2 =~ ^[1-9][0-9]*$ ]] || die "--cpus needs a number"; cpus=$2; shift 2 ;;
        --memory) [ $# -ge 2 ] && [[ $2 =~ ^[1-9][0-9]*$ ]] || die "--memory needs MiB"; memory=$2; shift 2 ;;
        --verbose) verbose=1; shift ;;
        -h|--help) usage; exit 0 ;;
        --) shift; break ;;
        *) usage >&2; die "unknown option '$1' (the command goes after --)" ;;
    esac
done
[ $# -gt 0 ] || { usage >&2; die "no command given"; }

[ -s "$vmdir/vmlinux" ] && [ -s "$vmdir/initramfs.cpio" ] \
    || die "the rig is not prepared: run Tests/vm/prepare.sh first"
command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 not found: apt-get install qemu-system-x86"
if [ ${#ports[@]} -gt 0 ]; then
    socat=$(command -v socat) || die "socat not found: apt-get install socat"
fi
if [ -n "$share" ]; then
    [ -d "$share" ] || die "--share $share is not a directory"
    share=$(realpath "$share")
    [ "$share" != / ] || die "--share / is not allowed"
fi

# QEMU's option syntax: a comma inside a value is written as two.
qv() { printf '%s' "${1//,/,,}"; }
# Single-quote a value for the guest's busybox sh.
sq() { printf "'%s'" "${1//\'/\'\\\'\'}"; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/capfleet-vm.XXXXXX")
ctl=$tmp/ctl     # exported to the guest as the control share
mkdir "$ctl"
qpid='' spid='' readers=()

# Waits for the readers to pass on everything; QEMU must be gone. A reader whose FIFO
# QEMU never opened is still blocked in open(): opening the FIFO ourselves (read-write
# never blocks) gives it its end of file.
stop_readers() {
    local f fd
    [ ${#readers[@]} -gt 0 ] || return 0
    for f in console stdout stderr; do
        exec {fd}<>"$tmp/$f"
        exec {fd}>&-
    done
    wait "${readers[@]}" 2>/dev/null || true
    readers=()
}
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
    set +e   # an error here must not replace the exit status we are leaving with
    if [ -n "$qpid" ]; then kill -KILL "$qpid" 2>/dev/null; wait "$qpid" 2>/dev/null; fi
    if [ -n "$spid" ]; then kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null; fi
    stop_readers
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'echo "run.sh: interrupted (SIGINT); killing the guest" >&2; exit 130' INT
trap 'echo "run.sh: terminated (SIGTERM); killing the guest" >&2; exit 143' TERM

# --- what the guest does -----------------------------------------------------------------
{
    echo "VIVID_PARAMS=$(sq "$vivid")"
    echo "SHARE_DIR=$(sq "$share")"
    echo "VERBOSE=$verbose"
} >"$ctl/config"
# Run by the host's /bin/bash inside the chroot, with an empty environment to start from.
{
    echo 'export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
    echo 'export HOME=/root LANG=C.UTF-8'
    echo "export CAPFLEET_HOST_ADDR=$host_addr"
    for e in "${envs[@]}"; do
        printf 'export %s=%q\n' "${e%%=*}" "${e#*=}"
    done
    # The same working directory as on the host when the guest has it (not under /tmp).
    printf 'cd %q 2>/dev/null || cd /\n' "$PWD"
    printf 'exec'
    printf ' %q' "$@"
    echo
} >"$ctl/job.sh"

# --- how the guest's serial ports reach us ---------------------------------------------
# ttyS0 is the kernel console, ttyS1 the command's stdout, ttyS2 its stderr. Each goes
# through a FIFO read by a child of ours that writes to our own stdout/stderr: QEMU's
# file chardev would reopen /dev/stdout and truncate or overwrite a redirected log.
mkfifo "$tmp/console" "$tmp/stdout" "$tmp/stderr"
if [ "$verbose" = 1 ]; then
    tee "$tmp/console.log" <"$tmp/console" >&2 & readers+=($!)
else
    cat <"$tmp/console" >"$tmp/console.log" & readers+=($!)
fi
cat <"$tmp/stdout" & readers+=($!)
cat <"$tmp/stderr" >&2 & readers+=($!)


# --- the guest ---------------------------------------------------------------------------
if [ "$verbose" = 1 ]; then
    cmdline="console=ttyS0 loglevel=6"
else
    cmdline="console=ttyS0 quiet loglevel=1"
fi
# panic=-1 with -no-reboot: a dying guest ends QEMU instead of hanging until the timeout.
cmdline+=" panic=-1 rdinit=/init mitigations=off"

netdev="user,id=net0,restrict=on"
for p in "${ports[@]}"; do
    # One socat per connection (the cmd: form); a chardev guestfwd takes a single one.
    netdev+=",guestfwd=tcp:$host_addr:$p-cmd:$socat - TCP:127.0.0.1:$p"
done

# shellcheck disable=SC2054 # the commas are inside QEMU option values
qemu=(
    qemu-system-x86_64
    -nodefaults -no-user-config -display none -no-reboot
    -machine q35,accel=tcg -cpu max -smp "$cpus" -m "$memory"
    -kernel "$vmdir/vmlinux" -initrd "$vmdir/initramfs.cpio" -append "$cmdline"
    -chardev "file,id=con,path=$(qv "$tmp")/console" -serial chardev:con
    -chardev "file,id=out,path=$(qv "$tmp")/stdout" -serial chardev:out
    -chardev "file,id=err,path=$(qv "$tmp")/stderr" -serial chardev:err
    # multidevs=remap: /work, /opt etc. may be other file systems on the host.
    -virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap"
    -virtfs "local,path=$(qv "$ctl"),mount_tag=capfleet_ctl,security_model=none,multidevs=remap"
    -netdev "$netdev" -device virtio-net-pci,netdev=net0,romfile=
)
if [ -n "$share" ]; then
    qemu+=(-virtfs "local,path=$(qv "$share"),mount_tag=capfleet_share,security_model=none,multidevs=remap")
fi

start=$(date +%s%N)
# --pdeathsig: QEMU dies with us even if we are SIGKILLed and cannot clean up.
setpriv --pdeathsig KILL -- "${qemu[@]}" </dev/null >&2 & qpid=$!
setpriv --pdeathsig KILL -- sleep "$timeout" >/dev/null 2>&1 & spid=$!
finished=
wait -n -p finished "$qpid" "$spid" || true
end=$(date +%s%N)

timed_out=0
if [ "$finished" = "$spid" ]; then
    timed_out=1
    spid=
    kill -KILL "$qpid" 2>/dev/null || true
fi
qemu_status=0
wait "$qpid" 2>/dev/null || qemu_status=$?   # 2>/dev/null: no "Killed" job notice
qpid=
if [ -n "$spid" ]; then kill "$spid" 2>/dev/null || true; wait "$spid" 2>/dev/null || true; spid=; fi
stop_readers

show_console() {
    [ "$verbose" = 1 ] || [ ! -s "$tmp/console.log" ] && return
    echo "run.sh: last lines of the guest console:" >&2
    tail -n 25 "$tmp/console.log" | sed 's/^/  | /' >&2
}
if [ "$timed_out" = 1 ]; then
    echo "run.sh: TIMEOUT: the guest ran for more than $timeout s and was killed" >&2
    show_console
    exit 124
fi
if [ -f "$ctl/rc" ]; then
    rc=$(cat "$ctl/rc")
    if [ "$verbose" = 1 ]; then
        echo "run.sh: the command started at guest uptime $(cat "$ctl/started") s and exited with $rc; $(( (end - start) / 1000000 )) ms in all" >&2
    fi
    exit "$rc"
fi
if [ -f "$ctl/error" ]; then
    echo "run.sh: the guest could not set up: $(cat "$ctl/error")" >&2
elif [ -f "$ctl/started" ]; then
    echo "run.sh: the guest stopped while the command ran (kernel panic?); qemu exited with $qemu_status" >&2
else
    echo "run.sh: the guest failed to boot; qemu exited with $qemu_status" >&2
fi
show_console
exit 125
