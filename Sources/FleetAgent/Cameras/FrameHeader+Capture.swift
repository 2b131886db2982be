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
        layout = .with {
            $0.pixelFormat = frame.layout.pixelFormat.fourCC
            $0.width = UInt32(frame.layout.width)
            $0.height = UInt32(frame.layout.height)
            $0.bytesPerLine = UInt32(frame.layout.bytesPerLine)
        }
        payloadSize = UInt64(frame.byteCount)
        self.flags = flags
        self.consent = consent
        self.drops = drops.wire
        zoomFactor = frame.zoomFactor
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
