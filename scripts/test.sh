#!/usr/bin/env bash
# The whole test suite from a fresh clone: installs what is needed, builds once, runs every
# test (unit, store, bus, and integration tests with real processes, sockets and SQLite),
# the many-agents test at 200 agents, the deployment checks, then every benchmark briefly
# (scripts/bench.sh --short), printing its figures. Prints each step's time, and a table of
# them at the end (the README, "Tests and CI", says what they were here).
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)
step_names=()
step_seconds=()
step_began=$started
step_name=""
# step NAME: ends the step running (its time recorded) and starts NAME.
step() {
  local now
  now=$(date +%s)
  if [ -n "$step_name" ]; then
    step_names+=("$step_name")
    step_seconds+=($(( now - step_began )))
    echo "   ($step_name: $(( now - step_began )) s)"
  fi
  step_name="$1"
  step_began=$now
  [ -n "$step_name" ] && echo "== $step_name (at $(( now - started )) s)"
  return 0
}
times_table() {
  step ""
  echo "== time by step"
  local i
  for i in "${!step_names[@]}"; do printf '   %6d s  %s\n' "${step_seconds[$i]}" "${step_names[$i]}"; done
  printf '   %6d s  in all\n' "$(( $(date +%s) - started ))"
}

step "Debian packages and Python modules"
scripts/install-deps.sh

step "the vivid VM rig (Debian's kernel under QEMU, for the V4L2 tests)"
Tests/vm/prepare.sh

# One build serves everything after it: the release binaries (optimised, the Swift runtime
# linked in, as shipped) and the test bundle, compiled with testing enabled. Two builds, a
# debug one for the tests and a release one for the rest, took half of the run's time.
step "build (release, with the tests; log in .build/release-build.log)"
bin="$(scripts/build-release.sh --with-tests)"

# Habits: the layout swift format gives (.swift-format), the imports each target has against
# Package.swift (and the layers: only FleetBus speaks to libzmq, recordings know no
# database), and the committed protobuf code against the record of what it was generated
# from (the .proto files' and the code's SHA-256, the plugin's release: seconds, where
# regenerating needs the plugin built, a minute; scripts/generate-protos.sh --check does that).
step "checks: formatting, imports and generated code"
scripts/check-format.sh
scripts/check-imports.py
scripts/generate-protos.sh --check-recorded

step "tests"
# Integration tests run the capfleet (and capfleet-relay) binaries built above, next to the test bundle.
status=0
# The decoder fuzz tests run this many seconds per target (five targets).
# Each run fuzzes from a new seed, so the runs add up; 10 s keeps the first lane short.
export CAPFLEET_FUZZ_SECONDS="${CAPFLEET_FUZZ_SECONDS:-10}"
# The many-agents test runs a few agents here, and this many in a step of its own below.
many_agents="${CAPFLEET_MANY_AGENTS:-200}"
unset CAPFLEET_MANY_AGENTS
swift test -c release --skip-build 2>&1 | tee .build/test-output.txt || status=$?
summary=$(grep -E 'Test run with [0-9]+ tests?' .build/test-output.txt | tail -1 || true)
if [ "$status" -ne 0 ]; then
  times_table
  echo "tests failed (exit $status): $summary" >&2
  exit "$status"
fi

# Many agents on one coordinator, asserted, in a step of its own so that nothing else
# competes with them (about a minute, under 3 GB).
step "many agents (${many_agents} agents with one camera each on one coordinator)"
many_status=0
CAPFLEET_MANY_AGENTS="$many_agents" CAPFLEET_BINARY="$bin/capfleet" \
  swift test -c release --skip-build --filter ManyAgentsTests 2>&1 | tee .build/many-agents-output.txt || many_status=$?
if [ "$many_status" -ne 0 ] || ! grep -qE 'Test run with 1 test .*passed' .build/many-agents-output.txt; then
  times_table
  echo "the many-agents test failed (exit $many_status) at ${many_agents} agents" >&2
  exit $(( many_status == 0 ? 1 : many_status ))
fi

step "deployment (package, units, installed layout, manifests)"
deploy_status=0
scripts/check-deploy.sh "$bin/static/capfleet" 2>&1 | tee .build/deploy-output.txt || deploy_status=$?
deploy_summary=$(grep -E '^deployment checks:' .build/deploy-output.txt | tail -1 || true)
if [ "$deploy_status" -ne 0 ]; then
  times_table
  echo "deployment checks failed (exit $deploy_status): $deploy_summary" >&2
  exit "$deploy_status"
fi

if [ "${CAPFLEET_SKIP_BENCH:-0}" != "1" ]; then
  # Every benchmark, briefly: each keeps working and prints its figures; scripts/bench.sh
  # without --short gives the figures the README quotes.
  step "benchmarks, short (figures printed, not asserted)"
  CAPFLEET_RELEASE_BIN="$bin" scripts/bench.sh --short
fi
times_table
# The suite's verdict, last, for whoever reads only the end of the log.
total=$(printf '%s' "$summary" | grep -oE 'with [0-9]+ tests?' | grep -oE '[0-9]+')
deploy_total=$(printf '%s' "$deploy_summary" | grep -oE '[0-9]+ passed' | grep -oE '[0-9]+')
echo "${total:-0} tests (and the many-agents test again at ${many_agents} agents) and ${deploy_total:-0} deployment checks passed, 0 failed"
