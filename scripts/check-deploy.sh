#!/usr/bin/env bash
# Deployment checks, from a release binary (scripts/test.sh runs this after the test suite):
#   - the Debian package builds; its contents, control fields and conffiles are right; lintian
#     finds no error in it, and no missing manual page (where lintian is installed);
#   - it carries a manual page for every command, each rendered by man(1) without a warning,
#     and bash, zsh and fish completions that their shells parse (zsh and fish where installed);
#     the bash completion offers the running fleet's node ids, asked from its coordinator;
#   - the systemd units, as the package installs them, pass `systemd-analyze verify`;
#   - the installed binary starts from the installed layout with the installed settings: a
#     coordinator and an agent (synthetic camera) that reach READY=1 on a notify socket of
#     ours (Type=notify, as systemd would run them), the agent enrolled and online;
#   - deploy/install.sh lays out the same files under --root;
#   - the example settings pass `--check-config`, and every setting the binary knows is
#     documented in them;
#   - the container and Kubernetes files, statically (scripts/check-manifests.py).
#
#   scripts/check-deploy.sh [BINARY]      (default .build/release/capfleet, --static-swift-stdlib)
set -euo pipefail
cd "$(dirname "$0")/.."
binary=${1:-.build/release/capfleet}
work=$(mktemp -d /tmp/capfleet-deploy.XXXXXX)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
passed=0 failed=0
ok() { echo "ok    $1"; passed=$((passed + 1)); }
fail() {
    echo "FAIL  $1"
    failed=$((failed + 1))
    [ -z "${2:-}" ] || sed 's/^/      /' "$2" | tail -n 25
}
# expect WHAT COMMAND...: the command succeeds.
expect() {
    local what=$1
    shift
    if "$@" >"$work/out" 2>&1; then ok "$what"; else fail "$what" "$work/out"; fi
}
# wait_for SECONDS FILE PATTERN: until FILE has a line matching PATTERN.
wait_for() {
    local deadline=$((SECONDS + $1))
    until grep -qE "$3" "$2" 2>/dev/null; do
        ((SECONDS < deadline)) || return 1
        sleep 0.2
    done
}

echo "== the Debian package"
if package=$(scripts/build-deb.sh "$binary" "$work/deb" 2>"$work/out" | tail -n 1) && [ -f "$package" ]; then
    ok "scripts/build-deb.sh builds $(basename "$package")"
else
    fail "scripts/build-deb.sh builds the package" "$work/out"
    echo "deployment checks: $passed passed, $failed failed"
    exit 1
fi
dpkg-deb --contents "$package" >"$work/contents"
for path in ./usr/bin/capfleet ./lib/systemd/system/capfleet-coordinator.service ./lib/systemd/system/capfleet-agent.service \
    ./etc/capfleet/coordinator.conf ./etc/capfleet/agent.conf ./usr/share/doc/capfleet/copyright; do
    if grep -qE " $path\$" "$work/contents"; then ok "the package holds $path"; else fail "the package holds $path" "$work/contents"; fi
done
# Every command's manual page, as the binary's help has them, and the three shells' completions.
mkdir -p "$work/expected-pages"
/usr/bin/python3 scripts/generate-manpages.py "$binary" "$work/expected-pages" >/dev/null
missing_pages=$(cd "$work/expected-pages" && for page in *.1; do grep -qE " ./usr/share/man/man1/$page.gz\$" "$work/contents" || echo "$page"; done)
page_count=$(find "$work/expected-pages" -name '*.1' | wc -l)
if [ -z "$missing_pages" ] && [ "$page_count" -gt 1 ]; then
    ok "the package holds a gzipped manual page for every command ($page_count, capfleet(1) and each subcommand)"
else
    fail "the package holds a gzipped manual page for every command; missing: $missing_pages"
fi
for path in ./usr/share/bash-completion/completions/capfleet ./usr/share/zsh/vendor-completions/_capfleet \
    ./usr/share/fish/vendor_completions.d/capfleet.fish; do
    if grep -qE " $path\$" "$work/contents"; then ok "the package holds $path"; else fail "the package holds $path" "$work/contents"; fi
done
# The product only: no benchmark, no test bed.
if grep -qE 'capfleet-bench|capfleet-relay|netns-fleet' "$work/contents"; then
    fail "the package ships no benchmark or test bed" "$work/contents"
