#!/usr/bin/env bash
# Regenerates Sources/FleetProtocol/Generated from proto-docs/*.proto, or with --check
# regenerates into a temporary folder and fails, listing the files, where the committed code
# differs from what the .proto files give (CI runs the check: a .proto edited without
# regenerating, or generated code edited by hand, fails the run).
#
# Needs Debian's protoc (protobuf-compiler) and protoc-gen-swift: the plugin of the
# swift-protobuf release the package depends on, built as a product of this package.
# PROTOC_GEN_SWIFT names another plugin binary.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
check=0
case "${1:-}" in
  --check) check=1 ;;
  "") ;;
  *) echo "usage: scripts/generate-protos.sh [--check]" >&2; exit 2 ;;
esac
plugin=${PROTOC_GEN_SWIFT:-}
if [ -z "$plugin" ]; then
  if [ "${CAPFLEET_BUILD_WITH_TESTS:-0}" = 1 ]; then
    # In the test run: its build's flags (scripts/build-release.sh --with-tests), so that
    # SwiftProtobuf, compiled already, is not compiled again.
    flags=(-c release -Xswiftc -enable-testing)
  else
    # A folder of its own: the plugin's flags would otherwise rebuild .build's modules.
    flags=(-c release --scratch-path "$root/.build-protoc-gen-swift")
  fi
  log="$root/.build/protoc-gen-swift-build.log"
  mkdir -p "$root/.build"
  if ! (cd "$root" && swift build "${flags[@]}" --product protoc-gen-swift > "$log" 2>&1); then
    tail -20 "$log" >&2
    echo "generate-protos: building protoc-gen-swift failed (log: $log)" >&2
    exit 1
  fi
  plugin="$(cd "$root" && swift build "${flags[@]}" --show-bin-path)/protoc-gen-swift"
fi
committed="$root/Sources/FleetProtocol/Generated"
if [ "$check" = 1 ]; then
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
else
  out="$committed"
  rm -rf "$out" && mkdir -p "$out"
fi
protoc --plugin=protoc-gen-swift="$plugin" \
  --swift_opt=Visibility=Public --swift_opt=FileNaming=DropPath \
  --swift_out="$out" -I "$root/proto-docs" "$root"/proto-docs/*.proto
if [ "$check" = 1 ]; then
  if ! diff -r -q "$committed" "$out" > "$out.diff" 2>&1; then
    sed 's|'"$out"'|(from proto-docs)|' "$out.diff" >&2
    rm -f "$out.diff"
    echo "generate-protos: the generated code in Sources/FleetProtocol/Generated does not match proto-docs/*.proto: run scripts/generate-protos.sh and commit both" >&2
    exit 1
  fi
  rm -f "$out.diff"
  echo "generated code matches proto-docs: $(ls "$out" | wc -l) files"
else
  echo "generated: $(ls "$out" | tr '\n' ' ')"
fi
