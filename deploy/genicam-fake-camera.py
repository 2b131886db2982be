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
#                          [--trigger-check-hz 2000] [--timecode 0.05,0.05,0.45] [--ptp]
#                          [--line-wire DIR]
#   genicam-fake-camera.py --line-wire DIR --line-generator HZ
#
# System Python (python3-gi, gir1.2-aravis-0.8; python3-qrcode for --timecode). Runs until
# SIGTERM or SIGINT.
#
# --ptp makes it a camera whose clock follows IEEE 1588 (a locked PTP slave: PtpEnable,
# PtpStatus Slave) and which takes GigE Vision scheduled action commands (ActionDeviceKey,
# ActionSelector 1, ActionGroupKey, ActionGroupMask; TriggerSource Action1): the features are
# added to Aravis's own GenICam description, and the ACTION_CMD datagrams (which Aravis's fake
# camera ignores) are read off the interface with a packet socket (root or CAP_NET_RAW;
# --interface must then be a name). At an action's time the frame is started and stamped with
# that time, as a PTP camera's exposure is: the fake camera's clock is the host's
# CLOCK_REALTIME, which every host of the test bed shares, as PTP-locked cameras share their
# grandmaster's. No ACTION_ACK is sent (the GVCP port is Aravis's), and a TriggerSoftware
# still starts a frame whatever the source, which a real camera would ignore.
#
# --line-wire DIR gives it I/O lines on a trigger wire the test bed's cameras share (a
# directory of Unix sockets: LineWire below): Line0 an input FrameStart can wait for, Line1 an
# output that can carry ExposureActive to the other cameras' Line0. --line-generator HZ runs,
# in place of a camera, an external generator pulsing the wire at HZ on its own timebase.
import argparse
import collections
import ctypes
import heapq
import os
import signal
import socket
import struct
import sys
import threading
import time

import gi

gi.require_version("Aravis", "0.8")
from gi.repository import Aravis, GLib  # noqa: E402

# The fill callback Aravis calls on its stream thread for every frame, with the buffer whose
# size, pixel format and timestamp it has already set (arvfakecamera.c). GObject
# introspection can only hand it a callback for the duration of the call, so it is set
# through ctypes with a callback object this process keeps alive.
FillPattern = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32)


