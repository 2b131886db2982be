#!/usr/bin/env bash
# The release binaries, with the Swift runtime linked in (the Debian package and the container
# image carry no toolchain): capfleet, and beside it the benchmarks and the test bed's relay
# (binaries of their own, never in the package). Prints the folder they are in.
# The same flags for all three: another set would compile every module again.
set -euo pipefail
cd "$(dirname "$0")/.."
# The compiler's output goes to a log (thousands of dependencies' warnings), shown on failure.
mkdir -p .build
log=.build/release-build.log
: > "$log"
for product in capfleet capfleet-bench capfleet-relay; do
  if ! swift build -c release --product "$product" --static-swift-stdlib >> "$log" 2>&1; then
    grep -E 'error:' "$log" | head -40 >&2 || true
    tail -20 "$log" >&2
    echo "build-release: building $product failed (whole log: $log)" >&2
    exit 1
  fi
done
swift build -c release --show-bin-path
