import FleetCapture
import FleetCore
import FleetProtocol

extension Capfleet_V1_FrameHeader {
    /// The header that travels with a captured frame: identity, the source's sequence and
    /// capture time, layout and size, and the device's drops so far.
    public init(
        capturing frame: CapturedFrame, nodeID: String, deviceID: String, flags: UInt32 = 0,
        consent: Capfleet_V1_ConsentState = .notDetermined, drops: DropTally = DropTally()
    ) {
        self.init()
        protocolVersion = WireDefaults.protocolMajor
        self.nodeID = nodeID
        self.deviceID = deviceID
        sequence = frame.sequence
        captureMonotonicNs = frame.captureMonotonicNanoseconds
        layout = frame.layout.wire
        payloadSize = UInt64(frame.byteCount)
        self.flags = flags
        self.consent = consent
        self.drops = drops.wire
        zoomFactor = frame.zoomFactor
    }
}

extension FrameLayout {
    /// The header's layout: 8-bit pictures leave the depth at 0 (8) and say no colour or unit
    /// unless their format declares them.
    public var wire: Capfleet_V1_FrameLayout {
        .with {
            $0.pixelFormat = pixelFormat.fourCC
            $0.width = UInt32(width)
            $0.height = UInt32(height)
            $0.bytesPerLine = UInt32(bytesPerLine)
            $0.bitDepth = bitDepth == 8 ? 0 : UInt32(clamping: bitDepth)
            if let colour { $0.colour = colour.wire }
            $0.depthUnitMetres = depthUnitMetres ?? 0
        }
    }
}

extension ZoomMethod {
    public var wire: Capfleet_V1_ZoomMethod {
        switch self {
        case .deviceControl: .deviceControl
        case .cropSelection: .cropSelection
        case .agentCrop: .agentCrop
        }
    }
}
