#!/usr/bin/env bash
# Checks that Swift files are laid out as the toolchain's `swift format` lays them out with
# the repository's .swift-format, and lists those that are not (fix: scripts/check-format.sh
# --fix, or `swift format format -i FILE`). The generated protobuf code is left alone.
#
#   scripts/check-format.sh              every Swift file under Sources/ and Tests/
#   scripts/check-format.sh REF          only those changed since the git revision REF, and
#                                        new ones git does not track yet (not ignored)
#   scripts/check-format.sh --fix [REF]  formats them in place instead
set -euo pipefail
cd "$(dirname "$0")/.."
fix=0
if [ "${1:-}" = "--fix" ]; then fix=1; shift; fi
if [ -n "${1:-}" ]; then
  # New files too: a file made since REF but not yet added is as much the change as an edited one.
  mapfile -t files < <({
    git diff --name-only --diff-filter=d "$1" -- 'Sources/*.swift' 'Tests/*.swift'
    git ls-files --others --exclude-standard -- 'Sources/*.swift' 'Tests/*.swift'
  } | grep -v '/Generated/' | sort -u || true)
else
  mapfile -t files < <(git ls-files 'Sources/*.swift' 'Tests/*.swift' | grep -v '/Generated/')
fi
[ ${#files[@]} -gt 0 ] || { echo "format: no Swift files to check"; exit 0; }
if [ "$fix" = 1 ]; then
  swift format format -i --parallel --configuration .swift-format "${files[@]}"
  echo "format: formatted ${#files[@]} files"
  exit 0
fi
# One swift-format process over copies of the files (one per file costs a second each).
copies=$(mktemp -d)
trap 'rm -rf "$copies"' EXIT
for file in "${files[@]}"; do mkdir -p "$copies/$(dirname "$file")"; cp "$file" "$copies/$file"; done
(cd "$copies" && swift format format -i --parallel --configuration "$OLDPWD/.swift-format" "${files[@]}")
unformatted=()
for file in "${files[@]}"; do
  cmp -s "$copies/$file" "$file" || unformatted+=("$file")
done
if [ ${#unformatted[@]} -gt 0 ]; then
  printf '   %s\n' "${unformatted[@]}" >&2
  echo "format: ${#unformatted[@]} of ${#files[@]} Swift files are not as swift format lays them out: scripts/check-format.sh --fix, then commit" >&2
  exit 1
fi
echo "format: ${#files[@]} Swift files as swift format lays them out"
