#!/usr/bin/env bash
# Installs what CaptureFleet needs on Debian 12: the C libraries it links (libzmq with
# CURVE, libv4l2, SQLite, FFmpeg's libavformat for recordings; ffprobe checks the files),
# protoc for the wire contract, iproute2 for multi-host tests, and Python's pyzmq + protobuf for the example telemetry subscriber, prometheus_client and curl
# for the metrics tests, djpeg to check the black JPEG frames sent without consent, TurboJPEG and zlib
# for pictures (previews, snapshots as JPEG/PNG, contact sheets) and Python's PIL to decode them in the tests, and the QEMU rig that
# runs the kernel's vivid virtual camera for the V4L2 tests (Tests/vm); dpkg-dev, lintian,
# systemd-analyze and PyYAML for the deployment checks (scripts/check-deploy.sh), with man-db and
# groff to render the manual pages and zsh and fish to parse the completions; Debian's chromium, headless,
# for the web dashboard's browser tests and benchmark, and promtool (prometheus) to check /metrics;
# ZBar, OpenCV's object detection with its cascades, and libqrencode for detected codes and faces; rclone for takes offloaded to shared storage. Needs a Swift 6 toolchain
# on PATH (swift.org; Debian does not package one).
set -euo pipefail

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

packages=(libzmq3-dev libv4l-dev libasound2-dev libspeexdsp-dev libaravis-dev libusb-1.0-0-dev aravis-tools python3-gi gir1.2-aravis-0.8 python3-qrcode alsa-utils libsqlite3-dev protobuf-compiler iproute2 python3-zmq python3-protobuf python3-prometheus-client python3-matplotlib curl jq pkg-config libjpeg-turbo-progs
          libturbojpeg0-dev zlib1g-dev python3-pil
          libavformat-dev libavcodec-dev libavutil-dev libavfilter-dev ffmpeg libssl-dev
          v4l-utils qemu-system-x86 busybox-static kmod cpio socat xz-utils zstd
          dpkg-dev lintian systemd python3-yaml man-db groff-base zsh fish chromium prometheus
          libzbar-dev libopencv-objdetect-dev opencv-data libqrencode-dev
          rclone)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing Debian packages: ${missing[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The python3 first on PATH may not be Debian's (pyenv, venv): give it the modules too.
if ! python3 -c 'import zmq, google.protobuf, prometheus_client' 2>/dev/null; then
  python3 -m pip install --quiet --disable-pip-version-check pyzmq protobuf prometheus_client 2>/dev/null \
    || echo "note: python3 on PATH lacks pyzmq/protobuf/prometheus_client; /usr/bin/python3 has Debian's" >&2
fi

# A face for the face-detection tests: Eileen Collins's NASA portrait (public domain), the
# astronaut.png Debian's python3-skimage ships, taken out of the package without installing it
# (and scikit-image's dependencies) into .build-test-assets/.
assets="$(cd "$(dirname "$0")/.." && pwd)/.build-test-assets"
if [ ! -f "$assets/astronaut.png" ]; then
  unpack=$(mktemp -d)
  # As whoever runs this (root in CI: apt's sandbox user could not write the temporary folder).
  (cd "$unpack" && apt-get download -qq -o APT::Sandbox::User="$(id -un)" python3-skimage >/dev/null)
  dpkg-deb --fsys-tarfile "$unpack"/python3-skimage_*.deb | tar -x -C "$unpack" ./usr/lib/python3/dist-packages/skimage/data/astronaut.png
  mkdir -p "$assets"
  cp "$unpack/usr/lib/python3/dist-packages/skimage/data/astronaut.png" "$assets/astronaut.png"
  rm -rf "$unpack"
fi

if ! command -v swift >/dev/null; then
  echo "error: no Swift toolchain on PATH. Install Swift 6.x for Debian 12 from swift.org and put its usr/bin on PATH." >&2
  exit 1
fi