else
    ok "the package ships no benchmark or test bed"
fi
depends=$(dpkg-deb --field "$package" Depends)
for library in adduser libzmq5 libv4l-0 libsqlite3-0 libavformat59; do
    if [[ $depends == *"$library"* ]]; then ok "the package depends on $library"; else fail "the package depends on $library: $depends"; fi
done
if [[ $depends != *swift* ]]; then ok "the package needs no Swift runtime"; else fail "the package needs no Swift runtime: $depends"; fi
dpkg-deb --ctrl-tarfile "$package" | tar -xO ./conffiles >"$work/conffiles"
expect "/etc/capfleet/*.conf are conffiles (an upgrade keeps local changes)" \
    grep -qx /etc/capfleet/coordinator.conf "$work/conffiles"
if command -v lintian >/dev/null; then
    # Errors fail the check; warnings are printed for whoever packages next.
    if lintian --fail-on error --suppress-tags-from-file /dev/null "$package" >"$work/lintian" 2>&1; then
        ok "lintian finds no error ($(grep -c '^W:' "$work/lintian" || true) warning(s))"
        sed 's/^/      /' "$work/lintian"
    else
        fail "lintian finds no error" "$work/lintian"
    fi
    if grep -qE 'no-manual-page|manpage-' "$work/lintian"; then
        fail "lintian finds every binary's manual page, and nothing wrong in any" "$work/lintian"
    else
        ok "lintian finds every binary's manual page, and nothing wrong in any"
    fi
else
    echo "      (lintian not installed: skipped)"
fi

echo "== the installed layout"
root=$work/root
dpkg-deb -x "$package" "$root"
installed=$root/usr/bin/capfleet
expect "the installed binary runs ($("$installed" --version))" "$installed" --help
# One version everywhere (WireDefaults.release): the package's is the binary's.
expect "the package's version is the binary's ($(dpkg-deb -f "$package" Version))" \
    test "$(dpkg-deb -f "$package" Version)" = "$("$installed" --version | awk '{print $1}')"
# `verify` checks ExecStart's binary exists, so it gets the units with the extracted binary's
# path; it exits 0 even on an unknown key, so any complaint it prints fails the check.
mkdir -p "$work/units"
for unit in capfleet-coordinator capfleet-agent; do
    sed "s#/usr/bin/capfleet#$installed#g" "$root/lib/systemd/system/$unit.service" >"$work/units/$unit.service"
    if SYSTEMD_LOG_LEVEL=notice systemd-analyze verify "$work/units/$unit.service" >"$work/out" 2>&1 && ! grep -q . "$work/out"; then
        ok "systemd-analyze verify $unit.service"
    else
        fail "systemd-analyze verify $unit.service" "$work/out"
    fi
done
expect "the installed coordinator.conf passes --check-config" "$installed" coordinator --config "$root/etc/capfleet/coordinator.conf" --check-config
expect "the installed agent.conf passes --check-config" "$installed" agent --config "$root/etc/capfleet/agent.conf" --check-config
for conf in coordinator agent; do
    "$installed" "$conf" --config "$root/etc/capfleet/$conf.conf" --check-config | grep -vE '^settings OK' | awk '{print $1}' >"$work/keys"
    missing=$(while read -r key; do grep -qE "^#? ?$key = " "deploy/$conf.conf" || echo "$key"; done <"$work/keys")
    if [ -z "$missing" ]; then ok "every $conf setting ($(wc -l <"$work/keys")) is documented in deploy/$conf.conf"; else fail "$conf settings not documented in deploy/$conf.conf: $missing"; fi
done

