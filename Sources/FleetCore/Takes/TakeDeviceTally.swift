/// What a device's part of a take holds so far, as its recorder counts it.
public struct TakeDeviceTally: Sendable, Hashable {
    public var pixelFormat: String
    public var width: Int
    public var height: Int
    public var frameRate: Double
    public var firstFleetNs: UInt64?
    public var lastFleetNs: UInt64?
    public var firstSequence: UInt64?
    public var lastSequence: UInt64?
    public var frames: Int64
    public var bytes: Int64
    public var drops: DropTally
    /// Encoded parts: the encoder and the camera's format; empty for parts stored as captured.
    public var encoder: String
    public var sourcePixelFormat: String
    /// As recorded (frames.md, "Colour and depth"): significant bits per sample, the colour
    /// description the camera declared, a depth part's metres per unit.
    public var bitDepth: Int
    public var colour: ColourDescription?
    public var depthUnitMetres: Double?

    public init(
        pixelFormat: String, width: Int, height: Int, frameRate: Double, firstFleetNs: UInt64?, lastFleetNs: UInt64?,
        firstSequence: UInt64?, lastSequence: UInt64?, frames: Int64, bytes: Int64, drops: DropTally,
        encoder: String = "", sourcePixelFormat: String = "", bitDepth: Int = 8, colour: ColourDescription? = nil,
        depthUnitMetres: Double? = nil
    ) {
        self.bitDepth = bitDepth
        self.colour = colour
        self.depthUnitMetres = depthUnitMetres
        self.encoder = encoder
        self.sourcePixelFormat = sourcePixelFormat
        self.pixelFormat = pixelFormat
        self.width = width
        self.height = height
        self.frameRate = frameRate
        self.firstFleetNs = firstFleetNs
        self.lastFleetNs = lastFleetNs
        self.firstSequence = firstSequence
        self.lastSequence = lastSequence
        self.frames = frames
        self.bytes = bytes
        self.drops = drops
    }
}
