#!/usr/bin/env bash
# Installs what is needed, builds capfleet (release) and runs the embedded default: a
# coordinator and two agents on this machine with synthetic cameras, state in ./capfleet-data.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
swift build -c release --product capfleet
binary="$(swift build -c release --show-bin-path)/capfleet"
echo "capfleet is at $binary"
# `capfleet --help` points at `man capfleet-…`: the manual (and shell completions) go where a
# user's man and shell look without root, ~/.local/share, made by this very binary.
scripts/install-manual-and-completions.sh "$binary" "$HOME" /.local
if ! man -w capfleet >/dev/null 2>&1; then
    echo "man does not look in ~/.local/share/man here: add it with export MANPATH=\"\$HOME/.local/share/man:\" (or use capfleet help COMMAND)"
fi
exec "$binary" dev "$@"
