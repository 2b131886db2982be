#!/usr/bin/env bash
# Regenerates Sources/FleetProtocol/Generated from proto-docs/*.proto.
# Needs Debian's protoc (protobuf-compiler) and protoc-gen-swift, which this script
# builds once from the swift-protobuf release the package depends on (under a minute).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
plugin=${PROTOC_GEN_SWIFT:-}
if [ -z "$plugin" ]; then
  work="$root/.build-protoc-gen-swift"
  if [ ! -x "$work/src/.build/release/protoc-gen-swift" ]; then
    rm -rf "$work/src"
    git clone --quiet --branch 1.39.0 https://github.com/apple/swift-protobuf "$work/src"
    (cd "$work/src" && swift build -c release --product protoc-gen-swift)
  fi
  plugin="$work/src/.build/release/protoc-gen-swift"
fi
out="$root/Sources/FleetProtocol/Generated"
rm -rf "$out" && mkdir -p "$out"
protoc --plugin=protoc-gen-swift="$plugin" \
  --swift_opt=Visibility=Public --swift_opt=FileNaming=DropPath \
  --swift_out="$out" -I "$root/proto-docs" "$root"/proto-docs/*.proto
echo "generated: $(ls "$out" | tr '\n' ' ')"
