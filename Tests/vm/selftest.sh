#!/usr/bin/env bash
# Self-check of the QEMU + vivid rig: prepares it, then boots the guest a few times and
# checks what a test relies on. Ends with "N passed, N failed"; exits 0 only if all passed.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
cd "$repo"
run=Tests/vm/run.sh

passed=0 failed=0
ok()  { echo "PASS $1"; passed=$((passed + 1)); }
bad() { echo "FAIL $1${2:+: $2}"; failed=$((failed + 1)); }
ms_since() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
t_all=$(date +%s%N)

echo "== prepare"
t=$(date +%s%N)
Tests/vm/prepare.sh
echo "prepare took $(ms_since "$t") ms"

work=$(mktemp -d "${TMPDIR:-/tmp}/capfleet-vm-selftest.XXXXXX")
mkdir "$work/tmp" "$work/share"
# run.sh's temporary directories go under $work, so its QEMU can be told apart from others.
export TMPDIR=$work/tmp
server=
cleanup() {
    if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT
qemu_left() { pgrep -f "qemu-system-x86_64 .*$work/tmp" >/dev/null; }

# A TCP echo server on two free ports of the host's 127.0.0.1; it stops by itself.
python3 - "$work/ports" <<'EOF' &
import signal, socket, socketserver, sys, threading
signal.alarm(600)
class Echo(socketserver.BaseRequestHandler):
    def handle(self):
        while data := self.request.recv(65536):
            self.request.sendall(data)
class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
servers = [Server(("127.0.0.1", 0), Echo) for _ in range(2)]
for s in servers:
    threading.Thread(target=s.serve_forever, daemon=True).start()
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(",".join(str(s.server_address[1]) for s in servers))
import os; os.rename(sys.argv[1] + ".tmp", sys.argv[1])
signal.pause()
EOF
server=$!
for _ in $(seq 50); do [ -s "$work/ports" ] && break; sleep 0.1; done
ports=$(cat "$work/ports")
echo "echo server on 127.0.0.1:{$ports}"

echo "== 1. v4l2-ctl, streaming, TCP through the forward, the share (one boot)"
t=$(date +%s%N)
rc=0
"$run" --share "$work/share" --forward "$ports" --timeout 240 \
    -- Tests/vm/selftest-guest.sh "$ports" "$work/share" 2>&1 | tee "$work/main.log" || rc=$?
echo "this run took $(ms_since "$t") ms"
[ "$rc" = 0 ] && ok "guest checks (exit 0)" || bad "guest checks" "run.sh exited with $rc"
for c in list-devices list-formats stream-30-frames control-disconnect \
         control-percentage_of_dropped_buffers tcp-round-trips restricted-network share-write; do
    grep -q "^CHECK ok $c\$" "$work/main.log" && ok "$c" || bad "$c"
done
[ "$(cat "$work/share/from-guest" 2>/dev/null)" = written-in-guest ] \
    && ok "a file the guest wrote in the share is on the host" || bad "share seen from the host"

echo "== 2. boot to the command (--verbose shows the kernel and the rig's timing)"
t=$(date +%s%N)
rc=0
"$run" --verbose -- true 2>"$work/verbose.log" || rc=$?
total=$(ms_since "$t")
uptime=$(sed -n 's/.*guest uptime \([0-9.]*\) s.*/\1/p' "$work/verbose.log")
echo "run.sh -- true: $total ms in all, the command started at guest uptime ${uptime:-?} s"
[ "$rc" = 0 ] && [ -n "$uptime" ] && grep -q 'Linux version' "$work/verbose.log" \
    && ok "--verbose shows kernel messages" || bad "--verbose" "exit $rc"

echo "== 3. two vivid instances: a webcam and an S-Video input"
rc=0
"$run" --vivid "n_devs=2 node_types=0x1,0x1 num_inputs=1,1 input_types=0x0,0x2" -- bash -c '
    set -e
    ls /dev/video0 /dev/video1
    v4l2-ctl -d /dev/video0 --get-input --list-inputs | grep -q "Type *: 0x00000002 (Camera)"
    v4l2-ctl -d /dev/video0 --list-framesizes YUYV | grep -q Discrete
    v4l2-ctl -d /dev/video1 --list-inputs | grep -q "S-Video"
    v4l2-ctl -d /dev/video1 --info 2>/dev/null | grep -m1 "Bus info"
    v4l2-ctl -d /dev/video1 --set-selection target=crop,left=0,top=0,width=320,height=240
    v4l2-ctl -d /dev/video1 --get-selection target=crop | grep -A1 crop | tr -s " \t\n" " "; echo
    v4l2-ctl -d /dev/video1 --get-selection target=crop | grep -q "Width 320, Height 240"
    v4l2-ctl -d /dev/video1 --stream-mmap --stream-count=3
' >"$work/two.log" 2>&1 || rc=$?
sed 's/^/  /' "$work/two.log"
[ "$rc" = 0 ] && ok "two instances, webcam on video0, cropping S-Video on video1" || bad "two instances" "exit $rc"

echo "== 4. exit code, stdout and stderr kept apart, --env"
rc=0
"$run" --env "GREETING=hello 'quoted' \$world" -- bash -c 'echo "out:$GREETING"; echo err >&2; exit 7' \
    >"$work/out" 2>"$work/err" || rc=$?
[ "$rc" = 7 ] && ok "the command's exit code 7 comes back" || bad "exit code" "got $rc"
[ "$(cat "$work/out")" = "out:hello 'quoted' \$world" ] && ok "stdout and --env" || bad "stdout" "$(cat "$work/out")"
[ "$(cat "$work/err")" = err ] && ok "stderr" || bad "stderr" "$(cat "$work/err")"

echo "== 5. a bad vivid parameter is a rig failure (125) with a message"
rc=0
"$run" --vivid "n_devs=abc" -- true 2>"$work/bad.log" || rc=$?
sed 's/^/  /' "$work/bad.log" | head -n 4
[ "$rc" = 125 ] && grep -q vivid "$work/bad.log" && ok "bad vivid parameters: 125" || bad "bad vivid parameters" "exit $rc"

echo "== 6. --timeout kills the guest (124)"
t=$(date +%s%N)
rc=0
"$run" --timeout 8 -- sleep 600 2>"$work/timeout.log" || rc=$?
took=$(ms_since "$t")
sed 's/^/  /' "$work/timeout.log" | head -n 2
[ "$rc" = 124 ] && [ "$took" -lt 20000 ] && ! qemu_left && ok "timeout: 124 after $took ms, no QEMU left" \
    || bad "timeout" "exit $rc after $took ms"

echo "== 7. SIGTERM to run.sh kills the guest (143)"
"$run" -- sleep 600 2>"$work/term.log" &
pid=$!
sleep 5
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
sleep 0.5
[ "$rc" = 143 ] && ! qemu_left && ok "SIGTERM: 143, no QEMU left" || bad "SIGTERM" "exit $rc"

echo "== facts the guest reported"
sed 's/^/  /' "$work/share/facts" 2>/dev/null || true
echo "selftest took $(ms_since "$t_all") ms"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
