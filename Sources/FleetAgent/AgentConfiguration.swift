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
    public var syntheticCameraCount: Int
    public var syntheticFormat: (width: Int, height: Int, pixelFormat: PixelFormat)
    public var syntheticFrameRate: Double
    /// Frames waiting to be sent, all devices together, before newer frames are dropped as late.
    public var sendQueueCapacity: Int

    public init(coordinatorHost: String = "127.0.0.1", controlPort: UInt16 = WireDefaults.controlPort, nodeName: String? = nil,
                stateDirectory: String, syntheticCameraCount: Int = 1,
                syntheticFormat: (width: Int, height: Int, pixelFormat: PixelFormat) = (640, 480, .yuyv),
                syntheticFrameRate: Double = 15, sendQueueCapacity: Int = 4) {
        self.coordinatorHost = coordinatorHost
        self.controlPort = controlPort
        self.nodeName = nodeName
        self.stateDirectory = stateDirectory
        self.syntheticCameraCount = syntheticCameraCount
        self.syntheticFormat = syntheticFormat
        self.syntheticFrameRate = syntheticFrameRate
        self.sendQueueCapacity = sendQueueCapacity
    }

    var controlEndpoint: String { "tcp://\(Self.bracketed(coordinatorHost)):\(controlPort)" }

    func ingestEndpoint(port: UInt32) -> String { "tcp://\(Self.bracketed(coordinatorHost)):\(port)" }

    private static func bracketed(_ host: String) -> String { host.contains(":") ? "[\(host)]" : host }
}