# As a reader would see them: man(1) formats each page with groff's warnings on; any line on
# stderr (a bad request, a line it cannot break) fails the check. lexgrog reads the NAME line
# that whatis and apropos index.
unrendered=$(for page in "$root"/usr/share/man/man1/*.1.gz; do
    if ! LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -E UTF-8 -l "$page" 2>&1 >/dev/null | grep -q . && lexgrog "$page" >/dev/null 2>&1; then
        continue
    fi
    basename "$page"
done)
if [ -z "$unrendered" ]; then
    ok "man -l renders every page without a warning, each with a whatis entry"
else
    fail "man -l renders every page without a warning, each with a whatis entry; not: $unrendered"
fi
expect "bash parses the bash completion (bash -n)" bash -n "$root/usr/share/bash-completion/completions/capfleet"
for shell in zsh fish; do
    case $shell in zsh) file=$root/usr/share/zsh/vendor-completions/_capfleet ;; fish) file=$root/usr/share/fish/vendor_completions.d/capfleet.fish ;; esac
    if command -v "$shell" >/dev/null; then
        expect "$shell parses the $shell completion ($shell -n)" "$shell" -n "$file"
    else
        echo "      ($shell not installed: its completion not parsed)"
    fi
done

echo "== a coordinator and an agent from the installed layout, as systemd runs them (Type=notify)"
read -r -a ports <<<"$(/usr/bin/python3 -c '
import socket
s = [socket.socket() for _ in range(8)]
for x in s: x.bind(("127.0.0.1", 0))
print(" ".join(str(x.getsockname()[1]) for x in s))')"
listen() {   # a notify socket like systemd's: every datagram as one line
    /usr/bin/python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
with open(sys.argv[2], "a", buffering=1) as out:
    while True:
        out.write(s.recv(4096).decode().replace("\n", " | ") + "\n")' "$1" "$2" &
    pids+=($!)
}
listen "$work/coordinator.notify" "$work/coordinator.notified"
listen "$work/agent.notify" "$work/agent.notified"
sleep 0.3
export CAPFLEET_BIND=127.0.0.1 CAPFLEET_CONTROL_PORT=${ports[0]} CAPFLEET_INGEST_PORT=${ports[1]} CAPFLEET_OPERATOR_PORT=${ports[2]} \
    CAPFLEET_TELEMETRY_PORT=${ports[3]} CAPFLEET_HTTP_PORT=${ports[4]} CAPFLEET_CLOCK_PORT=${ports[5]} CAPFLEET_RECORD_PORT=${ports[6]} \
    CAPFLEET_LIVE_PORT=${ports[7]}
NOTIFY_SOCKET=$work/coordinator.notify "$installed" coordinator --config "$root/etc/capfleet/coordinator.conf" --data "$work/coord" \
    >"$work/coordinator.log" 2>&1 &
coordinator=$!
pids+=("$coordinator")
if wait_for 30 "$work/coordinator.notified" 'READY=1'; then
    ok "the coordinator says READY=1 ($(grep -o 'STATUS=[^|]*' "$work/coordinator.notified" | head -n 1))"
else
    fail "the coordinator says READY=1" "$work/coordinator.log"
fi
"$installed" operator add admin --role admin --data "$work/coord" --out "$work/admin.credential" \
    --address "127.0.0.1:${ports[2]}" >/dev/null
expect "the operator endpoint answers once READY=1 is sent" \
    "$installed" nodes --coordinator "127.0.0.1:${ports[2]}" --credential "$work/admin.credential" --timeout 3
token=$("$installed" enroll --name cam-host-1 --data "$work/coord" --quiet)
cp "$root/etc/capfleet/agent.conf" "$work/agent.conf"
printf 'coordinator = 127.0.0.1:%s\nenroll_token = %s\n' "${ports[0]}" "$token" >>"$work/agent.conf"
NOTIFY_SOCKET=$work/agent.notify "$installed" agent --config "$work/agent.conf" --state-dir "$work/agent" \
    --synthetic 1 --no-discover --no-pressure >"$work/agent.log" 2>&1 &
pids+=($!)
if wait_for 30 "$work/agent.notified" 'READY=1'; then ok "the agent, enrolled by agent.conf's token, says READY=1"; else fail "the agent says READY=1" "$work/agent.log"; fi
online=0
for _ in $(seq 1 50); do
    if "$installed" nodes --json --coordinator "127.0.0.1:${ports[2]}" --credential "$work/admin.credential" 2>/dev/null |
        /usr/bin/python3 -c 'import json, sys; sys.exit(0 if any(n["name"] == "cam-host-1" and n["online"] for n in json.load(sys.stdin)) else 1)'; then
        online=1
        break
    fi
    sleep 0.3
done
if [ "$online" = 1 ]; then ok "capfleet nodes lists cam-host-1 online"; else fail "capfleet nodes lists cam-host-1 online" "$work/agent.log"; fi
# A TAB after `capfleet nodes forget `, through the packaged bash completion as bash runs it: the
# node ids come from the coordinator, asked with the operator's credential.
node_id=$("$installed" nodes --json --coordinator "127.0.0.1:${ports[2]}" --credential "$work/admin.credential" 2>/dev/null |
    /usr/bin/python3 -c 'import json, sys; print(next(n["node_id"] for n in json.load(sys.stdin) if n["name"] == "cam-host-1"))' || true)
CAPFLEET_COORDINATOR=127.0.0.1:${ports[2]} CAPFLEET_CREDENTIAL=$work/admin.credential bash --norc --noprofile -c '
source "$1"
line="$2 nodes forget "
COMP_WORDS=("$2" nodes forget "") COMP_CWORD=3 COMP_LINE=$line COMP_POINT=${#line}
_capfleet "$2" "" forget
printf "%s\n" "${COMPREPLY[@]}"' _ "$root/usr/share/bash-completion/completions/capfleet" "$installed" >"$work/completed" 2>&1 || true
if [ -n "$node_id" ] && grep -qx "$node_id" "$work/completed"; then
    ok "the bash completion offers cam-host-1's node id ($node_id) after \`capfleet nodes forget\`"
else
    fail "the bash completion offers cam-host-1's node id (${node_id:-unknown}) after \`capfleet nodes forget\`" "$work/completed"
fi
# The shipped (optimised) binary end to end on the live path: a viewer's subscription wakes the
# camera's flow and its frames arrive whole (black: no consent was given).
device_id=$("$installed" devices --json --coordinator "127.0.0.1:${ports[2]}" --credential "$work/admin.credential" 2>/dev/null |
    /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)[0]["device_id"])' || true)
if [ -n "$device_id" ] && timeout 30 "$installed" view "$device_id" -o "$work/viewed.yuyv" --frames 5 \
        --coordinator "127.0.0.1:${ports[2]}" --credential "$work/admin.credential" >"$work/view.out" 2>&1 &&
    [ "$(stat -c %s "$work/viewed.yuyv")" = $((5 * 640 * 480 * 2)) ]; then
    ok "capfleet view writes 5 whole frames of ${device_id}, woken on demand through the live endpoint"
else
    fail "capfleet view writes 5 whole frames of ${device_id:-the camera}" "$work/view.out"
fi
# Not the same TAB in zsh or fish: zsh completes only in its line editor, and fish's `complete -C`
# in a script gives completion functions no cursor (fish-shell#11993), which the generated script
# passes on. Both were tried by hand in a terminal (tmux) against a running fleet.
kill -TERM "$coordinator"
if wait "$coordinator"; then ok "the coordinator exits 0 on SIGTERM"; else fail "the coordinator exits 0 on SIGTERM" "$work/coordinator.log"; fi
if grep -q 'STOPPING=1' "$work/coordinator.notified"; then ok "the coordinator says STOPPING=1"; else fail "the coordinator says STOPPING=1" "$work/coordinator.notified"; fi

echo "== deploy/install.sh"
expect "deploy/install.sh --root installs" deploy/install.sh --binary "$binary" --root "$work/install-root"
for path in usr/local/bin/capfleet etc/systemd/system/capfleet-agent.service etc/capfleet/agent.conf etc/capfleet/coordinator.conf \
    usr/local/share/man/man1/capfleet.1.gz usr/local/share/man/man1/capfleet-record-start.1.gz \
    usr/local/share/bash-completion/completions/capfleet usr/local/share/zsh/site-functions/_capfleet \
    usr/local/share/fish/vendor_completions.d/capfleet.fish; do
    if [ -e "$work/install-root/$path" ]; then ok "install.sh puts /$path"; else fail "install.sh puts /$path"; fi
done
expect "install.sh points the units at /usr/local/bin/capfleet" grep -q 'ExecStart=/usr/local/bin/capfleet agent' "$work/install-root/etc/systemd/system/capfleet-agent.service"
echo '# local change' >>"$work/install-root/etc/capfleet/agent.conf"
deploy/install.sh --binary "$binary" --root "$work/install-root" >/dev/null
expect "install.sh keeps settings already there" grep -q '# local change' "$work/install-root/etc/capfleet/agent.conf"

echo "== container and Kubernetes files (static)"
if /usr/bin/python3 scripts/check-manifests.py "$installed" >"$work/out" 2>&1; then
    ok "$(tail -n 1 "$work/out")"
else
    fail "scripts/check-manifests.py" "$work/out"
fi

echo "deployment checks: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
