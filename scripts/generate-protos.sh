#!/usr/bin/env bash
# Regenerates Sources/FleetProtocol/Generated from proto-docs/*.proto, and records what it
# was generated from (Generated/generated-from.sha256: the plugin's swift-protobuf release
# and the SHA-256 of every .proto and every generated file).
#
#   scripts/generate-protos.sh                  regenerates, and records
#   scripts/generate-protos.sh --check          regenerates into a temporary folder and fails,
#                                               listing the files, where the committed code
#                                               differs from what the .proto files give
#   scripts/generate-protos.sh --check-recorded checks the record instead, without building the
#                                               plugin (what CI runs, in seconds): fails when a
#                                               .proto changed, was added or removed since the
#                                               code was generated, when generated code was edited
#                                               by hand, or when the package now resolves another
#                                               swift-protobuf than the one that generated it
#
# Needs Debian's protoc (protobuf-compiler) and protoc-gen-swift: the plugin of the
# swift-protobuf release the package depends on, built as a product of this package.
# PROTOC_GEN_SWIFT names another plugin binary.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
check=0
record="Sources/FleetProtocol/Generated/generated-from.sha256"
# The swift-protobuf release the package resolves (and so the plugin it builds).
resolved_protobuf() {
  (cd "$root" && swift package resolve >/dev/null 2>&1 || true)
  python3 - "$root/.build/workspace-state.json" <<'PY'
import json, sys
state = json.load(open(sys.argv[1]))
for dependency in state["object"]["dependencies"]:
    if dependency["packageRef"]["identity"] == "swift-protobuf":
        print(dependency["state"]["checkoutState"]["version"])
        break
else:
    sys.exit("swift-protobuf is not among the package's resolved dependencies")
PY
}
write_record() {
  (
    cd "$root"
    echo "# What Generated/*.pb.swift was made from, written by scripts/generate-protos.sh and"
    echo "# checked by scripts/generate-protos.sh --check-recorded. Do not edit."
    echo "swift-protobuf $(resolved_protobuf)"
    sha256sum proto-docs/*.proto Sources/FleetProtocol/Generated/*.pb.swift
  ) > "$root/$record.new"
  mv "$root/$record.new" "$root/$record"
}
case "${1:-}" in
  --check) check=1 ;;
  --check-recorded)
    cd "$root"
    [ -f "$record" ] || { echo "generate-protos: $record is missing: run scripts/generate-protos.sh and commit it" >&2; exit 1; }
    problems=0
    recorded_version=$(sed -n 's/^swift-protobuf //p' "$record")
    version=$(resolved_protobuf)
    if [ "$recorded_version" != "$version" ]; then
      echo "generate-protos: the code was generated with swift-protobuf $recorded_version and the package now resolves $version" >&2
      problems=1
    fi
    listed=$(grep -E '^[0-9a-f]{64}  ' "$record" | cut -c67- | sort)
    present=$(ls proto-docs/*.proto Sources/FleetProtocol/Generated/*.pb.swift | sort)
    if [ "$listed" != "$present" ]; then
      echo "generate-protos: files added or removed since the code was generated:" >&2
      diff <(echo "$listed") <(echo "$present") | grep -E '^[<>]' | sed 's/^</  gone:/; s/^>/  new: /' >&2
      problems=1
    fi
    if ! changed=$(grep -E '^[0-9a-f]{64}  ' "$record" | sha256sum --check --quiet 2>/dev/null); then
      echo "generate-protos: changed since the code was generated (a .proto edited without regenerating, or generated code edited by hand):" >&2
      echo "$changed" | sed 's/: FAILED.*//; s/^/  /' >&2
      problems=1
    fi
    if [ "$problems" = 1 ]; then
      echo "generate-protos: run scripts/generate-protos.sh and commit what it writes" >&2
      exit 1
    fi
    echo "generated code matches its record: $(echo "$present" | grep -c '\.pb\.swift$') files from $(echo "$present" | grep -c '\.proto$') .proto files, swift-protobuf $version"
    exit 0
    ;;
  "") ;;
  *) echo "usage: scripts/generate-protos.sh [--check | --check-recorded]" >&2; exit 2 ;;
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
  if ! diff -r -q -x generated-from.sha256 "$committed" "$out" > "$out.diff" 2>&1; then
    sed 's|'"$out"'|(from proto-docs)|' "$out.diff" >&2
    rm -f "$out.diff"
    echo "generate-protos: the generated code in Sources/FleetProtocol/Generated does not match proto-docs/*.proto: run scripts/generate-protos.sh and commit both" >&2
    exit 1
  fi
  rm -f "$out.diff"
  echo "generated code matches proto-docs: $(ls "$out" | wc -l) files"
else
  write_record
  echo "generated: $(ls "$out"/*.pb.swift | xargs -n1 basename | tr '\n' ' '); recorded in $record"
fi
