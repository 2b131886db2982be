#!/usr/bin/python3
# Aravis's fake GigE Vision camera (the one arv-fake-gv-camera-0.8 runs: real GVCP and GVSP
# on an interface) with its software-trigger check made frequent enough to test triggering,
# and optionally a timecode of each frame's own exposure drawn into the picture.
#
# Aravis's fake camera looks for a TriggerSoftware command only at the ticks of its "trigger
# frequency" (25 Hz unless set, and no command-line option sets it): a trigger would wait up
# to 40 ms for the frame it starts. Here it is checked every 1/RATE s (default 2 kHz: a
# trigger starts its frame within 0.5 ms), which is what the fleet's triggered-capture tests
# and benchmark need. Free-running, it behaves exactly as arv-fake-gv-camera-0.8 does.
#
# --timecode X,Y,W draws, in place of Aravis's diagonal ramp, a QR code of the fleet's
# timecode text (proto-docs/clock.md, "The timecode text") "CFTC1 M <boot id> <ns>": the
# CLOCK_MONOTONIC time of the instant the camera stamped the frame with (its exposure, for a
# fake camera), top-left at X,Y and at most W wide as fractions of the frame. An exposure audit
# (`capfleet sync-audit`) of the camera then measures what the camera saw against the fleet
# time the agent stamped on the frame, as the synthetic cameras' --synthetic-overlay does.
#
#   genicam-fake-camera.py --interface eth0 --serial CF-a1 [--lost-per-thousand N]
#                          [--trigger-check-hz 2000] [--timecode 0.05,0.05,0.45]
#
# System Python (python3-gi, gir1.2-aravis-0.8; python3-qrcode for --timecode). Runs until
# SIGTERM or SIGINT.
import argparse
import ctypes
import os
import signal
import sys
import time

import gi

gi.require_version("Aravis", "0.8")
from gi.repository import Aravis, GLib  # noqa: E402

# The fill callback Aravis calls on its stream thread for every frame, with the buffer whose
# size, pixel format and timestamp it has already set (arvfakecamera.c). GObject
# introspection can only hand it a callback for the duration of the call, so it is set
# through ctypes with a callback object this process keeps alive.
FillPattern = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32)


