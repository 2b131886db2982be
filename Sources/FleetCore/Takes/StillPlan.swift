/// What a still asks of one camera (stills.md): the size (nil: its largest), a pixel format
/// (nil: the streaming one's where the size has it), and a bracket.
public struct StillRequest: Sendable, Equatable {
    public var width: Int?
    public var height: Int?
    public var pixelFormat: PixelFormat?
    /// EV offsets, one picture each; empty: one picture as exposed now.
    public var bracketEV: [Double]
    public var bracketIntervalNanoseconds: UInt64
    /// The picture from the stream as it runs: its active format, never a switch (a moment's
    /// still, beside a take of the same frames).
    public var streamingFormat: Bool

    public init(
        width: Int? = nil, height: Int? = nil, pixelFormat: PixelFormat? = nil, bracketEV: [Double] = [],
        bracketIntervalNanoseconds: UInt64 = 300_000_000, streamingFormat: Bool = false
    ) {
        self.streamingFormat = streamingFormat
        self.width = width
        self.height = height
        self.pixelFormat = pixelFormat
        self.bracketEV = bracketEV
        self.bracketIntervalNanoseconds = bracketIntervalNanoseconds
    }

    /// The instant of each picture: the first at `instant`, a bracket's next ones one
    /// interval apart, so that every camera's picture i shares its instant.
    public func instants(from instant: UInt64) -> [UInt64] {
        (0..<max(bracketEV.count, 1)).map { instant &+ UInt64($0) * bracketIntervalNanoseconds }
    }
}

/// Which of a device's formats a still is taken in, and whether the camera must leave its
/// streaming format for it. Pure: the agent performs the switch.
public struct StillPlan: Sendable, Equatable {
    public let formatIndex: Int
    /// The camera streams in another format: switch, capture, switch back.
    public let switchesFormat: Bool

    public init(formatIndex: Int, switchesFormat: Bool) {
        self.formatIndex = formatIndex
        self.switchesFormat = switchesFormat
    }

    public enum Refusal: Error, Sendable, Equatable, CustomStringConvertible {
        case noFormats(device: String)
        case noSuchSize(device: String, width: Int, height: Int, sizes: [String])
        case noSuchPixelFormat(device: String, pixelFormat: String, size: String, available: [String])

        public var description: String {
            switch self {
            case let .noFormats(device):
                "device \(device) lists no formats to take a still in"
            case let .noSuchSize(device, width, height, sizes):
                "device \(device) has no \(width)x\(height) format; ask for one of \(sizes.joined(separator: ", ")) or for max"
            case let .noSuchPixelFormat(device, pixelFormat, size, available):
                "device \(device) has no \(pixelFormat) format at \(size); at that size it offers \(available.joined(separator: ", "))"
            }
        }
    }

    /// The still format: the size asked for (or the largest by area), then the pixel format
    /// asked for, else the streaming format's, else the first listed at that size; binned
    /// formats only when nothing else has the size (they trade detail for speed).
    public static func plan(
        formats: [VideoFormat], activeIndex: Int, request: StillRequest,
        deviceID: String
    ) -> Result<StillPlan, Refusal> {
        guard !formats.isEmpty else { return .failure(.noFormats(device: deviceID)) }
        if request.streamingFormat, formats.indices.contains(activeIndex) {
            return .success(StillPlan(formatIndex: activeIndex, switchesFormat: false))
        }
        let sized: [Int]
        if let width = request.width, let height = request.height {
            sized = formats.indices.filter { formats[$0].width == width && formats[$0].height == height }
            guard !sized.isEmpty else {
                var sizes: [String] = []
                for format in formats.sorted(by: { $0.width * $0.height > $1.width * $1.height })
                where !sizes.contains("\(format.width)x\(format.height)") {
                    sizes.append("\(format.width)x\(format.height)")
                }
                return .failure(.noSuchSize(device: deviceID, width: width, height: height, sizes: sizes))
            }
        } else {
            let largest = formats.map { $0.width * $0.height }.max()!
            sized = formats.indices.filter { formats[$0].width * formats[$0].height == largest }
        }
        let unbinned = sized.filter { !formats[$0].isBinned }
        let candidates = unbinned.isEmpty ? sized : unbinned
        let active = formats.indices.contains(activeIndex) ? formats[activeIndex] : nil
        let chosen: Int
        if let wanted = request.pixelFormat {
            guard let match = candidates.first(where: { formats[$0].pixelFormat == wanted }) else {
                let first = formats[candidates[0]]
                return .failure(
                    .noSuchPixelFormat(
                        device: deviceID, pixelFormat: wanted.fourCC, size: "\(first.width)x\(first.height)",
                        available: candidates.map { formats[$0].pixelFormat.fourCC }))
            }
            chosen = match
        } else if candidates.contains(activeIndex) {
            chosen = activeIndex
        } else if let active, let same = candidates.first(where: { formats[$0].pixelFormat == active.pixelFormat }) {
            chosen = same
        } else {
            chosen = candidates[0]
        }
        return .success(StillPlan(formatIndex: chosen, switchesFormat: chosen != activeIndex))
    }
}

/// Picks the frame captured nearest an instant as frames arrive: a frame before the instant
/// is held (a copy) in case the first one after is further away. Pure: the caller copies and
/// keeps what it is told to.
public struct NearestFrameChoice: Sendable, Equatable {
    public let instant: UInt64
    /// The held frame's capture time, if any.
    public private(set) var held: UInt64?

    public enum Verdict: Sendable, Equatable {
        /// Too early to matter.
        case ignore
        /// Keep a copy of this frame in place of any held one: it may be the nearest.
        case hold
        /// This frame is the nearest: done.
        case takeThis
        /// The held frame is nearer than this one: done.
        case takeHeld
    }

    public init(instant: UInt64) { self.instant = instant }

    /// A frame captured at `fleetTime`; `period` is the camera's frame interval now (frames
    /// more than two intervals before the instant cannot be the nearest).
    public mutating func frame(at fleetTime: UInt64, period: UInt64) -> Verdict {
        if fleetTime < instant {
            guard instant - fleetTime <= max(period, 1) &* 2 else { return .ignore }
            held = fleetTime
            return .hold
        }
        if let held, instant - held < fleetTime - instant { return .takeHeld }
        return .takeThis
    }
}
