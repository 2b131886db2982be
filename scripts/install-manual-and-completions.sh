#!/usr/bin/env bash
# Installs capfleet's manual pages and its bash, zsh and fish completions, made by the binary
# itself (its help, through scripts/generate-manpages.py, and ArgumentParser's completion
# scripts), so that they describe exactly the commands and options it has. Shared by the
# package (scripts/build-deb.sh) and the installer without one (deploy/install.sh).
#
#   scripts/install-manual-and-completions.sh BINARY ROOT PREFIX
#
# Writes under ROOT/PREFIX/share, where each reader looks for PREFIX (/usr or /usr/local):
# man/man1/*.1.gz, bash-completion/completions/capfleet, zsh's vendor-completions (/usr) or
# site-functions (elsewhere)/_capfleet, fish/vendor_completions.d/capfleet.fish. Prints one
# line per kind.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 3 ] || { echo "usage: $0 BINARY ROOT PREFIX" >&2; exit 2; }
binary=$1 share=$2$3/share
# Debian's zsh reads packages' completions from vendor-completions, the local admin's from site-functions.
if [ "$3" = /usr ]; then zsh_dir=zsh/vendor-completions; else zsh_dir=zsh/site-functions; fi

manual=$share/man/man1
mkdir -p "$manual"
/usr/bin/python3 scripts/generate-manpages.py "$binary" "$manual" >/dev/null
gzip -9nf "$manual"/capfleet*.1
chmod 0644 "$manual"/capfleet*.1.gz
echo "manual    $manual ($(find "$manual" -name 'capfleet*.1.gz' | wc -l) pages)"

for shell in bash zsh fish; do
    case $shell in
        bash) file=$share/bash-completion/completions/capfleet ;;
        zsh) file=$share/$zsh_dir/_capfleet ;;
        fish) file=$share/fish/vendor_completions.d/capfleet.fish ;;
    esac
    mkdir -p "$(dirname "$file")"
    # Sourced, never run: no #! line (Debian's bash-completion-with-hashbang).
    "$binary" --generate-completion-script "$shell" | sed '1{/^#!/d}' >"$file"
    chmod 0644 "$file"
    echo "completion $file"
done
