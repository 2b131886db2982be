import FleetCapture
import FleetCore
import FleetProtocol

/// Everything an agent needs to know at start.
public struct AgentConfiguration: Sendable {
    public var coordinatorHost: String
    public var controlPort: UInt16
    /// Overrides the node name; defaults to the host name.
    public var nodeName: String?
    /// Where the agent keeps its identity between runs.
    public var stateDirectory: String
    /// Synthetic cameras to run; nil means one if the host has no real camera.
    public var syntheticCameraCount: Int?
    /// V4L2 devices to use, by path (/dev/video0, /dev/v4l/by-id/...) or stable id.
    public var devices: [String]
    /// Also use every capture device found under /dev (when `devices` is empty).
    public var discoverDevices: Bool
    /// mmap buffers per V4L2 device.
    public var bufferCount: Int
    /// V4L2 devices' starting format and rate; nil keeps what the device has.
    public var deviceFormat: (width: Int, height: Int, pixelFormat: PixelFormat)?
    public var deviceFrameRate: Double?
    public var syntheticFormat: (width: Int, height: Int, pixelFormat: PixelFormat)
    public var syntheticFrameRate: Double
    /// Pictures every synthetic camera draws into its frames (`--synthetic-overlay`).
    public var syntheticOverlays: [SyntheticOverlay] = []
    /// Frames waiting to be sent, all devices together, before newer frames are dropped as late.
    public var sendQueueCapacity: Int
    /// Where the pressure sampler finds /proc and /sys (tests point it at fixture trees).
    public var pressureRoot: String = "/"
    /// Disks whose free space counts as pressure; empty means the state directory's disk.
    public var watchedDisks: [String] = []
    public var pressureIntervalMilliseconds: Int = 1000
    /// Sample and report pressure at all (off only to measure what it costs: `capfleet bench telemetry`).
    public var pressureEnabled = true
    public var pressureThresholds = PressureThresholds()
    /// A one-time token from `capfleet enroll`; used when the agent has no key yet (or a key
    /// from another token).
    public var enrollmentToken: String?
    /// Run when a device starts and stops sending real frames (the recording light).
    public var realFramesCommand: String?
    /// The agent's own clock: the system's, or for tests one skewed on purpose.
    public var nodeClock = NodeClock.system
    /// Recorded frames waiting for the coordinator, first in memory, then on disk (in the
    /// state directory's `spool`); beyond both they are dropped as out of buffers.
    public var recordSpoolMemoryBytes = AgentSettingKeys.defaultRecordSpoolMemoryMiB << 20
    public var recordSpoolDiskBytes: Int64 = AgentSettingKeys.defaultRecordSpoolDiskMiB << 20
    /// Every camera's small JPEG preview (frames.md, "Previews"): 320 pixels wide, once a second.
    public var preview = PreviewSettings()
    /// Takes recorded on this host (`record start --store agent`): where, the disk reserve,
    /// retention and collect's rate. Nil directory: the state directory's `recordings`.
    public var recordingsDirectory: String?
    public var recordReserveBytes: Int64 = 256 << 20
    public var recordingsKeepDays = 30
    public var collectBytesPerSecond: Int64 = 100 << 20
    /// Encoded takes (recordings.md, "Codecs"): threads per take's encoder, x264's and x265's
    /// speed preset (superfast keeps a 1080p30 camera within one core), and whether hardware
    /// encoders found at start are used.
    public var encoderThreads = 2
    public var encoderPreset = "superfast"
    public var hardwareEncoders = true
    /// Sensor streams this agent offers on its sensor endpoint (sensors.md), by name; none:
    /// no endpoint. Where the endpoint's Unix socket is (default: the state directory's
    /// sensors.sock).
    public var sensorStreams: [String] = []
    /// Synthetic microphones (microphones.md): a tone with a click on every fleet second.
    public var syntheticMicrophoneCount = 0
    /// ALSA capture devices to use, by ALSA name (hw:CARD=ID,DEV=N) or fleet id; empty: every
    /// one found when `discoverMicrophones`.
    public var microphones: [String] = []
    public var discoverMicrophones = false
    /// Where to look for GenICam cameras (device-model.md, "GenICam cameras"): `off`, `usb`,
    /// `all`, or network interfaces separated by commas.
    public var genicam = "off"
    public var sensorSocket: String?

    /// Devices other than cameras it was told to offer: it may then run without a camera.
    var offersOtherDevices: Bool { !sensorStreams.isEmpty || syntheticMicrophoneCount > 0 || !microphones.isEmpty }

    var sensorSocketPath: String { sensorSocket ?? stateDirectory + "/sensors.sock" }

    var recordingSettings: AgentRecordingSettings {
        var settings = AgentRecordingSettings(directory: recordingsDirectory ?? stateDirectory + "/recordings")
        settings.reserveBytes = recordReserveBytes
        settings.keepDays = recordingsKeepDays
        settings.collectBytesPerSecond = collectBytesPerSecond
        return settings
    }

    var recordSpoolLimits: RecordSpoolLimits {
        RecordSpoolLimits(memoryBytes: recordSpoolMemoryBytes, diskBytes: recordSpoolDiskBytes, directory: stateDirectory + "/spool")
    }

    public init(
        coordinatorHost: String = "127.0.0.1", controlPort: UInt16 = WireDefaults.controlPort, nodeName: String? = nil,
        stateDirectory: String, syntheticCameraCount: Int? = 1, devices: [String] = [], discoverDevices: Bool = false,
        bufferCount: Int = 4, deviceFormat: (width: Int, height: Int, pixelFormat: PixelFormat)? = nil, deviceFrameRate: Double? = nil,
        syntheticFormat: (width: Int, height: Int, pixelFormat: PixelFormat) = (640, 480, .yuyv),
        syntheticFrameRate: Double = 15, sendQueueCapacity: Int = 4
    ) {
        self.coordinatorHost = coordinatorHost
        self.controlPort = controlPort
        self.nodeName = nodeName
        self.stateDirectory = stateDirectory
        self.syntheticCameraCount = syntheticCameraCount
        self.devices = devices
        self.discoverDevices = discoverDevices
        self.bufferCount = bufferCount
        self.deviceFormat = deviceFormat
        self.deviceFrameRate = deviceFrameRate
        self.syntheticFormat = syntheticFormat
        self.syntheticFrameRate = syntheticFrameRate
        self.sendQueueCapacity = sendQueueCapacity
    }

    var controlEndpoint: String { "tcp://\(Self.bracketed(coordinatorHost)):\(controlPort)" }

    func ingestEndpoint(port: UInt32) -> String { "tcp://\(Self.bracketed(coordinatorHost)):\(port)" }

    private static func bracketed(_ host: String) -> String { host.contains(":") ? "[\(host)]" : host }
}
