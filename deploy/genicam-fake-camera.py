#!/usr/bin/python3
# Aravis's fake GigE Vision camera (the one arv-fake-gv-camera-0.8 runs: real GVCP and GVSP
# on an interface) with its software-trigger check made frequent enough to test triggering.
#
# Aravis's fake camera looks for a TriggerSoftware command only at the ticks of its "trigger
# frequency" (25 Hz unless set, and no command-line option sets it): a trigger would wait up
# to 40 ms for the frame it starts. Here it is checked every 1/RATE s (default 2 kHz: a
# trigger starts its frame within 0.5 ms), which is what the fleet's triggered-capture tests
# and benchmark need. Free-running, it behaves exactly as arv-fake-gv-camera-0.8 does.
#
#   genicam-fake-camera.py --interface eth0 --serial CF-a1 [--lost-per-thousand N] [--trigger-check-hz 2000]
#
# System Python (python3-gi, gir1.2-aravis-0.8). Runs until SIGTERM or SIGINT.
import argparse
import signal
import sys

import gi

gi.require_version("Aravis", "0.8")
from gi.repository import Aravis, GLib  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--interface", required=True, help="interface name or address to answer on")
    parser.add_argument("--serial", required=True, help="the camera's serial number")
    parser.add_argument("--lost-per-thousand", type=float, default=0, help="GVSP packets lost per thousand")
    parser.add_argument("--trigger-check-hz", type=float, default=2000, help="how often a software trigger is looked for")
    options = parser.parse_args()

    camera = Aravis.GvFakeCamera.new(options.interface, options.serial)
    if not camera.is_running():
        print(f"genicam-fake-camera: cannot answer on {options.interface}", file=sys.stderr)
        return 1
    camera.set_property("gvsp-lost-ratio", options.lost_per_thousand / 1000.0)
    camera.get_fake_camera().set_trigger_frequency(options.trigger_check_hz)
    print(f"genicam-fake-camera: {options.serial} on {options.interface}, triggers checked at {options.trigger_check_hz:g} Hz", flush=True)

    loop = GLib.MainLoop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, signum, loop.quit)
    loop.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
