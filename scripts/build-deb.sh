#!/usr/bin/env bash
# Builds the Debian package from a release binary: capfleet_VERSION_ARCH.deb with the binary,
# its manual pages and bash, zsh and fish completions (made by the binary), the systemd units
# (deploy/systemd), the annotated settings as conffiles (deploy/*.conf) and the maintainer
# scripts that add the capfleet system user (deploy/debian). Only `capfleet`:
# the benchmarks (capfleet-bench) and the test bed (capfleet-relay, deploy/netns-fleet.sh,
# which needs the relay) stay in the source tree.
#
#   scripts/build-deb.sh [BINARY] [OUTDIR]
#
# BINARY: default .build/release/capfleet, built with --static-swift-stdlib so that the package
# needs no Swift toolchain (its Depends come from dpkg-shlibdeps: libzmq5, libv4l-0, ...).
# OUTDIR: default .build/deb. Prints the package's path last.
set -euo pipefail
cd "$(dirname "$0")/.."
binary=${1:-.build/release/capfleet}
out=${2:-.build/deb}
[ -x "$binary" ] || { echo "build-deb: no binary at $binary: swift build -c release --product capfleet --static-swift-stdlib" >&2; exit 2; }
if ldd "$binary" | grep -q 'libswiftCore'; then
    echo "build-deb: $binary links the Swift runtime dynamically: build it with --static-swift-stdlib" >&2
    exit 2
fi
version=$("$binary" --version | awk '{print $1}')
arch=$(dpkg --print-architecture)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

install -D -m 0755 "$binary" "$stage/usr/bin/capfleet"
strip --strip-unneeded "$stage/usr/bin/capfleet"
install -D -m 0644 deploy/systemd/capfleet-coordinator.service "$stage/lib/systemd/system/capfleet-coordinator.service"
install -D -m 0644 deploy/systemd/capfleet-agent.service "$stage/lib/systemd/system/capfleet-agent.service"
install -D -m 0644 deploy/coordinator.conf "$stage/etc/capfleet/coordinator.conf"
install -D -m 0644 deploy/agent.conf "$stage/etc/capfleet/agent.conf"
install -D -m 0644 deploy/debian/copyright "$stage/usr/share/doc/capfleet/copyright"
install -D -m 0644 README.md "$stage/usr/share/doc/capfleet/README.md"
# capfleet(1) and a page per subcommand, and the bash, zsh and fish completions, from the binary.
# Dated by the last commit, so that the same source builds the same pages.
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
scripts/install-manual-and-completions.sh "$stage/usr/bin/capfleet" "$stage" /usr >/dev/null
printf 'capfleet (%s) unstable; urgency=medium\n\n  * Release %s.\n\n -- CaptureFleet maintainers <maintainers@capturefleet.org>  %s\n' \
    "$version" "$version" "$(date -R)" | gzip -9n >"$stage/usr/share/doc/capfleet/changelog.gz"
chmod 0644 "$stage/usr/share/doc/capfleet/changelog.gz"

# Shared-library dependencies, as dpkg-shlibdeps finds them for the binary.
shlib=$(mktemp -d)
mkdir -p "$shlib/debian"
printf 'Source: capfleet\n\nPackage: capfleet\nArchitecture: any\n' >"$shlib/debian/control"
depends=$(cd "$shlib" && dpkg-shlibdeps -O "$stage/usr/bin/capfleet" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
rm -rf "$shlib"
[ -n "$depends" ] || { echo "build-deb: dpkg-shlibdeps found no dependencies for $binary" >&2; exit 1; }

mkdir -p "$stage/DEBIAN"
sed -e "s/@VERSION@/$version/" -e "s/@ARCH@/$arch/" -e "s/@DEPENDS@/$depends/" deploy/debian/control.in >"$stage/DEBIAN/control"
printf '/etc/capfleet/coordinator.conf\n/etc/capfleet/agent.conf\n' >"$stage/DEBIAN/conffiles"
install -m 0755 deploy/debian/postinst deploy/debian/prerm deploy/debian/postrm "$stage/DEBIAN/"
installed=$(du -ks --exclude=DEBIAN "$stage" | cut -f1)
echo "Installed-Size: $installed" >>"$stage/DEBIAN/control"

mkdir -p "$out"
package="$out/capfleet_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$stage" "$package" >/dev/null
echo "$package"
