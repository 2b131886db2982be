#!/usr/bin/env bash
# The whole test suite from a fresh clone: installs what is needed, builds, runs every
# test (unit, store, bus, and integration tests with real processes, sockets and SQLite),
# then prints the transport, command, telemetry and clock benchmarks' figures.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)
# Debian packages (apt-get update + install), Python modules, and a check for Swift.
scripts/install-deps.sh

echo "== the vivid VM rig (Debian's kernel under QEMU, for the V4L2 tests)"
Tests/vm/prepare.sh

echo "== build"
swift build --build-tests

echo "== tests (at $(( $(date +%s) - started )) s)"
# Integration tests run the capfleet (and capfleet-relay) binaries built above, next to the test bundle.
status=0
# The decoder fuzz tests run this many seconds per target (five targets).
export CAPFLEET_FUZZ_SECONDS="${CAPFLEET_FUZZ_SECONDS:-20}"
# The many-agents test runs a few agents here, and this many after the release build.
many_agents="${CAPFLEET_MANY_AGENTS:-200}"
unset CAPFLEET_MANY_AGENTS
swift test --skip-build 2>&1 | tee .build/test-output.txt || status=$?
summary=$(grep -E 'Test run with [0-9]+ tests?' .build/test-output.txt | tail -1 || true)
if [ "$status" -ne 0 ]; then
  echo "tests failed (exit $status): $summary" >&2
  exit "$status"
fi

# The release binary, with the Swift runtime linked in (the Debian package and the container
# image carry no toolchain); the deployment checks and the benchmarks run it. The benchmarks
# and the test bed's relay are binaries of their own beside it, never in the package. Built
# after the tests, not beside them: a compiler on the second core, even at idle priority, made
# the tests that record at a camera's rate, run a VM or read the host's pressure fail; and
# beside the debug build (in a folder of its own) both took longer than one after the other.
echo "== release build (at $(( $(date +%s) - started )) s)"
swift build -c release --product capfleet --static-swift-stdlib >/dev/null
# The same flags for all three: another set would compile every module again.
swift build -c release --product capfleet-bench --static-swift-stdlib >/dev/null
swift build -c release --product capfleet-relay --static-swift-stdlib >/dev/null
bin="$(swift build -c release --show-bin-path)"

# Many agents on one coordinator, asserted: the integration test above ran with a few debug
# agents; here it runs 200 release agents (what ships; 200 debug agents outrun two cores) in a
# step of its own, so that nothing else competes with them (about a minute, under 3 GB).
echo "== many agents (${many_agents} agents with one camera each on one coordinator, at $(( $(date +%s) - started )) s)"
many_status=0
CAPFLEET_MANY_AGENTS="$many_agents" CAPFLEET_BINARY="$bin/capfleet" \
  swift test --skip-build --filter ManyAgentsTests 2>&1 | tee .build/many-agents-output.txt || many_status=$?
if [ "$many_status" -ne 0 ] || ! grep -qE 'Test run with 1 test .*passed' .build/many-agents-output.txt; then
  echo "the many-agents test failed (exit $many_status) at ${many_agents} agents" >&2
  exit $(( many_status == 0 ? 1 : many_status ))
fi
echo "== deployment (package, units, installed layout, manifests; at $(( $(date +%s) - started )) s)"
deploy_status=0
scripts/check-deploy.sh "$bin/capfleet" 2>&1 | tee .build/deploy-output.txt || deploy_status=$?
deploy_summary=$(grep -E '^deployment checks:' .build/deploy-output.txt | tail -1 || true)
if [ "$deploy_status" -ne 0 ]; then
  echo "deployment checks failed (exit $deploy_status): $deploy_summary" >&2
  exit "$deploy_status"
fi

if [ "${CAPFLEET_SKIP_BENCH:-0}" != "1" ]; then
  echo "== benchmark (figures printed, not asserted; at $(( $(date +%s) - started )) s)"
  # capfleet-bench runs the capfleet beside it (and, for the clock, capfleet-relay).
  bench="$bin/capfleet-bench"
  "$bench" transport --seconds "${CAPFLEET_BENCH_SECONDS:-6}"
  "$bench" commands --commands 200
  "$bench" telemetry --seconds "${CAPFLEET_BENCH_SECONDS:-8}" --changes 40
  # Recording: streams at 1080p30 without drops, MB/s against a plain write, coordinator memory
  # over consecutive takes (CAPFLEET_RECORD_BENCH_SUSTAINED_SECONDS=300 for the 5-minute run).
  "$bench" record --seconds "${CAPFLEET_RECORD_BENCH_SECONDS:-10}" \
    --max-streams 4 --sustained-seconds "${CAPFLEET_RECORD_BENCH_SUSTAINED_SECONDS:-30}"
  # Many agents (one small camera each) joining one coordinator: listing times per device and
  # the quiet coordinator's CPU per camera (issue "data plane that grows with the fleet").
  "$bench" fleet --steps "${CAPFLEET_FLEET_BENCH_STEPS:-25,100,200}"
  # One full-rate viewer of a 1080p30 camera through the coordinator: frames/s and latency.
  "$bench" view --seconds "${CAPFLEET_BENCH_SECONDS:-8}"
  # Takes' codecs: CPU per 1080p30 stream, size against raw, FFV1 bit-exact, H.264/HEVC PSNR,
  # and cameras recorded without drops per codec against raw (issue "encoding").
  "$bench" encode --frames "${CAPFLEET_ENCODE_BENCH_FRAMES:-30}" --seconds 5 --max-streams 2
  # What a camera's preview (one JPEG a second) costs its agent, at 640x480 and 1080p.
  "$bench" preview --seconds "${CAPFLEET_PREVIEW_BENCH_SECONDS:-8}"
  # The web dashboard: coordinator CPU and bytes a second to one headless Chromium watching a
  # grid of N previews, against the same fleet unwatched (issue "web dashboard").
  "$bench" dashboard --steps "${CAPFLEET_DASHBOARD_BENCH_STEPS:-20,100}" --seconds "${CAPFLEET_BENCH_SECONDS:-8}"
  # Three agent hosts on network namespaces (deploy/netns-fleet.sh), needs root; also plots
  # .build/bench/clock-accuracy.png.
  "$bench" clock --seconds "${CAPFLEET_CLOCK_BENCH_SECONDS:-90}" \
    --impaired-seconds "${CAPFLEET_CLOCK_BENCH_IMPAIRED_SECONDS:-45}"
fi
echo "== done in $(( $(date +%s) - started )) s"
# The suite's verdict, last, for whoever reads only the end of the log.
total=$(printf '%s' "$summary" | grep -oE 'with [0-9]+ tests?' | grep -oE '[0-9]+')
deploy_total=$(printf '%s' "$deploy_summary" | grep -oE '[0-9]+ passed' | grep -oE '[0-9]+')
echo "${total:-0} tests (and the many-agents test again at ${many_agents} agents) and ${deploy_total:-0} deployment checks passed, 0 failed"
