#!/usr/bin/env bash
# A multi-host CaptureFleet on one machine, out of Linux network namespaces: for integration
# tests and the clock benchmark, where agents must reach the coordinator over a network (with
# its own addresses, latency and jitter) rather than over one loopback.
#
# Topology for prefix P (default cf) and N agents (default 3, at most 50):
#
#     P-coord  10.77.0.1/24   coordinator, every port bound on 10.77.0.1
#        | eth0 ~ vc
#     P-sw     br0 ------------ v1 ~ eth0  P-a1  10.77.0.11/24   relay + agent a1
#                  ------------ v2 ~ eth0  P-a2  10.77.0.12/24   relay + agent a2
#                  ...          vN ~ eth0  P-aN  10.77.0.(10+N)/24
#                  ------------ vst ~ eth0 P-st  10.77.0.5/24    with --storage: the studio's storage
#
# Each agent connects to 127.0.0.1:7600 on its own host, where `capfleet-relay` passes its
# control, frame ingest, clock and recording connections (7600, 7601, 7605, 7606) on to 10.77.0.1 through a
# delay line. The kernel here has no netem, so the relay is what impairs the link: its
# impairment lives in DATA/aI/impair (e.g. "delay=1ms,jitter=200us"), which the relay
# re-reads whenever it changes (`impair` below). Every fleet lives in namespaces of its own,
# so fleets with different prefixes may all use 10.77.0.0/24; nothing here touches the root
# namespace's interfaces, routes or firewall.
#
# All namespaces share the one kernel clock, so the true offset between any two hosts is
# zero: whatever offset `capfleet clock` reports for an agent without --skew is the
# synchronisation's error. `--skew I=+3.2s,+50ppm` gives agent I a known false clock that the
# synchronisation must recover. The drift counts from CLOCK_MONOTONIC's zero (boot), not from
# the agent's start, so the wall-clock offset to expect is the offset plus drift times the
# uptime: on a machine up 10 hours, +3.2s,+50ppm reads 3.2 s + 50e-6 * 36000 s = 5.0 s.
#
# Needs root, iproute2, setsid (util-linux) and jq. State (logs, pids, credential, agent
# state) lives in DATA, default /tmp/capfleet-netns-P; `down` stops everything and removes
# the namespaces, `down --purge` removes DATA too.
set -euo pipefail

readonly COORDINATOR_IP=10.77.0.1
readonly SUBNET=10.77.0
readonly CONTROL_PORT=7600 INGEST_PORT=7601 OPERATOR_PORT=7602 CLOCK_PORT=7605 RECORD_PORT=7606
readonly MAX_AGENTS=50
# --storage: `rclone serve` on its own host, which agents reach straight over the bridge.
readonly STORAGE_IP=10.77.0.5 STORAGE_PORT=8070 STORAGE_USER=studio
readonly OPERATOR_NAME=netns-admin
REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly REPO_ROOT
SCRIPT=$(basename "${BASH_SOURCE[0]}")
readonly SCRIPT
# As the user ran it, for the commands we suggest.
readonly INVOKED=$0

# The fleet's settings: from the command line, else DATA/fleet.env, else defaults.
PREFIX="" DATA="" BIN="" AGENTS="" IMPAIR="" AGENT_ARGS="" COORDINATOR_ARGS="" SETTINGS="" STORAGE="" GENICAM=0 GENICAM_LOSS=0 GENICAM_TIMECODE=0 GENICAM_SENSOR_PATTERN=0 GENICAM_PTP=0 GENICAM_LINE=0 GENICAM_GENERATOR=0
PREFIX_GIVEN=0 PURGE=0
declare -A SKEW=()

