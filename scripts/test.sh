#!/usr/bin/env bash
# The whole test suite from a fresh clone: installs what is needed, builds, runs every
# test (unit, store, bus, and integration tests with real processes, sockets and SQLite),
# then runs every benchmark briefly (scripts/bench.sh --short), printing its figures.
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

# The release binaries (scripts/build-release.sh): the deployment checks and the benchmarks
# run them. Built after the tests, not beside them: a compiler on the second core, even at idle
# priority, made the tests that record at a camera's rate, run a VM or read the host's pressure
# fail; and beside the debug build (in a folder of its own) both took longer than one after the
# other.
echo "== release build (at $(( $(date +%s) - started )) s)"
bin="$(scripts/build-release.sh)"

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
  # Every benchmark, briefly: each keeps working and prints its figures; scripts/bench.sh
  # without --short gives the figures the README quotes.
  echo "== benchmarks, short (figures printed, not asserted; at $(( $(date +%s) - started )) s)"
  CAPFLEET_RELEASE_BIN="$bin" scripts/bench.sh --short
fi
echo "== done in $(( $(date +%s) - started )) s"
# The suite's verdict, last, for whoever reads only the end of the log.
total=$(printf '%s' "$summary" | grep -oE 'with [0-9]+ tests?' | grep -oE '[0-9]+')
deploy_total=$(printf '%s' "$deploy_summary" | grep -oE '[0-9]+ passed' | grep -oE '[0-9]+')
echo "${total:-0} tests (and the many-agents test again at ${many_agents} agents) and ${deploy_total:-0} deployment checks passed, 0 failed"
