#!/usr/bin/env bash
# The benchmarks: figures printed (with ratios against baselines measured in the same run),
# never asserted. Run from the release binaries (scripts/build-release.sh builds them if
# they are missing or stale); the clock and stills benchmarks build network namespaces and
# need root.
#
#   scripts/bench.sh            the figures the README quotes (about 15 minutes on 2 cores)
#   scripts/bench.sh --short    every benchmark, briefly (a few minutes): what the test suite
#                               runs, so that each one keeps working and prints figures; one
#                               fleet size each and short windows make its figures noisy (the
#                               200-agent fleet is the test suite's many-agents step)
#
# Each duration can be set on its own (CAPFLEET_CLOCK_BENCH_SECONDS=300 and so on, below).
set -euo pipefail
cd "$(dirname "$0")/.."
short=0
case "${1:-}" in
  --short) short=1 ;;
  "") ;;
  *) echo "usage: scripts/bench.sh [--short]" >&2; exit 2 ;;
esac
# pick FULL SHORT: the full run's value or the short run's.
pick() { if [ "$short" = 1 ]; then echo "$2"; else echo "$1"; fi; }

# CAPFLEET_RELEASE_BIN: the folder of release binaries already built (scripts/test.sh sets it).
bin="${CAPFLEET_RELEASE_BIN:-$(scripts/build-release.sh)}"
bench="$bin/capfleet-bench"
started=$(date +%s)
# Each benchmark says how long it took, so a run's time can be read off its log.
run_bench() {
  local began
  began=$(date +%s)
  "$bench" "$@"
  echo "   ($1: $(( $(date +%s) - began )) s)"
}
# capfleet-bench runs the capfleet beside it (and, for the clock, capfleet-relay).
run_bench transport --seconds "${CAPFLEET_BENCH_SECONDS:-$(pick 6 2)}"
run_bench commands --commands "$(pick 200 40)"
run_bench telemetry --seconds "${CAPFLEET_BENCH_SECONDS:-$(pick 8 3)}" --changes "$(pick 40 10)"
# Recording: streams at 1080p30 without drops, MB/s against a plain write, coordinator memory
# over consecutive takes (CAPFLEET_RECORD_BENCH_SUSTAINED_SECONDS=300 for the 5-minute run).
run_bench record --seconds "${CAPFLEET_RECORD_BENCH_SECONDS:-$(pick 10 3)}" --max-streams "$(pick 4 1)" \
  --sustained-seconds "${CAPFLEET_RECORD_BENCH_SUSTAINED_SECONDS:-$(pick 30 6)}"
# Many agents (one small camera each) joining one coordinator: listing times per device and
# the quiet coordinator's CPU per camera (issue "data plane that grows with the fleet").
run_bench fleet --steps "${CAPFLEET_FLEET_BENCH_STEPS:-$(pick 25,100,200 25)}" \
  --clock-settle-seconds "$(pick 90 10)" --quiet-seconds "$(pick 10 4)"
# One full-rate viewer of a 1080p30 camera through the coordinator: frames/s and latency.
# Sensor samples a second one agent delivers without loss, and its CPU for them (issue
# "sound and other sensors").
run_bench sensors --rates "$(pick 1000,10000,100000,400000,800000 1000,50000)" --seconds "$(pick 5 2)"
# Sound against picture over a take with skewed clocks, and an agent's CPU per microphone
# (issue "sound and other sensors"; proto-docs/recordings.md, "Exporting with sound").
run_bench sound --seconds "$(pick 600 8)" --microphones "$(pick 8 4)" --cpu-seconds "$(pick 10 3)"
run_bench view --seconds "${CAPFLEET_BENCH_SECONDS:-$(pick 8 3)}"
# Takes' codecs: CPU per 1080p30 stream, size against raw, FFV1 bit-exact, H.264/HEVC PSNR,
# and cameras recorded without drops per codec against raw (issue "encoding").
run_bench encode --frames "${CAPFLEET_ENCODE_BENCH_FRAMES:-$(pick 30 10)}" --seconds "$(pick 5 3)" --max-streams "$(pick 2 1)"
# What a camera's preview (one JPEG a second) costs its agent, at 640x480 and 1080p.
run_bench preview --seconds "${CAPFLEET_PREVIEW_BENCH_SECONDS:-$(pick 8 3)}"
# What a 1080p30 camera's pre-roll (raw frames kept) costs its agent in memory and CPU, against
# pre-roll off, whose memory must stay flat (issue "moments and the seeds' camera effects").
run_bench preroll --seconds "$(pick 10 3)" --keep "$(pick 2,5 2)" --encoded "$(pick 10,30 5)"
# Auto-framing: the framer's work per frame against a frame copy, its reframing latency, and an
# agent's CPU with framing against faces found alone (issue "moments and the seeds' camera effects").
run_bench framing --seconds "$(pick 8 3)"
# Takes offloaded to a WebDAV server (rclone serve webdav): MB/s per host against rclone copy of
# the same files, every host against one, and capture drops during offload (issue "takes that
# leave the fleet").
run_bench offload --hosts "$(pick 3 2)" --seconds "$(pick 8 2)"
# The web dashboard: coordinator CPU, bytes a second and previews shown to one headless
# Chromium watching a grid of N previews, against the same fleet unwatched, and whether the
# page stays smooth (issue "web dashboard").
run_bench dashboard --steps "${CAPFLEET_DASHBOARD_BENCH_STEPS:-$(pick 20,100,200 20)}" --seconds "${CAPFLEET_BENCH_SECONDS:-$(pick 8 3)}"
# Three agent hosts on network namespaces (deploy/netns-fleet.sh), needs root; also plots
# .build/bench/clock-accuracy.png.
run_bench clock --seconds "${CAPFLEET_CLOCK_BENCH_SECONDS:-$(pick 90 12)}" \
  --impaired-seconds "${CAPFLEET_CLOCK_BENCH_IMPAIRED_SECONDS:-$(pick 45 6)}"
# Synchronised stills on the same test bed (root): the spread of the cameras' capture times
# around the instant against known truth, aligned and unaligned, and the time from request to
# every picture stored, at the streaming size against full resolution and a bracket there.
run_bench stills --count "${CAPFLEET_STILLS_BENCH_COUNT:-$(pick 10 3)}"
# Exposures on the same test bed (root): the cameras film the timecode of the true time, and
# sync_audit's spread is judged free-running, steered and after an agent's restart, beside the
# clock's own error bound and the published figures of other systems (issue "synchronising
# the pictures").
run_bench sync --audit-seconds "${CAPFLEET_SYNC_BENCH_SECONDS:-$(pick 10 4)}" --take-seconds "$(pick 6 3)"
# A fake GigE Vision camera (Aravis's, on a namespace host's own link) through an agent,
# against arv-camera-test-0.8 on the same camera (issue "industrial GenICam cameras").
run_bench genicam --seconds "$(pick 10 4)"
# Three hosts' fake GigE Vision cameras triggered by their agents at every slot of the grid:
# trigger lateness, and the exposure spread free-running against triggered; then the same with
# PTP-locked cameras sent scheduled action commands.
run_bench genicam-trigger --seconds "$(pick 20 6)"
run_bench genicam-trigger --actions --seconds "$(pick 20 6)" --prefix cfga
echo "== benchmarks done in $(( $(date +%s) - started )) s"
