#!/usr/bin/env bash
# The guest side of selftest.sh: runs inside the rig (bash of the host, in the chroot).
# Usage: selftest-guest.sh ECHO_PORT[,ECHO_PORT...] RESULT_DIR
# Prints what it sees; "CHECK ok|FAIL name" lines are what selftest.sh counts. Facts it
# only reports go to RESULT_DIR/facts.
set -uo pipefail
IFS=, read -r -a ports <<<"$1"
results=$2
status=0
check() {  # name command...
    local name=$1
    shift
    if "$@"; then echo "CHECK ok $name"; else echo "CHECK FAIL $name"; status=1; fi
}
fact() { echo "$1: $2" | tee -a "$results/facts"; }

echo "== v4l2-ctl --list-devices"
check list-devices v4l2-ctl --list-devices
echo "== v4l2-ctl -d /dev/video0 --list-formats-ext | head"
# Without pipefail: head closing the pipe early is not a failure.
check list-formats bash -c 'v4l2-ctl -d /dev/video0 --list-formats-ext | head; s=${PIPESTATUS[0]}; [ $s -eq 0 ] || [ $s -eq 141 ]'
echo "== v4l2-ctl -d /dev/video0 --stream-mmap --stream-count=30"
# The webcam input defaults to 640x360 at 5 fps: 30 fps makes this take 1 s instead of 6.
v4l2-ctl -d /dev/video0 --set-parm=30 >/dev/null
start=$(date +%s%N)
check stream-30-frames v4l2-ctl -d /dev/video0 --stream-mmap --stream-count=30
echo
fact "stream 30 frames took (ms)" $(( ($(date +%s%N) - start) / 1000000 ))

echo "== facts"
fact "/dev/v4l/by-id" "$([ -e /dev/v4l/by-id ] && ls /dev/v4l/by-id | tr '\n' ' ' || echo absent)"
fact "/dev/v4l/by-path" "$([ -e /dev/v4l/by-path ] && ls /dev/v4l/by-path | tr '\n' ' ' || echo absent)"
fact "VIDIOC_QUERYCAP driver / card / bus_info" "$(v4l2-ctl -d /dev/video0 -D | sed -n '1,/^Media/ s/^\t\(Driver name\|Card type\|Bus info\) *: //p' | paste -sd/ | sed 's|/| / |g')"
fact "sysfs name of video0" "$(cat /sys/class/video4linux/video0/name)"
fact "sysfs device of video0" "$(readlink -f /sys/class/video4linux/video0/device)"
controls=$(v4l2-ctl -d /dev/video0 -L)
check control-disconnect grep -q '^ *disconnect ' <<<"$controls"
check control-percentage_of_dropped_buffers grep -q '^ *percentage_of_dropped_buffers ' <<<"$controls"
fact "disconnect control" "$(grep '^ *disconnect ' <<<"$controls" | sed 's/^ *//')"
fact "percentage_of_dropped_buffers control" "$(grep '^ *percentage_of_dropped_buffers ' <<<"$controls" | sed 's/^ *//')"
fact "CAPFLEET_HOST_ADDR" "${CAPFLEET_HOST_ADDR:-unset}"
fact "guest kernel" "$(uname -r), $(nproc) CPU(s), $(awk '/MemTotal/ {print int($2/1024) " MiB"}' /proc/meminfo)"
fact "mounts" "$(awk '$2 ~ "^/(tmp|run|dev|proc|sys)?$" || $2 == "'"$results"'" {printf "%s %s (%s); ", $2, $3, $4}' /proc/mounts)"

echo "== TCP through the forward: 2 ports x 3 concurrent connections, then 5 reconnects each"
check tcp-round-trips /usr/bin/python3 - "${ports[@]}" <<'EOF'
import os, socket, sys, threading
host = os.environ["CAPFLEET_HOST_ADDR"]
ports = [int(p) for p in sys.argv[1:]]
def round_trip(port, msg):
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(msg)
        got = b""
        while len(got) < len(msg):
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
        assert got == msg, f"port {port}: sent {len(msg)} bytes, got back {len(got)}"
# Several connections open at once on each port (ZeroMQ keeps one per socket).
conns = [socket.create_connection((host, p), timeout=10) for p in ports for _ in range(3)]
for i, c in enumerate(conns):
    c.sendall(b"hello %d\n" % i)
for i, c in enumerate(conns):
    want = b"hello %d\n" % i
    got = b""
    while len(got) < len(want):
        got += c.recv(100)
    assert got == want, (got, want)
for c in conns:
    c.close()
# Then reconnects, one after the other, some with more than a pipe buffer of data.
for p in ports:
    for i in range(5):
        round_trip(p, os.urandom(200_000 if i == 0 else 10))
# And threads at once.
errors = []
def worker(p):
    try:
        round_trip(p, os.urandom(50_000))
    except Exception as e:
        errors.append(e)
threads = [threading.Thread(target=worker, args=(p,)) for p in ports for _ in range(4)]
for t in threads: t.start()
for t in threads: t.join()
assert not errors, errors
print(f"tcp: {len(conns)} concurrent, {5 * len(ports)} sequential, {len(threads)} threaded round trips ok")
EOF
# restrict=on: the slirp host address 10.0.2.2 (which would otherwise reach the host)
# must not answer. This stays inside QEMU; nothing leaves the machine.
check restricted-network /usr/bin/python3 -c '
import socket, sys
try:
    socket.create_connection(("10.0.2.2", int(sys.argv[1])), timeout=3)
except OSError as e:
    print("10.0.2.2 is unreachable as it should be:", e)
    sys.exit(0)
sys.exit("10.0.2.2 answered: restrict=on does not hold")' "${ports[0]}"

echo "== the share"
check share-write bash -c "echo written-in-guest >'$results/from-guest'"
exit $status
