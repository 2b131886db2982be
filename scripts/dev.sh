#!/usr/bin/env bash
# Installs what is needed, builds capfleet (release) and runs the embedded default: a
# coordinator and two agents on this machine with synthetic cameras, state in ./capfleet-data.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
swift build -c release --product capfleet
echo "capfleet is at $(swift build -c release --show-bin-path)/capfleet"
exec "$(swift build -c release --show-bin-path)/capfleet" dev "$@"
