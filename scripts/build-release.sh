#!/usr/bin/env bash
# The release binaries, with the Swift runtime linked in (the Debian package and the container
# image carry no toolchain): capfleet, and beside it the benchmarks and the test bed's relay
# (binaries of their own, never in the package). Prints the folder they are in.
#
#   scripts/build-release.sh              what ships: the three binaries, optimised
#   scripts/build-release.sh --with-tests the same binaries and the test bundle in one build,
#                                         with testing enabled (what scripts/test.sh runs: one
#                                         compilation serves the tests, the deployment checks
#                                         and the benchmarks; see the README, "Tests and CI")
#
# One set of flags for everything built: another set would compile every module again.
set -euo pipefail
cd "$(dirname "$0")/.."
with_tests=0
case "${1:-}" in
  --with-tests) with_tests=1 ;;
  "") ;;
  *) echo "usage: scripts/build-release.sh [--with-tests]" >&2; exit 2 ;;
esac
# The compiler's output goes to a log (thousands of dependencies' warnings), shown on failure.
mkdir -p .build
log=.build/release-build.log
: > "$log"
if [ "$with_tests" = 1 ]; then
  # @testable imports need every module compiled for testing; the binaries built with them
  # are the same code, with internal symbols kept visible. Without --static-swift-stdlib:
  # the static runtime has no Swift Testing module, and that flag is on every compilation.
  # Line tables only, not full debug info: crashes in a run still show file and line, and
  # the build (CPU-bound on CI's two cores) takes less time; what ships keeps full -g.
  flags=(-c release -Xswiftc -enable-testing -Xswiftc -gline-tables-only -Xcc -gline-tables-only)
  steps=("--build-tests")
else
  flags=(-c release --static-swift-stdlib)
  steps=("--product capfleet" "--product capfleet-bench" "--product capfleet-relay")
fi
for step in "${steps[@]}"; do
  # shellcheck disable=SC2086 # $step is one or two words by design
  if ! swift build "${flags[@]}" $step >> "$log" 2>&1; then
    grep -E 'error:' "$log" | head -40 >&2 || true
    tail -20 "$log" >&2
    echo "build-release: swift build ${flags[*]} $step failed (whole log: $log)" >&2
    exit 1
  fi
done
bin="$(swift build "${flags[@]}" --show-bin-path)"
if [ "$with_tests" = 1 ]; then
  # What ships carries the Swift runtime: capfleet linked once more from the same objects,
  # with the static runtime (the link SwiftPM ran, plus -static-stdlib), into static/.
  python3 scripts/relink-static.py .build/release.yaml capfleet "$bin/static/capfleet" >> "$log" 2>&1 || {
    tail -20 "$log" >&2
    echo "build-release: linking capfleet with the static Swift runtime failed (whole log: $log)" >&2
    exit 1
  }
fi
echo "$bin"