usage() {
    cat <<EOF
Usage: deploy/$SCRIPT COMMAND [OPTIONS]

A multi-host CaptureFleet on this machine out of network namespaces (run as root):
a coordinator at $COORDINATOR_IP in namespace P-coord and agents aI at $SUBNET.(10+I) in
namespaces P-a1..P-aN, joined by a bridge in P-sw. Each agent reaches the coordinator through
\`capfleet-relay\` on its own 127.0.0.1, which impairs the link as DATA/aI/impair says.

Commands:
  up [--agents N] [--bin PATH] [--impair SPEC] [--skew I=SETTING]...
     [--agent-args "ARGS"] [--coordinator-args "ARGS"] [--setting KEY=VALUE]... [--storage webdav|sftp] [--genicam] [--genicam-loss N]
     [--genicam-timecode] [--genicam-sensor-pattern] [--genicam-ptp] [--genicam-line] [--genicam-line-generator HZ]
        Build the namespaces, start the coordinator, make an admin credential
        (DATA/admin.credential), then a relay and an agent on each agent host; wait until
        all N nodes are online. N: 1 to $MAX_AGENTS (default 3). --bin: default \$CAPFLEET_BIN,
        else .build/release/capfleet, else .build/debug/capfleet; the relay is the
        capfleet-relay beside it. --impair: every link's starting impairment (see
        \`capfleet-relay --help\`), default none. --skew 2=-1.5s,-50ppm:
        run agent 2 with --test-clock-skew=-1.5s,-50ppm (repeatable). --agent-args and
        --coordinator-args: extra words for every agent / the coordinator. --setting
        cpu_latency_us=0: CAPFLEET_CPU_LATENCY_US=0 for the coordinator and every agent
        (repeatable; CAPFLEET_* variables of the caller's shell never reach them).
        --storage webdav (or sftp): the studio's storage on a host of its own, namespace P-st
        at $STORAGE_IP, joined to the bridge: \`rclone serve\` of DATA/storage on port
        $STORAGE_PORT, user $STORAGE_USER, the password in DATA/storage.password (0600); the
        summary prints the \`capfleet storage add\` that makes it a destination.
        --genicam: give each agent host I a GigE Vision camera (Aravis's fake camera, run
        by genicam-fake-camera.py, serial CF-aI) in namespace P-gI on a link of its own, and
        run its agent with --genicam gc0. --genicam-loss N: the same, its stream losing N
        packets in a thousand (the fake camera's -r). --genicam-timecode: the same, each
        camera drawing its frames' own timecodes, which \`capfleet sync-audit\` reads.
        --genicam-sensor-pattern: the same, each frame painted by its place on the sensor (a
        grey ramp across it, a black row every 256 rows down), so a region of interest shows.
        --genicam-ptp: the same, each camera a locked PTP slave that takes scheduled action
        commands (genicam-fake-camera.py --ptp; the hosts share one clock, as PTP cameras do).
        --genicam-line: the same, the cameras' I/O lines on one trigger wire (DATA/wire: each
        one's Line0 in, Line1 out). --genicam-line-generator HZ: the same, and an external
        trigger generator pulsing the wire at HZ.
  down [--purge]
        Stop every process (SIGTERM, SIGKILL after 5 s) and delete the namespaces. Safe to
        run when nothing, or only part of a fleet, is up. --purge also deletes DATA.
  cli ARGS...
        Run \`capfleet ARGS\` in P-coord as the admin, e.g. \`cli nodes\`, \`cli clock --json\`.
  exec NAME CMD...
        Run CMD in namespace P-NAME (NAME: coord, sw, a1, a2, ..., st).
  impair I|all SPEC
        Set agent I's link impairment (or every agent's), e.g. "delay=5ms,jitter=1ms";
        "" for none. The relay picks it up at once; \`clock\` shows the best round trip of
        the last ~2 minutes of probes, so its ROUND TRIP follows a slower link only then.
  restart-agent I
        Kill agent I with SIGKILL (a crash) and start it again with its enrolled key.
  partition I|storage | heal I|storage
        Take agent I's host (or the storage host) off the network (its link down) or put it
        back: a cable pulled.
  generator HZ | generator off
        Start an external trigger generator pulsing the --genicam-line cameras' wire at HZ
        (in place of one running), or stop it: a pulse generator switched on and off.
  status
        Namespaces, processes alive or not, and \`cli nodes\` when the coordinator is up.

Options of every command (before or after it; for cli and exec, before ARGS):
  --prefix P    Namespace prefix, letters, digits, '-' or '_', at most 12 (default cf).
  --data DIR    State directory (default /tmp/capfleet-netns-P).
  -h, --help    This help.

Example: a clock benchmark run with two skewed agents on a 1 ms link:
  deploy/$SCRIPT up --skew 1=+3.2s,+50ppm --skew 2=-1.5s,-50ppm --impair "delay=1ms,jitter=200us"
  deploy/$SCRIPT cli clock --json
  deploy/$SCRIPT impair all "delay=5ms"
  deploy/$SCRIPT down
EOF
}

die() {
    echo "$SCRIPT: $*" >&2
    exit 1
}

# --- options -----------------------------------------------------------------------------

# Consumes one option common to every command from "$@": sets OPTION_WORDS to how many words
# it took, 0 if $1 is not one.
common_option() {
    OPTION_WORDS=0
    case $1 in
    --prefix | --prefix=*) option_value --prefix "$@"; PREFIX=$OPTION_VALUE; PREFIX_GIVEN=1 ;;
    --data | --data=*) option_value --data "$@"; DATA=$OPTION_VALUE ;;
    -h | --help) usage; exit 0 ;;
    esac
}

# Splits "--name=value" or "--name value"; sets OPTION_VALUE and OPTION_WORDS.
option_value() {
    local name=$1
    shift
    if [[ $1 == "$name="* ]]; then
        OPTION_VALUE=${1#"$name="}
        OPTION_WORDS=1
    else
        [[ $# -ge 2 ]] || die "$name needs a value"
        OPTION_VALUE=$2
        OPTION_WORDS=2
    fi
}

validate_prefix() {
    [[ $PREFIX =~ ^[A-Za-z0-9][A-Za-z0-9_-]{0,11}$ ]] ||
        die "prefix '$PREFIX': use 1 to 12 letters, digits, '-' or '_', starting with a letter or digit"
}

# Settles PREFIX and DATA from the options, DATA/fleet.env and the defaults.
resolve_fleet() {
    if [[ -z $PREFIX && -n $DATA && -f $DATA/fleet.env ]]; then
        PREFIX=$(fleet_env_value PREFIX)
    fi
    PREFIX=${PREFIX:-cf}
    validate_prefix
    DATA=${DATA:-/tmp/capfleet-netns-$PREFIX}
    [[ $DATA == /* ]] || DATA=$PWD/$DATA
    DATA=${DATA%/}
}

# One value of DATA/fleet.env (written by `up` with printf %q, one KEY=VALUE a line), read in
# a subshell so that the file's other values do not replace this shell's yet.
fleet_env_value() {
    (
        check_data_owner
        # shellcheck source=/dev/null
        source "$DATA/fleet.env"
        printf '%s' "${!1-}"
    )
}

# DATA holds an admin credential and fleet.env is sourced as root: refuse a directory someone
# else made (e.g. planted in /tmp before the first `up`).
check_data_owner() {
    if [[ -e $DATA && ! -O $DATA ]]; then
        die "$DATA belongs to someone else; remove it or pass --data DIR"
    fi
}

# Loads what `up` recorded, for every command after it.
load_fleet() {
    check_data_owner
    [[ -f $DATA/fleet.env ]] || return 1
    local recorded_prefix
    recorded_prefix=$(fleet_env_value PREFIX)
    if [[ $PREFIX_GIVEN == 1 && $recorded_prefix != "$PREFIX" ]]; then
        die "$DATA/fleet.env is fleet '$recorded_prefix', not '$PREFIX': pass the matching --prefix and --data"
    fi
    # shellcheck source=/dev/null
    source "$DATA/fleet.env"
    local name
    for name in $(compgen -v SKEW_); do
        SKEW[${name#SKEW_}]=${!name}
    done
    return 0
}

require_fleet() {
    load_fleet && return 0
    if [[ -n $(fleet_namespaces) ]]; then
        die "fleet '$PREFIX' is up, but not with its state in $DATA: pass the --data it was started with"
    fi
    die "no fleet at $DATA (no fleet.env): start one with \`$INVOKED up$(fleet_options)\`, or pass --prefix/--data"
}

# The options that name this fleet, for the commands we print.
fleet_options() {
    local options=""
    [[ $PREFIX == cf ]] || options+=" --prefix $PREFIX"
    [[ $DATA == "/tmp/capfleet-netns-$PREFIX" ]] || options+=" --data $DATA"
    printf '%s' "$options"
}

# The test bed's relay is a binary of its own (the product does not ship it), built beside
# capfleet: `swift build` makes both in the same directory.
relay_bin() { echo "$(dirname "$BIN")/capfleet-relay"; }

default_bin() {
    if [[ -n ${CAPFLEET_BIN:-} ]]; then
        echo "$CAPFLEET_BIN"
    elif [[ -x $REPO_ROOT/.build/release/capfleet ]]; then
        echo "$REPO_ROOT/.build/release/capfleet"
    else
        echo "$REPO_ROOT/.build/debug/capfleet"
    fi
}

# --- namespaces and processes ------------------------------------------------------------

ns() { echo "$PREFIX-$1"; }

# This fleet's namespaces that exist now: P-sw, P-coord, P-aI, and nothing of another
# fleet whose prefix merely starts with P.
fleet_namespaces() {
    ip netns list | awk '{print $1}' | grep -E "^$PREFIX-(sw|coord|st|a[0-9]+|g[0-9]+)\$" || true
}

# Joins host namespace $1 to the bridge: $2 is its port's name in P-sw, $3 its address.
attach_host() {
    local host=$1 port=$2 address=$3
    ip netns add "$host"
    ip -n "$host" link set lo up
    ip -n "$(ns sw)" link add "$port" type veth peer name eth0 netns "$host"
    ip -n "$(ns sw)" link set "$port" master br0 up
    ip -n "$host" addr add "$address/24" dev eth0
    ip -n "$host" link set eth0 up
}

# Gives agent host I a GigE Vision camera on a link of its own: namespace P-gI, reached from
# P-aI's interface gc0 (10.78.I.1/24) at 10.78.I.2, where Aravis's fake camera answers the
# real GVCP/GVSP protocol (serial CF-aI). Broadcast addresses are set: discovery needs them.
attach_genicam_camera() {
    local i=$1 camera
    camera=$(ns "g$i")
    ip netns add "$camera"
    ip -n "$camera" link set lo up
    ip -n "$(ns "a$i")" link add gc0 type veth peer name eth0 netns "$camera"
    ip -n "$(ns "a$i")" addr add "10.78.$i.1/24" brd + dev gc0
    ip -n "$(ns "a$i")" link set gc0 up
    ip -n "$camera" addr add "10.78.$i.2/24" brd + dev eth0
    ip -n "$camera" link set eth0 up
}

# Starts agent host I's fake GigE Vision camera: Aravis's, through genicam-fake-camera.py
# beside this script, which checks for software triggers at 2 kHz (Aravis's own tool at
# 25 Hz). Its argv[0] names DATA, so that the pid checks here know it as this fleet's.
start_genicam_camera() {
    local i=$1
    local drawn=()
    ((GENICAM_TIMECODE == 0)) || drawn=(--timecode 0.05,0.05,0.45)
    ((GENICAM_SENSOR_PATTERN == 0)) || drawn+=(--sensor-pattern)
    ((GENICAM_PTP == 0)) || drawn+=(--ptp)
    ((GENICAM_LINE == 0)) || drawn+=(--line-wire "$DATA/wire")
    start_process "$(ns "g$i")" "genicam-a$i" bash -c 'exec -a "$0" /usr/bin/python3 "$1" --interface eth0 --serial "$2" --lost-per-thousand "$3" "${@:4}"' \
        "$DATA/genicam-a$i" "$REPO_ROOT/deploy/genicam-fake-camera.py" "CF-a$i" "$GENICAM_LOSS" "${drawn[@]}"
}

build_namespaces() {
    ip netns add "$(ns sw)"
    ip -n "$(ns sw)" link set lo up
    ip -n "$(ns sw)" link add br0 type bridge
    ip -n "$(ns sw)" link set br0 up
    attach_host "$(ns coord)" vc "$COORDINATOR_IP"
    local i
    for ((i = 1; i <= AGENTS; i++)); do
        attach_host "$(ns "a$i")" "v$i" "$SUBNET.$((10 + i))"
        ((GENICAM == 0)) || attach_genicam_camera "$i"
    done
    [[ -z $STORAGE ]] || attach_host "$(ns st)" vst "$STORAGE_IP"
}

# The storage host's server: rclone serve of DATA/storage (it lists no cache, so what is
# written there behind its back shows at once). The password reaches rclone in its
# environment (RCLONE_PASS), not on a command line.
start_storage() {
    mkdir -p "$DATA/storage"
    if [[ ! -f $DATA/storage.password ]]; then
        (umask 077 && head -c 18 /dev/urandom | base64 | tr -d '/+=' >"$DATA/storage.password")
    fi
    start_process "$(ns st)" storage env "RCLONE_PASS=$(cat "$DATA/storage.password")" /usr/bin/rclone serve "$STORAGE" "$DATA/storage" \
        --addr "$STORAGE_IP:$STORAGE_PORT" --user "$STORAGE_USER" --dir-cache-time 0s
    local deadline=$((SECONDS + 20))
    until ip netns exec "$(ns coord)" timeout 1 bash -c ">/dev/tcp/$STORAGE_IP/$STORAGE_PORT" 2>/dev/null; do
        is_running storage || fail_with_logs "the storage server has stopped" storage
        ((SECONDS < deadline)) || fail_with_logs "the storage server at $STORAGE_IP:$STORAGE_PORT does not answer after 20 s" storage
        sleep 0.2
    done
}

# `capfleet storage add` for the storage host.
storage_add_command() {
    if [[ $STORAGE == webdav ]]; then
        echo "cli storage add studio --backend webdav --option url=http://$STORAGE_IP:$STORAGE_PORT --option vendor=other --option user=$STORAGE_USER --secret pass=@$DATA/storage.password"
    else
        echo "cli storage add studio --backend sftp --option host=$STORAGE_IP --option port=$STORAGE_PORT --option user=$STORAGE_USER --secret pass=@$DATA/storage.password"
    fi
}

# True if pid $1 is alive and one of this fleet's (its command line names DATA), so that a
# stale pid file never gets a recycled pid killed.
is_fleet_process() {
    local pid=$1 state
    [[ $pid =~ ^[0-9]+$ && -r /proc/$pid/cmdline ]] || return 1
    state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) || return 1
    [[ $state != Z ]] || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$DATA/"
}

pid_of() {
    local file=$DATA/pids/$1.pid
    [[ -f $file ]] && cat "$file"
}

is_running() {
    local pid
    pid=$(pid_of "$1") && is_fleet_process "$pid"
}

# Starts process $2 (a name for its log and pid file) in namespace $1: `$3...` under setsid,
# so that it is a process group of its own that outlives this script.
start_process() {
    local namespace=$1 name=$2
    shift 2
    local log=$DATA/logs/$name.log
    printf '=== %s started %s: %s\n' "$name" "$(date '+%F %T')" "$*" >>"$log"
    # No job control here, so the child is not a group leader and setsid execs in place:
    # $! is the process itself.
    ip netns exec "$namespace" setsid "$@" </dev/null >>"$log" 2>&1 &
    echo $! >"$DATA/pids/$name.pid"
}

# Sends signal $1 to the process groups of the named processes that are running, waits up to
# $2 seconds for them to end, then kills what is left. Removes their pid files.
stop_processes() {
    local signal=$1 grace=$2
    shift 2
    local name pid pids=()
    for name; do
        if pid=$(pid_of "$name") && is_fleet_process "$pid"; then
            kill "-$signal" -- "-$pid" 2>/dev/null || kill "-$signal" "$pid" 2>/dev/null || true
            pids+=("$pid")
        fi
    done
    local deadline=$((SECONDS + grace)) alive
    while :; do
        alive=()
        for pid in "${pids[@]}"; do
            is_fleet_process "$pid" && alive+=("$pid")
        done
        [[ ${#alive[@]} -gt 0 && $SECONDS -lt $deadline ]] || break
        sleep 0.1
    done
    for pid in "${alive[@]}"; do
        echo "pid $pid did not end within $grace s of SIG$signal: SIGKILL" >&2
        kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true
    done
    for pid in "${alive[@]}"; do
        while is_fleet_process "$pid"; do sleep 0.05; done
    done
    for name; do rm -f "$DATA/pids/$name.pid"; done
}

# Prints the end of process $1's log to stderr, for a failure report.
show_log() {
    local log=$DATA/logs/$1.log
    if [[ -f $log ]]; then
        echo "--- last lines of $log:" >&2
        tail -n 25 "$log" >&2
    fi
}

fail_with_logs() {
    local message=$1 name
    shift
    echo "$SCRIPT: $message" >&2
    for name; do show_log "$name"; done
    echo "$SCRIPT: the fleet is left as it is for inspection; \`$INVOKED down$(fleet_options)\` removes it" >&2
    exit 1
}

# Runs a CLI command against the coordinator as the admin, from P-coord.
cli_run() {
    ip netns exec "$(ns coord)" "$BIN" "$@" --coordinator "$COORDINATOR_IP:$OPERATOR_PORT" --credential "$DATA/admin.credential"
}

# --- relay and agents ----------------------------------------------------------------------

# The relay on agent host $1's loopback: control, frame ingest, clock and recording, through the delay
# line that DATA/aI/impair configures. --impair too, so that the link is impaired from the
# first connection on, and a SPEC the relay cannot read stops `up` with the relay's reason.
start_relay() {
    local i=$1 forwards=() port
    for port in "$CONTROL_PORT" "$INGEST_PORT" "$CLOCK_PORT" "$RECORD_PORT"; do
        forwards+=(--forward "127.0.0.1:$port=$COORDINATOR_IP:$port")
    done
    start_process "$(ns "a$i")" "relay-a$i" "$(relay_bin)" "${forwards[@]}" \
        --impair "$(<"$DATA/a$i/impair")" --impair-file "$DATA/a$i/impair"
}

# Writes agent $1's impairment atomically, so that the relay never reads half of it.
write_impairment() {
    local file=$DATA/a$1/impair temporary
    temporary=$(mktemp "$file.XXXXXX")
    printf '%s\n' "$2" >"$temporary"
    mv -f "$temporary" "$file"
}

# The daemons' --setting values as CAPFLEET_<KEY>=VALUE lines, for env.
settings_environment() {
    local setting
    for setting in $SETTINGS; do
        printf 'CAPFLEET_%s=%s\n' "$(tr '[:lower:]' '[:upper:]' <<<"${setting%%=*}")" "${setting#*=}"
    done
}

# Starts agent $1; its first start enrolls it with a fresh token, later ones use the key in
# its state directory (as Tests/IntegrationTests/FleetHarness.swift decides).
start_agent() {
    local i=$1 state=$DATA/a$1/state arguments=() extra=()
    arguments=(agent --coordinator "127.0.0.1:$CONTROL_PORT" --name "a$i" --state-dir "$state" --synthetic 1 --no-discover)
    if [[ ! -f $state/keys/agent.key_secret ]]; then
        local token
        token=$(ip netns exec "$(ns coord)" "$BIN" enroll --name "a$i" --data "$DATA/coord" --valid 600 --quiet) ||
            fail_with_logs "capfleet enroll --name a$i failed"
        arguments+=(--enroll "$token")
    fi
    [[ -z ${SKEW[$i]:-} ]] || arguments+=("--test-clock-skew=${SKEW[$i]}")
    ((GENICAM == 0)) || arguments+=(--genicam gc0)
    read -ra extra <<<"$AGENT_ARGS"
    local environment=()
    mapfile -t environment < <(settings_environment)
    start_process "$(ns "a$i")" "agent-a$i" env "${environment[@]}" "$BIN" "${arguments[@]}" "${extra[@]}"
}

# The names of the agents the coordinator lists as online.
online_agents() {
    cli_run nodes --json --timeout 2 2>/dev/null | jq -r '.[] | select(.online and (.revoked | not)) | .name'
}

# Waits up to $1 seconds until every agent in $2... is online; fails with their logs if not.
wait_online() {
    local seconds=$1
    shift
    local deadline=$((SECONDS + seconds)) online missing=() i
    while :; do
        online=$(online_agents || true)
        missing=()
        for i; do
            grep -qx "a$i" <<<"$online" || missing+=("$i")
        done
        [[ ${#missing[@]} -gt 0 ]] || return 0
        is_running coordinator || fail_with_logs "the coordinator has stopped" coordinator
        for i in "${missing[@]}"; do
            is_running "agent-a$i" || fail_with_logs "agent a$i has stopped" "agent-a$i" "relay-a$i"
            is_running "relay-a$i" || fail_with_logs "the relay of a$i has stopped" "relay-a$i"
        done
        if ((SECONDS >= deadline)); then
            local logs=()
            for i in "${missing[@]}"; do logs+=("agent-a$i" "relay-a$i"); done
            fail_with_logs "not online after $seconds s: ${missing[*]/#/a}" "${logs[@]}" coordinator
        fi
        sleep 0.5
    done
}

# Waits up to $2 seconds until agent $1 has registered with the coordinator since unix time
# $3 (ms): after a restart the coordinator still lists the old session as online until its
# heartbeats are missed, so "online" alone says nothing. All namespaces share one clock, so
# the coordinator's event times compare with ours.
wait_registered() {
    local i=$1 seconds=$2 since=$3 deadline=$((SECONDS + $2)) nodes
    while :; do
        nodes=$(cli_run nodes --json --timeout 2 2>/dev/null | jq -c --arg name "a$i" '[.[] | select(.name == $name) | .node_id]' || true)
        if [[ -n $nodes ]] && cli_run events --json --limit 200 --timeout 2 2>/dev/null |
            jq -e --argjson nodes "$nodes" --argjson since "$since" \
                'any(.[]; .kind == "node_registered" and .unix_ms >= $since and (.node_id | IN($nodes[])))' >/dev/null; then
            return 0
        fi
        is_running coordinator || fail_with_logs "the coordinator has stopped" coordinator
        is_running "agent-a$i" || fail_with_logs "agent a$i has stopped" "agent-a$i" "relay-a$i"
        is_running "relay-a$i" || fail_with_logs "the relay of a$i has stopped" "relay-a$i"
        ((SECONDS < deadline)) || fail_with_logs "agent a$i has not registered again after $seconds s" "agent-a$i" "relay-a$i" coordinator
        sleep 0.5
    done
}

check_agent_index() {
    if ! [[ $1 =~ ^[0-9]+$ ]] || (($1 < 1 || $1 > AGENTS)); then
        die "agent '$1': this fleet has agents 1 to $AGENTS"
    fi
}

# --- commands ------------------------------------------------------------------------------

cmd_up() {
    while [[ $# -gt 0 ]]; do
        common_option "$@"
        if ((OPTION_WORDS > 0)); then shift "$OPTION_WORDS"; continue; fi
        case $1 in
        --agents | --agents=*) option_value --agents "$@"; AGENTS=$OPTION_VALUE ;;
        --bin | --bin=*) option_value --bin "$@"; BIN=$OPTION_VALUE ;;
        --impair | --impair=*) option_value --impair "$@"; IMPAIR=$OPTION_VALUE ;;
        --agent-args | --agent-args=*) option_value --agent-args "$@"; AGENT_ARGS=$OPTION_VALUE ;;
        --coordinator-args | --coordinator-args=*) option_value --coordinator-args "$@"; COORDINATOR_ARGS=$OPTION_VALUE ;;
        --genicam) GENICAM=1; OPTION_WORDS=1 ;;
        --genicam-timecode) GENICAM=1 GENICAM_TIMECODE=1; OPTION_WORDS=1 ;;
        --genicam-sensor-pattern) GENICAM=1 GENICAM_SENSOR_PATTERN=1; OPTION_WORDS=1 ;;
        --genicam-ptp) GENICAM=1 GENICAM_PTP=1; OPTION_WORDS=1 ;;
        --genicam-line) GENICAM=1 GENICAM_LINE=1; OPTION_WORDS=1 ;;
        --genicam-line-generator | --genicam-line-generator=*)
            option_value --genicam-line-generator "$@"
            [[ $OPTION_VALUE =~ ^[0-9]+([.][0-9]+)?$ ]] || die "--genicam-line-generator $OPTION_VALUE: pulses a second, e.g. 10"
            GENICAM=1 GENICAM_LINE=1 GENICAM_GENERATOR=$OPTION_VALUE
            ;;
        --genicam-loss | --genicam-loss=*)
            option_value --genicam-loss "$@"
            [[ $OPTION_VALUE =~ ^[0-9]+$ ]] || die "--genicam-loss $OPTION_VALUE: packets lost per thousand, e.g. 2"
            GENICAM=1 GENICAM_LOSS=$OPTION_VALUE
            ;;
        --storage | --storage=*)
            option_value --storage "$@"
            [[ $OPTION_VALUE == webdav || $OPTION_VALUE == sftp ]] || die "--storage $OPTION_VALUE: webdav or sftp"
            STORAGE=$OPTION_VALUE
            ;;
        --setting | --setting=*)
            option_value --setting "$@"
            [[ $OPTION_VALUE =~ ^[a-z][a-z0-9_]*=[^[:space:]]+$ ]] || die "--setting $OPTION_VALUE: write KEY=VALUE, e.g. cpu_latency_us=0 (no spaces)"
            SETTINGS+="${SETTINGS:+ }$OPTION_VALUE"
            ;;
        --skew | --skew=*)
            option_value --skew "$@"
            [[ $OPTION_VALUE =~ ^([0-9]+)=(.+)$ ]] || die "--skew $OPTION_VALUE: write I=SETTING, e.g. 2=-1.5s,-50ppm"
            SKEW[${BASH_REMATCH[1]}]=${BASH_REMATCH[2]}
            ;;
        *) die "up: unknown option '$1' (see --help)" ;;
        esac
        shift "$OPTION_WORDS"
    done
    resolve_fleet
    AGENTS=${AGENTS:-3}
    if ! [[ $AGENTS =~ ^[0-9]+$ ]] || ((AGENTS < 1 || AGENTS > MAX_AGENTS)); then
        die "--agents $AGENTS: give 1 to $MAX_AGENTS"
    fi
    local i
    for i in "${!SKEW[@]}"; do check_agent_index "$i"; done
    [[ $IMPAIR != *$'\n'* ]] || die "--impair: one line, please"
    BIN=${BIN:-$(default_bin)}
    [[ $BIN == /* ]] || BIN=$PWD/$BIN
    [[ -x $BIN ]] || die "no capfleet binary at $BIN: run \`swift build --product capfleet\`, or pass --bin or set CAPFLEET_BIN"
    "$(relay_bin)" --help 2>/dev/null | grep -q 'USAGE: capfleet-relay' ||
        die "no capfleet-relay beside $BIN: build it the way capfleet was built (swift build [-c release] --product capfleet-relay)"
    [[ $EUID -eq 0 ]] || die "up needs root (network namespaces)"
    local tool
    for tool in ip setsid jq; do
        command -v "$tool" >/dev/null || die "up needs $tool"
    done
    local existing
    existing=$(fleet_namespaces | sort -V | paste -sd ' ')
    [[ -z $existing ]] || die "fleet '$PREFIX' is already up (namespaces: $existing); \`$INVOKED down$(fleet_options)\` first"

    check_data_owner
    if [[ ! -d $DATA ]]; then
        mkdir -p -- "$(dirname "$DATA")"
        mkdir -m 700 -- "$DATA"
    fi
    mkdir -p "$DATA/logs" "$DATA/pids" "$DATA/coord"
    local name
    for name in "$DATA"/pids/*.pid; do
        [[ -e $name ]] || continue
        name=$(basename "$name" .pid)
        ! is_running "$name" || die "$name is still running from an earlier fleet in $DATA: \`$INVOKED down$(fleet_options)\` first"
        rm -f "$DATA/pids/$name.pid"
    done
    {
        printf '# Written by %s up at %s; read by its other commands.\n' "$SCRIPT" "$(date '+%F %T')"
        printf '%s=%q\n' PREFIX "$PREFIX" AGENTS "$AGENTS" BIN "$BIN" DATA "$DATA" \
            AGENT_ARGS "$AGENT_ARGS" COORDINATOR_ARGS "$COORDINATOR_ARGS" SETTINGS "$SETTINGS" STORAGE "$STORAGE" GENICAM "$GENICAM" GENICAM_LOSS "$GENICAM_LOSS" \
            GENICAM_TIMECODE "$GENICAM_TIMECODE" GENICAM_SENSOR_PATTERN "$GENICAM_SENSOR_PATTERN" GENICAM_PTP "$GENICAM_PTP" GENICAM_LINE "$GENICAM_LINE" GENICAM_GENERATOR "$GENICAM_GENERATOR"
        for i in "${!SKEW[@]}"; do printf 'SKEW_%s=%q\n' "$i" "${SKEW[$i]}"; done
    } >"$DATA/fleet.env"

    echo "building namespaces $(ns sw), $(ns coord), $(ns a1)$( ((AGENTS == 1)) || echo "..$(ns "a$AGENTS")")"
    build_namespaces

    # The admin credential first, as `capfleet dev` does: it makes the coordinator's keys and
    # database if they are not there yet, so no second writer races the coordinator for them.
    if [[ ! -f $DATA/admin.credential ]]; then
        ip netns exec "$(ns coord)" "$BIN" operator add "$OPERATOR_NAME" --role admin --data "$DATA/coord" --new-fleet \
            --out "$DATA/admin.credential" --address "$COORDINATOR_IP:$OPERATOR_PORT" >/dev/null ||
            die "capfleet operator add failed"
    fi
    local coordinator_extra=()
    read -ra coordinator_extra <<<"$COORDINATOR_ARGS"
    local environment=()
    mapfile -t environment < <(settings_environment)
    start_process "$(ns coord)" coordinator env "CAPFLEET_BIND=$COORDINATOR_IP" "${environment[@]}" "$BIN" coordinator --data "$DATA/coord" "${coordinator_extra[@]}"
    local deadline=$((SECONDS + 20))
    until cli_run nodes --timeout 1 >/dev/null 2>&1; do
        is_running coordinator || fail_with_logs "the coordinator has stopped" coordinator
        ((SECONDS < deadline)) || fail_with_logs "the coordinator's operator port $COORDINATOR_IP:$OPERATOR_PORT does not answer after 20 s" coordinator
        sleep 0.5
    done
    echo "coordinator up at $COORDINATOR_IP in $(ns coord)"
    if [[ -n $STORAGE ]]; then
        command -v rclone >/dev/null || die "--storage needs rclone (apt-get install rclone)"
        start_storage
        echo "storage ($STORAGE) up at $STORAGE_IP:$STORAGE_PORT in $(ns st)"
    fi

    for ((i = 1; i <= AGENTS; i++)); do
        mkdir -p "$DATA/a$i"
        write_impairment "$i" "$IMPAIR"
        start_relay "$i"
        ((GENICAM == 0)) || start_genicam_camera "$i"
        start_agent "$i"
    done
    [[ $GENICAM_GENERATOR == 0 ]] || start_generator "$GENICAM_GENERATOR"
    echo "waiting until all $AGENTS agents are online"
    wait_online 60 $(seq 1 "$AGENTS")

    local options
    options=$(fleet_options)
    cat <<EOF

Fleet '$PREFIX' is up: coordinator $COORDINATOR_IP ($(ns coord)), agents a1..a$AGENTS at $SUBNET.11..$SUBNET.$((10 + AGENTS)) (namespaces $(ns a1)..$(ns "a$AGENTS")), all online.
  links        ${IMPAIR:-no impairment}$( ((${#SKEW[@]} == 0)) || printf '; clock skew:%s' "$(for i in $(printf '%s\n' "${!SKEW[@]}" | sort -n); do printf ' a%s %s' "$i" "${SKEW[$i]}"; done)")
  settings     ${SETTINGS:-none given, defaults}
$([[ -z $STORAGE ]] || echo "  storage      $STORAGE at $STORAGE_IP:$STORAGE_PORT ($(ns st)); a destination: $INVOKED$(fleet_options) $(storage_add_command)")
  state, logs  $DATA (logs/, pids/, fleet.env)
  credential   $DATA/admin.credential
  CLI          $INVOKED$options cli nodes      (or cli clock --json, cli devices, ...)
  impairment   $INVOKED$options impair all "delay=5ms,jitter=1ms"
  a shell      $INVOKED$options exec a1 bash
  stop         $INVOKED$options down [--purge]
EOF
}

cmd_down() {
    local positional=()
    while [[ $# -gt 0 ]]; do
        common_option "$@"
        if ((OPTION_WORDS > 0)); then shift "$OPTION_WORDS"; continue; fi
        case $1 in
        --purge) PURGE=1 ;;
        *) positional+=("$1") ;;
        esac
        shift
    done
    [[ ${#positional[@]} -eq 0 ]] || die "down: unexpected '${positional[*]}'"
    resolve_fleet
    [[ $EUID -eq 0 ]] || die "down needs root (network namespaces)"
    check_data_owner
    if [[ -d $DATA/pids ]]; then
        local agents=() others=() file name
        for file in "$DATA"/pids/*.pid; do
            [[ -e $file ]] || continue
            name=$(basename "$file" .pid)
            if [[ $name == agent-* ]]; then agents+=("$name"); else others+=("$name"); fi
        done
        # Agents first, so that they can still say goodbye through their relays.
        ((${#agents[@]} == 0)) || stop_processes TERM 5 "${agents[@]}"
        ((${#others[@]} == 0)) || stop_processes TERM 5 "${others[@]}"
    fi
    local namespace pids
    for namespace in $(fleet_namespaces | sort -r); do
        # Whatever else was started in the namespace (`exec`), or a process whose pid file is
        # gone: deleting the name would leave it running in a namespace nobody can reach.
        pids=$(ip netns pids "$namespace" 2>/dev/null || true)
        if [[ -n $pids ]]; then
            echo "stopping what else runs in $namespace: $(paste -sd ' ' <<<"$pids")"
            # shellcheck disable=SC2086
            kill -TERM $pids 2>/dev/null || true
            local deadline=$((SECONDS + 5))
            while [[ -n $(ip netns pids "$namespace" 2>/dev/null) && $SECONDS -lt $deadline ]]; do sleep 0.1; done
            pids=$(ip netns pids "$namespace" 2>/dev/null || true)
            # shellcheck disable=SC2086
            [[ -z $pids ]] || kill -KILL $pids 2>/dev/null || true
        fi
        ip netns del "$namespace"
    done
    if [[ $PURGE == 1 && -d $DATA ]]; then
        rm -rf -- "$DATA"
        echo "fleet '$PREFIX' is down; $DATA removed"
    else
        echo "fleet '$PREFIX' is down$([[ -d $DATA ]] && echo "; state and logs stay in $DATA (--purge removes them)")"
    fi
}

# Takes the common options in front of a command's arguments; sets REST to what follows.
leading_options() {
    REST=()
    while [[ $# -gt 0 ]]; do
        if [[ $1 == -- ]]; then shift; break; fi
        common_option "$@"
        ((OPTION_WORDS > 0)) || break
        shift "$OPTION_WORDS"
    done
    REST=("$@")
}

cmd_cli() {
    leading_options "$@"
    resolve_fleet
    require_fleet
    # `capfleet help ...` and --help take no coordinator options.
    local word
    [[ ${REST[0]:-} != help ]] || exec "$BIN" "${REST[@]}"
    for word in "${REST[@]}"; do
        [[ $word != -h && $word != --help ]] || exec "$BIN" "${REST[@]}"
    done
    exec ip netns exec "$(ns coord)" "$BIN" "${REST[@]}" --coordinator "$COORDINATOR_IP:$OPERATOR_PORT" --credential "$DATA/admin.credential"
}

cmd_exec() {
    leading_options "$@"
    resolve_fleet
    [[ ${#REST[@]} -ge 2 ]] || die "exec: give NAME and a command, e.g. \`exec a1 ip addr\`"
    local namespace
    namespace=$(ns "${REST[0]}")
    fleet_namespaces | grep -qx -- "$namespace" || die "no namespace $namespace (fleet '$PREFIX' has: $(fleet_namespaces | paste -sd ' '))"
    exec ip netns exec "$namespace" "${REST[@]:1}"
}

# Takes the common options anywhere; sets REST to the other words.
all_options() {
    REST=()
    while [[ $# -gt 0 ]]; do
        common_option "$@"
        if ((OPTION_WORDS > 0)); then shift "$OPTION_WORDS"; continue; fi
        REST+=("$1")
        shift
    done
}

cmd_impair() {
    all_options "$@"
    resolve_fleet
    require_fleet
    [[ ${#REST[@]} -eq 2 ]] || die "impair: give I (or all) and SPEC, e.g. \`impair all \"delay=5ms\"\`"
    local which=${REST[0]} spec=${REST[1]} targets=() i
    [[ $spec != *$'\n'* ]] || die "impair: one line, please"
    if [[ $which == all ]]; then
        mapfile -t targets < <(seq 1 "$AGENTS")
    else
        check_agent_index "$which"
        targets=("$which")
    fi
    local sizes=()
    for i in "${targets[@]}"; do
        sizes[i]=$(stat -c %s "$DATA/logs/relay-a$i.log" 2>/dev/null || echo 0)
        write_impairment "$i" "$spec"
    done
    # The relay says what it made of the new setting (or why it ignores it): show that.
    local deadline=$((SECONDS + 3)) reported refused=0
    for i in "${targets[@]}"; do
        until reported=$(tail -c "+$((sizes[i] + 1))" "$DATA/logs/relay-a$i.log" 2>/dev/null | grep -E 'relay: (impairment now|ignoring)' | tail -n 1) &&
            [[ -n $reported ]]; do
            ((SECONDS < deadline)) || break
            sleep 0.1
        done
        echo "a$i: ${reported:-relay has not reported the new setting (yet): see $DATA/logs/relay-a$i.log}"
        [[ $reported != *"relay: ignoring"* ]] || refused=1
    done
    ((refused == 0)) || die "impair: the relay refused '$spec' (see above); the link keeps its previous impairment"
}

cmd_restart_agent() {
    all_options "$@"
    resolve_fleet
    require_fleet
    [[ $EUID -eq 0 ]] || die "restart-agent needs root (network namespaces)"
    [[ ${#REST[@]} -eq 1 ]] || die "restart-agent: give the agent's number, e.g. \`restart-agent 2\`"
    local i=${REST[0]}
    check_agent_index "$i"
    fleet_namespaces | grep -qx -- "$(ns "a$i")" || die "fleet '$PREFIX' is not up: no namespace $(ns "a$i")"
    stop_processes KILL 5 "agent-a$i"
    echo "killed agent a$i (SIGKILL); starting it again"
    is_running "relay-a$i" || start_relay "$i"
    local since
    since=$(date +%s%3N)
    start_agent "$i"
    wait_registered "$i" 60 "$since"
    wait_online 10 "$i"
    echo "agent a$i is running again (pid $(pid_of "agent-a$i")), registered and online"
}

# The external trigger generator on the cameras' wire, in the first camera's namespace.
start_generator() {
    start_process "$(ns g1)" "line-generator" /usr/bin/python3 "$REPO_ROOT/deploy/genicam-fake-camera.py" \
        --line-wire "$DATA/wire" --line-generator "$1"
}

cmd_generator() {
    all_options "$@"
    resolve_fleet
    require_fleet
    [[ $EUID -eq 0 ]] || die "generator needs root (network namespaces)"
    [[ ${#REST[@]} -eq 1 ]] || die "generator: give pulses a second or off, e.g. \`generator 10\`"
    ((GENICAM_LINE == 1)) || die "generator: the fleet's cameras are on no wire (\`up --genicam-line\`)"
    local rate=${REST[0]}
    [[ $rate == off || $rate =~ ^[0-9]+([.][0-9]+)?$ ]] || die "generator $rate: pulses a second, e.g. 10, or off"
    stop_processes TERM 5 line-generator
    if [[ $rate == off ]]; then
        echo "the trigger generator is off"
    else
        start_generator "$rate"
        echo "a trigger generator pulses the wire at $rate Hz"
    fi
}

# Agent host $2's link down (partition) or up again (heal).
cmd_link() {
    local verb=$1
    shift
    all_options "$@"
    resolve_fleet
    require_fleet
    [[ $EUID -eq 0 ]] || die "$verb needs root (network namespaces)"
    [[ ${#REST[@]} -eq 1 ]] || die "$verb: give the agent's number (or storage), e.g. \`$verb 2\`"
    local host name
    if [[ ${REST[0]} == storage ]]; then
        host=$(ns st) name="the storage host"
    else
        check_agent_index "${REST[0]}"
        host=$(ns "a${REST[0]}") name="agent host a${REST[0]}"
    fi
    fleet_namespaces | grep -qx -- "$host" || die "fleet '$PREFIX' has no namespace $host"
    if [[ $verb == partition ]]; then
        ip -n "$host" link set eth0 down
        echo "$name is off the network"
    else
        ip -n "$host" link set eth0 up
        echo "$name is back on the network"
    fi
}

cmd_status() {
    all_options "$@"
    resolve_fleet
    [[ ${#REST[@]} -eq 0 ]] || die "status: unexpected '${REST[*]}'"
    local namespaces
    namespaces=$(fleet_namespaces | sort -V | paste -sd ' ')
    echo "namespaces of fleet '$PREFIX': ${namespaces:-none}"
    if ! load_fleet; then
        echo "no fleet.env in $DATA: nothing was started there"
        return 0
    fi
    echo "state in $DATA, binary $BIN"
    local file name pid
    for file in "$DATA"/pids/*.pid; do
        [[ -e $file ]] || continue
        name=$(basename "$file" .pid)
        pid=$(cat "$file")
        if is_fleet_process "$pid"; then
            printf '  %-14s pid %-8s running\n' "$name" "$pid"
        else
            printf '  %-14s pid %-8s not running (log: %s)\n' "$name" "$pid" "$DATA/logs/$name.log"
        fi
    done
    if is_running coordinator && [[ $namespaces == *"$(ns coord)"* ]]; then
        echo
        cli_run nodes --timeout 2 || echo "(the coordinator did not answer)"
    fi
}

main() {
    # Only this script's settings reach the processes it starts: a CAPFLEET_CONTROL_PORT or
    # CAPFLEET_TEST_CLOCK_SKEW left in the caller's shell would quietly change the fleet.
    local variable
    for variable in $(compgen -e | grep '^CAPFLEET_' || true); do
        [[ $variable == CAPFLEET_BIN || $variable == CAPFLEET_LOG_LEVEL ]] || unset "$variable"
    done
    while [[ $# -gt 0 ]]; do
        common_option "$@"
        ((OPTION_WORDS > 0)) || break
        shift "$OPTION_WORDS"
    done
    [[ $# -gt 0 ]] || { usage >&2; exit 2; }
    local command=$1
    shift
    case $command in
    help) usage ;;
    up) cmd_up "$@" ;;
    down) cmd_down "$@" ;;
    cli) cmd_cli "$@" ;;
    exec) cmd_exec "$@" ;;
    impair) cmd_impair "$@" ;;
    restart-agent) cmd_restart_agent "$@" ;;
    partition | heal) cmd_link "$command" "$@" ;;
    generator) cmd_generator "$@" ;;
    status) cmd_status "$@" ;;
    *) die "unknown command '$command' (see --help)" ;;
    esac
}

main "$@"
