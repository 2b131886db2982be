import FleetProtocol

/// A network camera's stream as its transport counts it (device-model.md, "GenICam cameras"),
/// since the agent opened the camera.
public struct StreamTransportFigures: Sendable, Equatable {
    public var framesCompleted: UInt64 = 0
    public var framesIncomplete: UInt64 = 0
    public var underruns: UInt64 = 0
    public var packetsResent: UInt64 = 0
    public var packetsMissing: UInt64 = 0
    /// GigE Vision: the packet size negotiated at the stream's start (0: not GigE Vision).
    public var packetSize: UInt32 = 0
    /// What in the stream's setup costs it frames or CPU, in words; empty when nothing.
    public var rateLimit = ""
    /// What places its frames on the host's clock now: "arrivals", "triggers" or "ptp".
    public var clockPlacement = ""
    /// A camera that takes action commands: its PTP state as last read, and, while the host's
    /// clock keeps its time, camera time minus host CLOCK_REALTIME and the shortest delay from
    /// exposure to arrival; else why the host's clock does not place its frames.
    public var ptpStatus = ""
    public var ptpTimescaleOffset: Int64 = 0
    public var ptpResidual: Int64 = 0
    public var ptpRefusal = ""

    public init() {}

    public static func + (left: Self, right: Self) -> Self {
        var sum = left
        sum.framesCompleted += right.framesCompleted
        sum.framesIncomplete += right.framesIncomplete
        sum.underruns += right.underruns
        sum.packetsResent += right.packetsResent
        sum.packetsMissing += right.packetsMissing
        // The setup is the current stream's (the left side's when it has one).
        if sum.packetSize == 0 { sum.packetSize = right.packetSize }
        if sum.rateLimit.isEmpty { sum.rateLimit = right.rateLimit }
        return sum
    }

    public var wire: Capfleet_V1_StreamTransport {
        .with {
            $0.framesCompleted = framesCompleted
            $0.framesIncomplete = framesIncomplete
            $0.underruns = underruns
            $0.packetsResent = packetsResent
            $0.packetsMissing = packetsMissing
            $0.packetSize = packetSize
            $0.rateLimit = rateLimit
            $0.clockPlacement = clockPlacement
            $0.ptpStatus = ptpStatus
            $0.ptpTimescaleOffsetNs = ptpTimescaleOffset
            $0.ptpResidualNs = ptpResidual
            $0.ptpRefusal = ptpRefusal
        }
    }
}