class TimecodePainter:
    """Paints a plain ramp and the timecode QR code of each frame's timestamp."""

    def __init__(self, aravis: ctypes.CDLL, placement: tuple[float, float, float]):
        import qrcode  # only --timecode needs it

        self.qrcode = qrcode
        self.aravis = aravis
        self.x, self.y, self.width = placement
        with open("/proc/sys/kernel/random/boot_id") as file:
            self.boot_id = file.read().strip()
        self.background: dict[tuple[int, int, int], bytes] = {}
        self.callback = FillPattern(self.fill)
        self.failed = False

    @staticmethod
    def realtime_minus_monotonic_ns() -> int:
        # The camera stamps with CLOCK_REALTIME (g_get_real_time): read between two monotonic
        # reads, the closest bracket of three tries.
        best = None
        for _ in range(3):
            before = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
            real = time.clock_gettime_ns(time.CLOCK_REALTIME)
            after = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
            if best is None or after - before < best[0]:
                best = (after - before, real - (before + after) // 2)
        return best[1]

    def fill(self, buffer, _data, _exposure_us, _gain, pixel_format):
        try:
            self.paint(buffer, pixel_format)
        except Exception as error:  # a failing frame must not take the camera's thread down
            if not self.failed:
                self.failed = True
                print(f"genicam-fake-camera: cannot draw the timecode: {error}", file=sys.stderr, flush=True)

    def paint(self, buffer, pixel_format):
        monotonic_ns = self.aravis.arv_buffer_get_timestamp(buffer) - self.realtime_minus_monotonic_ns()
        width = self.aravis.arv_buffer_get_image_width(buffer)
        height = self.aravis.arv_buffer_get_image_height(buffer)
        bytes_per_pixel = max(1, ((pixel_format >> 16) & 0xFF) // 8)
        data = self.aravis.arv_buffer_get_data(buffer, None)
        row_bytes = width * bytes_per_pixel
        key = (width, height, bytes_per_pixel)
        if key not in self.background:
            ramp = bytes((x * 160 // max(1, width - 1) + 48) for x in range(width) for _ in range(bytes_per_pixel))
            self.background[key] = ramp * height
        ctypes.memmove(data, self.background[key], row_bytes * height)

        code = self.qrcode.QRCode(version=5, error_correction=self.qrcode.constants.ERROR_CORRECT_M, border=4, mask_pattern=0)
        code.add_data(f"CFTC1 M {self.boot_id} {monotonic_ns}")
        code.make(fit=False)
        matrix = code.get_matrix()  # with its four modules of quiet zone
        module = int(self.width * width) // len(matrix)
        if module < 1 or int(self.y * height) + module * len(matrix) > height:
            raise ValueError(f"a {width}x{height} frame is too small for the timecode at {self.x},{self.y},{self.width}")
        left = int(self.x * width) * bytes_per_pixel
        top = int(self.y * height)
        for row_index, row in enumerate(matrix):
            line = b"".join((b"\x00" if dark else b"\xff") * (module * bytes_per_pixel) for dark in row)
            for repeat in range(module):
                offset = (top + row_index * module + repeat) * row_bytes + left
                ctypes.memmove(data + offset, line, len(line))


def load_aravis() -> ctypes.CDLL:
    aravis = ctypes.CDLL("libaravis-0.8.so.0")
    aravis.arv_buffer_get_data.restype = ctypes.c_void_p
    aravis.arv_buffer_get_data.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    aravis.arv_buffer_get_timestamp.restype = ctypes.c_uint64
    aravis.arv_buffer_get_timestamp.argtypes = [ctypes.c_void_p]
    for name in ("arv_buffer_get_image_width", "arv_buffer_get_image_height"):
        getattr(aravis, name).restype = ctypes.c_int
        getattr(aravis, name).argtypes = [ctypes.c_void_p]
    aravis.arv_fake_camera_set_fill_pattern.restype = None
    aravis.arv_fake_camera_set_fill_pattern.argtypes = [ctypes.c_void_p, FillPattern, ctypes.c_void_p]
    return aravis


def gobject_pointer(instance) -> int:
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype = ctypes.c_void_p
    get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    return get_pointer(instance.__gpointer__, None)


def placement(text: str) -> tuple[float, float, float]:
    try:
        x, y, width = (float(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text}: X,Y,W as fractions of the frame, e.g. 0.05,0.05,0.45")
    if not (0 <= x < 1 and 0 <= y < 1 and 0 < width <= 1 - x):
        raise argparse.ArgumentTypeError(f"{text}: X and Y in [0, 1), W in (0, 1 - X]")
    return (x, y, width)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--interface", required=True, help="interface name or address to answer on")
    parser.add_argument("--serial", required=True, help="the camera's serial number")
    parser.add_argument("--lost-per-thousand", type=float, default=0, help="GVSP packets lost per thousand")
    parser.add_argument("--trigger-check-hz", type=float, default=2000, help="how often a software trigger is looked for")
    parser.add_argument("--timecode", type=placement, metavar="X,Y,W", help="draw each frame's timecode there")
    options = parser.parse_args()
    # A camera's timing is its own hardware's: ahead of the host's other work where allowed, so
    # that a loaded test machine starves the fleet under test rather than its cameras.
    try:
        os.setpriority(os.PRIO_PROCESS, 0, -10)
    except PermissionError:
        pass

    camera = Aravis.GvFakeCamera.new(options.interface, options.serial)
    if not camera.is_running():
        print(f"genicam-fake-camera: cannot answer on {options.interface}", file=sys.stderr)
        return 1
    camera.set_property("gvsp-lost-ratio", options.lost_per_thousand / 1000.0)
    fake = camera.get_fake_camera()
    fake.set_trigger_frequency(options.trigger_check_hz)
    painter = None
    if options.timecode is not None:
        aravis = load_aravis()
        painter = TimecodePainter(aravis, options.timecode)
        aravis.arv_fake_camera_set_fill_pattern(gobject_pointer(fake), painter.callback, None)
    drawn = " with timecodes" if painter else ""
    print(f"genicam-fake-camera: {options.serial} on {options.interface}, triggers checked at {options.trigger_check_hz:g} Hz{drawn}", flush=True)

    loop = GLib.MainLoop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, signum, loop.quit)
    loop.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
