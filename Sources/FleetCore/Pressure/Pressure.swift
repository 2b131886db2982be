/// How hard the host is straining, in the levels camera engineers know from system
/// pressure: nominal, fair, serious, critical, shutdown.
public enum PressureLevel: Int, Sendable, Comparable, CaseIterable, CustomStringConvertible {
    case nominal, fair, serious, critical, shutdown

    public static func < (lhs: PressureLevel, rhs: PressureLevel) -> Bool { lhs.rawValue < rhs.rawValue }

    public var description: String {
        switch self {
        case .nominal: "nominal"
        case .fair: "fair"
        case .serious: "serious"
        case .critical: "critical"
        case .shutdown: "shutdown"
        }
    }

    public init?(name: String) {
        guard let level = Self.allCases.first(where: { $0.description == name }) else { return nil }
        self = level
    }
}

/// What contributes to pressure.
public enum PressureFactor: String, Sendable, CaseIterable, Comparable {
    /// Linux PSI: share of time some task waited for CPU (avg10, percent).
    case cpu
    /// PSI: some task stalled on memory.
    case memory
    /// PSI: some task stalled on I/O.
    case io
    /// The hottest thermal zone against its trip points.
    case thermal
    /// Battery low, or the board reports under-voltage.
    case power
    /// The board reports that it throttles its clocks.
    case throttling
    /// Free space on the spool or data disks.
    case diskSpace = "disk_space"
    /// The agent's own frames dropped (all reasons) over the last interval.
    case dropRate = "drop_rate"
    /// How full the agent's send queue is.
    case sendQueue = "send_queue"
    /// Share of due frames the agent's detectors skipped, busy with earlier ones (detection.md).
    case detection

    public static func < (lhs: PressureFactor, rhs: PressureFactor) -> Bool {
        allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }
}

/// One thermal zone: its temperature and the trip points the platform declares.
public struct ThermalReading: Hashable, Sendable {
    public var zone: String
    public var celsius: Double
    /// Passive (start cooling by throttling), hot and critical trip points, where declared.
    public var passiveCelsius: Double?
    public var hotCelsius: Double?
    public var criticalCelsius: Double?

    public init(zone: String, celsius: Double, passiveCelsius: Double? = nil, hotCelsius: Double? = nil, criticalCelsius: Double? = nil) {
        self.zone = zone
        self.celsius = celsius
        self.passiveCelsius = passiveCelsius
        self.hotCelsius = hotCelsius
        self.criticalCelsius = criticalCelsius
    }
}

/// What a sampler read in one go. Nil means the host does not expose it: no factor.
public struct PressureSample: Hashable, Sendable {
    public var cpuStallPercent: Double?
    public var memoryStallPercent: Double?
    public var ioStallPercent: Double?
    public var thermal: [ThermalReading]
    /// Battery charge in percent while running on battery; nil on mains or without a battery.
    public var batteryPercent: Double?
    public var underVoltage: Bool
    public var throttled: Bool
    /// Free fraction (0...1) of each watched disk, by path.
    public var diskFree: [String: Double]
    /// Share (0...1) of frames lost in the last interval.
    public var dropRate: Double?
    /// Share (0...1) of the send queue in use.
    public var sendQueueFill: Double?
    /// Share (0...1) of frames due for detection that were skipped in the last interval; nil
    /// while nothing is detected.
    public var detectionSkipRate: Double?
    /// Frames lost in the last interval by reason, and frames captured, all devices.
    public var intervalDrops = DropTally()
    public var intervalFrames: UInt64 = 0

    public init(
        cpuStallPercent: Double? = nil, memoryStallPercent: Double? = nil, ioStallPercent: Double? = nil,
        thermal: [ThermalReading] = [], batteryPercent: Double? = nil, underVoltage: Bool = false, throttled: Bool = false,
        diskFree: [String: Double] = [:], dropRate: Double? = nil, sendQueueFill: Double? = nil
    ) {
        self.cpuStallPercent = cpuStallPercent
        self.memoryStallPercent = memoryStallPercent
        self.ioStallPercent = ioStallPercent
        self.thermal = thermal
        self.batteryPercent = batteryPercent
        self.underVoltage = underVoltage
        self.throttled = throttled
        self.diskFree = diskFree
        self.dropRate = dropRate
        self.sendQueueFill = sendQueueFill
    }
}