class FramePainter:
    """Paints each frame: a ramp across the sensor, so that a frame shows which window of it
    the camera read (its region of interest: the column's grey level says how far across, a
    black row every 256 sensor rows how far down), and, with a placement, the timecode QR
    code of the frame's timestamp; a frame an action started is first stamped with the
    action's time."""

    def __init__(
        self,
        aravis: ctypes.CDLL,
        fake,
        placement: tuple[float, float, float] | None,
        exposures: "Exposures | None",
        wire: "LineWire | None",
    ):
        self.fake = fake
        self.qrcode = None
        if placement is not None:
            import qrcode  # only --timecode needs it

            self.qrcode = qrcode
        self.aravis = aravis
        self.placement = placement
        self.exposures = exposures
        self.wire = wire
        with open("/proc/sys/kernel/random/boot_id") as file:
            self.boot_id = file.read().strip()
        self.background: dict[tuple[int, ...], bytes] = {}
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
            if self.exposures is not None:
                acted = self.exposures.take_due()
                if acted is not None:
                    self.aravis.arv_buffer_set_timestamp(buffer, acted)
            if self.wire is not None and self.wire.drives():
                self.wire.send(self.aravis.arv_buffer_get_timestamp(buffer))
            self.paint(buffer, pixel_format)
        except Exception as error:  # a failing frame must not take the camera's thread down
            if not self.failed:
                self.failed = True
                print(f"genicam-fake-camera: cannot draw the frame: {error}", file=sys.stderr, flush=True)

    def paint(self, buffer, pixel_format):
        width = self.aravis.arv_buffer_get_image_width(buffer)
        height = self.aravis.arv_buffer_get_image_height(buffer)
        bytes_per_pixel = max(1, ((pixel_format >> 16) & 0xFF) // 8)
        data = self.aravis.arv_buffer_get_data(buffer, None)
        row_bytes = width * bytes_per_pixel
        register = lambda address: self.fake.read_register(address)[1]  # noqa: E731
        sensor_width = max(2, register(Aravis.FAKE_CAMERA_REGISTER_SENSOR_WIDTH))
        left, top = register(Aravis.FAKE_CAMERA_REGISTER_X_OFFSET), register(Aravis.FAKE_CAMERA_REGISTER_Y_OFFSET)
        binning = max(1, register(Aravis.FAKE_CAMERA_REGISTER_BINNING_HORIZONTAL))
        key = (width, height, bytes_per_pixel, left, top, binning, sensor_width)
        if key not in self.background:
            if len(self.background) > 16:
                self.background.clear()
            ramp = bytes(
                ((left + x) * binning * 160 // (sensor_width - 1) + 48) & 0xFF for x in range(width) for _ in range(bytes_per_pixel)
            )
            black = bytes(row_bytes)
            self.background[key] = b"".join(black if ((top + y) * binning) % 256 == 0 else ramp for y in range(height))
        ctypes.memmove(data, self.background[key], row_bytes * height)
        if self.placement is None:
            return

        monotonic_ns = self.aravis.arv_buffer_get_timestamp(buffer) - self.realtime_minus_monotonic_ns()
        x, y, share = self.placement
        code = self.qrcode.QRCode(version=5, error_correction=self.qrcode.constants.ERROR_CORRECT_M, border=4, mask_pattern=0)
        code.add_data(f"CFTC1 M {self.boot_id} {monotonic_ns}")
        code.make(fit=False)
        matrix = code.get_matrix()  # with its four modules of quiet zone
        module = int(share * width) // len(matrix)
        if module < 1 or int(y * height) + module * len(matrix) > height:
            raise ValueError(f"a {width}x{height} frame is too small for the timecode at {x},{y},{share}")
        left = int(x * width) * bytes_per_pixel
        top = int(y * height)
        for row_index, row in enumerate(matrix):
            line = b"".join((b"\x00" if dark else b"\xff") * (module * bytes_per_pixel) for dark in row)
            for repeat in range(module):
                offset = (top + row_index * module + repeat) * row_bytes + left
                ctypes.memmove(data + offset, line, len(line))


# Registers the added features live in (the fake camera's memory is plain read-write memory
# below 0x10000): GigE Vision's bootstrap addresses for the action keys, the rest unused ones.
ACTION_DEVICE_KEY = 0x090C
ACTION_GROUP_KEY = 0x9800
ACTION_GROUP_MASK = 0x9804
PTP_ENABLE = 0xA100
PTP_STATUS = 0xA104
# FrameStart's TriggerSource as the camera describes it (Line0 0, Software 1, Action1 2);
# Aravis's own source register stays at Software so that its stream thread starts a frame
# whenever the trigger register is set and trigger mode is on.
TRIGGER_SOURCE = 0xA110
SOURCE_LINE0 = 0
SOURCE_ACTION1 = 2
PTP_SLAVE = 8
# The I/O lines (LineSelector Line0, an input, and Line1, an output): each one's LineMode and
# LineSource, 0x10 apart.
LINE_SELECTOR = 0xA200
LINE_MODE = 0xA210
LINE_SOURCE = 0xA214
LINE_SOURCE_EXPOSURE_ACTIVE = 1


def register(name: str, address: int, access: str = "RW", index: str | None = None, offset: int = 0x20) -> str:
    selector = f'<pIndex Offset="{offset:#x}">{index}</pIndex>' if index else ""
    return (
        f'<IntReg Name="{name}" NameSpace="Custom"><Address>{address:#x}</Address>{selector}<Length>4</Length>'
        f"<AccessMode>{access}</AccessMode><pPort>Device</pPort><Sign>Unsigned</Sign><Endianess>BigEndian</Endianess></IntReg>"
    )


def enumeration(name: str, entries, register_name: str) -> str:
    listed = "".join(f'<EnumEntry Name="{entry}" NameSpace="Standard"><Value>{value}</Value></EnumEntry>' for entry, value in entries)
    return f'<Enumeration Name="{name}" NameSpace="Standard">{listed}<pValue>{register_name}</pValue></Enumeration>'


def described_xml(aravis_xml: str, ptp: bool, lines: bool) -> str:
    """Aravis's fake camera description with, for --ptp, PTP, action commands and Action1 as
    a trigger source, and for --line-wire, the I/O lines Line0 (in) and Line1 (out)."""
    start = aravis_xml.index('<Enumeration Name="TriggerSource"')
    end = aravis_xml.index("</IntReg>", aravis_xml.index('<IntReg Name="TriggerSourceRegister"')) + len("</IntReg>")
    sources = [("Line0", SOURCE_LINE0), ("Software", 1)] + ([("Action1", SOURCE_ACTION1)] if ptp else [])
    source = enumeration("TriggerSource", sources, "TriggerSourceRegister") + register(
        "TriggerSourceRegister", TRIGGER_SOURCE, index="TriggerSelectorInteger"
    )
    described = aravis_xml[:start] + source + aravis_xml[end:]
    added = ""
    categories = ""
    if ptp:
        statuses = ("Initializing", "Faulty", "Disabled", "Listening", "PreMaster", "Master", "Passive", "Uncalibrated", "Slave")
        added += (
            '<Category Name="ActionControl" NameSpace="Standard"><pFeature>ActionDeviceKey</pFeature><pFeature>ActionSelector</pFeature>'
            "<pFeature>ActionGroupKey</pFeature><pFeature>ActionGroupMask</pFeature></Category>"
            '<Integer Name="ActionDeviceKey" NameSpace="Standard"><pValue>ActionDeviceKeyRegister</pValue></Integer>'
            + register("ActionDeviceKeyRegister", ACTION_DEVICE_KEY)
            + '<Integer Name="ActionSelector" NameSpace="Standard"><Value>1</Value><Min>1</Min><Max>1</Max></Integer>'
            '<Integer Name="ActionGroupKey" NameSpace="Standard"><pValue>ActionGroupKeyRegister</pValue></Integer>'
            + register("ActionGroupKeyRegister", ACTION_GROUP_KEY)
            + '<Integer Name="ActionGroupMask" NameSpace="Standard"><pValue>ActionGroupMaskRegister</pValue></Integer>'
            + register("ActionGroupMaskRegister", ACTION_GROUP_MASK)
            + '<Boolean Name="PtpEnable" NameSpace="Standard"><pValue>PtpEnableRegister</pValue><OnValue>1</OnValue><OffValue>0</OffValue></Boolean>'
            + register("PtpEnableRegister", PTP_ENABLE)
            + enumeration("PtpStatus", [(name, value) for value, name in enumerate(statuses)], "PtpStatusRegister")
            + register("PtpStatusRegister", PTP_STATUS, access="RO")
        )
        categories += "<pFeature>ActionControl</pFeature>"
        described = described.replace(
            "<pFeature>PayloadSize</pFeature>", "<pFeature>PayloadSize</pFeature><pFeature>PtpEnable</pFeature><pFeature>PtpStatus</pFeature>", 1
        )
    if lines:
        added += (
            '<Category Name="DigitalIOControl" NameSpace="Standard"><pFeature>LineSelector</pFeature><pFeature>LineMode</pFeature>'
            "<pFeature>LineSource</pFeature></Category>"
            + enumeration("LineSelector", [("Line0", 0), ("Line1", 1)], "LineSelectorRegister")
            + register("LineSelectorRegister", LINE_SELECTOR)
            + enumeration("LineMode", [("Input", 0), ("Output", 1)], "LineModeRegister")
            + register("LineModeRegister", LINE_MODE, index="LineSelectorRegister", offset=0x10)
            + enumeration("LineSource", [("Off", 0), ("ExposureActive", LINE_SOURCE_EXPOSURE_ACTIVE)], "LineSourceRegister")
            + register("LineSourceRegister", LINE_SOURCE, index="LineSelectorRegister", offset=0x10)
        )
        categories += "<pFeature>DigitalIOControl</pFeature>"
    described = described.replace("<pFeature>Debug</pFeature>", categories + "<pFeature>Debug</pFeature>", 1)
    closing = described.rindex("</RegisterDescription>")
    return described[:closing] + added + described[closing:]


class Exposures:
    """Frames to start at given times (CLOCK_REALTIME ns) and stamp with them: an action's
    time, or a line edge's. A thread sleeps to each and sets the trigger register; the frame
    Aravis then fills takes the time as its timestamp (`take_due`)."""

    def __init__(self, fake):
        self.fake = fake
        self.lock = threading.Condition()
        self.pending: list[int] = []  # times not yet reached, a heap
        self.due: collections.deque[int] = collections.deque()  # reached, their frames not yet filled
        threading.Thread(target=self.act, name="exposing", daemon=True).start()

    def value(self, address: int) -> int:
        return self.fake.read_register(address)[1]

    def waits_for(self, source: int) -> bool:
        return self.value(Aravis.FAKE_CAMERA_REGISTER_TRIGGER_MODE) == 1 and self.value(TRIGGER_SOURCE) == source

    def schedule(self, instant: int):
        with self.lock:
            heapq.heappush(self.pending, instant)
            self.lock.notify()

    def act(self):
        while True:
            with self.lock:
                while not self.pending:
                    self.lock.wait()
                instant = self.pending[0]
            left = instant - time.clock_gettime_ns(time.CLOCK_REALTIME)
            if left > 1_000_000:
                # Woken early by an earlier one arriving, or to spin the last millisecond.
                with self.lock:
                    self.lock.wait((left - 1_000_000) / 1e9)
                continue
            while time.clock_gettime_ns(time.CLOCK_REALTIME) < instant:
                pass
            with self.lock:
                heapq.heappop(self.pending)
                self.due.append(instant)
            self.fake.write_register(Aravis.FAKE_CAMERA_REGISTER_TRIGGER_SOFTWARE, 1)

    def take_due(self) -> int | None:
        # The latest time reached: two that came before one frame started were one exposure
        # (as a camera busy exposing ignores a second trigger), and an older one left waiting
        # would stamp every later frame late.
        with self.lock:
            latest = self.due[-1] if self.due else None
            self.due.clear()
            return latest


class ActionCommands:
    """Reads GigE Vision ACTION_CMD datagrams off the camera's interface and, for those whose
    keys and mask match the camera's and while FrameStart waits for Action1, starts a frame
    at each one's action time (now, for one without)."""

    GVCP_PORT = 3956

    def __init__(self, interface: str, exposures: Exposures):
        self.exposures = exposures
        self.socket = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(0x0800))
        self.socket.bind((interface, 0))
        threading.Thread(target=self.listen, name="actions", daemon=True).start()

    def listen(self):
        value = self.exposures.value
        while True:
            packet, address = self.socket.recvfrom(2048)
            if address[2] == socket.PACKET_OUTGOING or len(packet) < 20 or packet[9] != socket.IPPROTO_UDP:
                continue
            header = (packet[0] & 0x0F) * 4
            port = struct.unpack_from(">H", packet, header + 2)[0]
            command = packet[header + 8 :]
            if port != self.GVCP_PORT or len(command) < 20 or command[0] != 0x42 or struct.unpack_from(">H", command, 2)[0] != 0x0100:
                continue
            scheduled = command[1] & 0x80 != 0
            device_key, group_key, group_mask = struct.unpack_from(">III", command, 8)
            if scheduled and len(command) < 28:
                continue
            action_time = struct.unpack_from(">Q", command, 20)[0] if scheduled else time.clock_gettime_ns(time.CLOCK_REALTIME)
            if (
                device_key != value(ACTION_DEVICE_KEY)
                or group_key != value(ACTION_GROUP_KEY)
                or group_mask & value(ACTION_GROUP_MASK) == 0
                or not self.exposures.waits_for(SOURCE_ACTION1)
            ):
                continue
            self.exposures.schedule(action_time)


class LineWire:
    """The test bed's trigger wire: a directory shared by every namespace (the filesystem is
    one), where each camera on the wire listens on a Unix datagram socket named after it. A
    camera whose Line1 is an output driven by ExposureActive sends each exposure's start to
    every other camera there (and a generator, `--line-generator`, sends its pulses); one whose
    FrameStart waits for Line0 starts a frame at each edge, stamped with the edge's time, as a
    wired input does."""

    def __init__(self, directory: str, name: str, exposures: Exposures | None):
        self.directory = directory
        self.exposures = exposures
        os.makedirs(directory, exist_ok=True)
        self.path = os.path.join(directory, f"{name}.sock")
        self.socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        if exposures is not None:
            if os.path.exists(self.path):
                os.unlink(self.path)
            self.socket.bind(self.path)
            threading.Thread(target=self.listen, name="line0", daemon=True).start()

    def listen(self):
        while True:
            edge = struct.unpack(">Q", self.socket.recv(8))[0]
            if self.exposures.waits_for(SOURCE_LINE0):
                self.exposures.schedule(edge)

    def drives(self) -> bool:
        value = self.exposures.value
        return value(LINE_MODE + 0x10) == 1 and value(LINE_SOURCE + 0x10) == LINE_SOURCE_EXPOSURE_ACTIVE

    def send(self, edge: int):
        for entry in os.listdir(self.directory):
            target = os.path.join(self.directory, entry)
            if entry.endswith(".sock") and target != self.path:
                try:
                    # Never blocking the camera's frames: an edge a busy listener has no room for is lost.
                    self.socket.sendto(struct.pack(">Q", edge), socket.MSG_DONTWAIT, target)
                except OSError:
                    pass  # a camera gone from the wire, or one not keeping up


def generate(directory: str, rate: float):
    """An external trigger generator on the wire: a pulse at every multiple of 1/rate s of
    CLOCK_REALTIME, its own timebase, not the fleet's."""
    wire = LineWire(directory, "generator", None)
    period = int(1e9 / rate)
    print(f"genicam-fake-camera: a {rate:g} Hz trigger generator on {directory}", flush=True)
    while True:
        now = time.clock_gettime_ns(time.CLOCK_REALTIME)
        edge = now - now % period + period
        time.sleep(max(0, edge - now - 500_000) / 1e9)
        while time.clock_gettime_ns(time.CLOCK_REALTIME) < edge:
            pass
        wire.send(edge)


def load_aravis() -> ctypes.CDLL:
    aravis = ctypes.CDLL("libaravis-0.8.so.0")
    aravis.arv_buffer_get_data.restype = ctypes.c_void_p
    aravis.arv_buffer_get_data.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    aravis.arv_buffer_get_timestamp.restype = ctypes.c_uint64
    aravis.arv_buffer_get_timestamp.argtypes = [ctypes.c_void_p]
    for name in ("arv_buffer_get_image_width", "arv_buffer_get_image_height"):
        getattr(aravis, name).restype = ctypes.c_int
        getattr(aravis, name).argtypes = [ctypes.c_void_p]
    aravis.arv_buffer_set_timestamp.restype = None
    aravis.arv_buffer_set_timestamp.argtypes = [ctypes.c_void_p, ctypes.c_uint64]
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
    # A parent may have blocked these (a test runner's threads do, and its children inherit
    # the mask): unblocked, so that SIGTERM ends this process as it says.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--interface", help="interface name or address to answer on")
    parser.add_argument("--serial", help="the camera's serial number")
    parser.add_argument("--lost-per-thousand", type=float, default=0, help="GVSP packets lost per thousand")
    parser.add_argument("--trigger-check-hz", type=float, default=2000, help="how often a software trigger is looked for")
    parser.add_argument("--timecode", type=placement, metavar="X,Y,W", help="draw each frame's timecode there")
    parser.add_argument("--ptp", action="store_true", help="a PTP-locked camera that takes scheduled action commands")
    parser.add_argument("--line-wire", metavar="DIR", help="I/O lines on the test bed's trigger wire in DIR")
    parser.add_argument("--line-generator", type=float, metavar="HZ", help="no camera: a trigger generator on --line-wire")
    parser.add_argument(
        "--sensor-pattern", action="store_true", help="paint frames by their place on the sensor (implied by the options above)"
    )
    options = parser.parse_args()
    if options.line_generator is not None:
        if not options.line_wire or options.line_generator <= 0:
            parser.error("--line-generator HZ needs --line-wire DIR and a rate above 0")
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        generate(options.line_wire, options.line_generator)
        return 0
    if not options.interface or not options.serial:
        parser.error("a camera needs --interface and --serial")
    # A camera's timing is its own hardware's: ahead of the host's other work where allowed, so
    # that a loaded test machine starves the fleet under test rather than its cameras.
    try:
        os.setpriority(os.PRIO_PROCESS, 0, -10)
    except PermissionError:
        pass

    if options.ptp or options.line_wire:
        described = described_xml(Aravis.FakeCamera.new(options.serial).get_genicam_xml()[0], options.ptp, options.line_wire is not None)
        description = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"genicam-fake-camera-{options.serial}-{os.getpid()}.xml")
        with open(description, "w") as file:
            file.write(described)
        camera = Aravis.GvFakeCamera.new_full(options.interface, options.serial, description)
        os.unlink(description)
    else:
        camera = Aravis.GvFakeCamera.new(options.interface, options.serial)
    if not camera.is_running():
        print(f"genicam-fake-camera: cannot answer on {options.interface}", file=sys.stderr)
        return 1
    camera.set_property("gvsp-lost-ratio", options.lost_per_thousand / 1000.0)
    fake = camera.get_fake_camera()
    fake.set_trigger_frequency(options.trigger_check_hz)
    exposures = None
    wire = None
    if options.ptp or options.line_wire:
        fake.write_register(Aravis.FAKE_CAMERA_REGISTER_TRIGGER_SOURCE, 1)
        fake.write_register(TRIGGER_SOURCE, 1)  # Software, as Aravis's own camera starts
        exposures = Exposures(fake)
    if options.ptp:
        fake.write_register(PTP_ENABLE, 1)
        fake.write_register(PTP_STATUS, PTP_SLAVE)
        fake.write_register(ACTION_GROUP_MASK, 0)
        try:
            ActionCommands(options.interface, exposures)
        except OSError as error:
            print(f"genicam-fake-camera: cannot read action commands on {options.interface}: {error}", file=sys.stderr)
            return 1
    if options.line_wire:
        wire = LineWire(options.line_wire, options.serial, exposures)
    painter = None
    if options.timecode is not None or exposures is not None or options.sensor_pattern:
        aravis = load_aravis()
        painter = FramePainter(aravis, fake, options.timecode, exposures, wire)
        aravis.arv_fake_camera_set_fill_pattern(gobject_pointer(fake), painter.callback, None)
    drawn = " with timecodes" if options.timecode else ""
    ptp = ", PTP-locked with action commands" if options.ptp else ""
    wired = f", lines on the wire {options.line_wire}" if wire else ""
    print(
        f"genicam-fake-camera: {options.serial} on {options.interface}, triggers checked at {options.trigger_check_hz:g} Hz{drawn}{ptp}{wired}",
        flush=True,
    )

    loop = GLib.MainLoop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, signum, loop.quit)
    loop.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
