import FleetProtocol

/// How a camera's previews are made (frames.md, "Previews"): a small JPEG of a captured
/// frame, `width` pixels wide with the frame's aspect, `framesPerSecond` times a second.
/// Agent settings `preview`, `preview_width`, `preview_fps`, `preview_quality`.
public struct PreviewSettings: Sendable, Equatable {
    public var enabled: Bool
    public var width: Int
    public var framesPerSecond: Double
    /// JPEG quality, 1…100.
    public var quality: Int

    public static let widths = 16...1920
    public static let rates = 0.05...30.0
    public static let qualities = 1...100

    public init(enabled: Bool = true, width: Int = 320, framesPerSecond: Double = 1, quality: Int = 70) {
        self.enabled = enabled
        self.width = width
        self.framesPerSecond = framesPerSecond
        self.quality = quality
    }

    public static let off = PreviewSettings(enabled: false)

    /// What is wrong with these settings, said so that the setting can be fixed; nil when right.
    public var problem: String? {
        if !Self.widths.contains(width) {
            return "preview_width must be from \(Self.widths.lowerBound) to \(Self.widths.upperBound) pixels, not \(width)"
        }
        if !Self.rates.contains(framesPerSecond) {
            return "preview_fps must be from \(Self.rates.lowerBound) to \(Self.rates.upperBound) previews a second, not \(framesPerSecond)"
        }
        if !Self.qualities.contains(quality) { return "preview_quality must be from 1 to 100, not \(quality)" }
        return nil
    }
}

/// Which captured frames become previews: the first frame at or after each due instant, on a
/// grid of 1/rate from the first one, so previews come at the rate asked on average whatever
/// the camera's frame rate; a camera that paused (or a rate change) starts a new grid instead
/// of catching up with a burst. Capture times in, decisions out.
public struct PreviewCadence: Sendable, Equatable {
    public private(set) var nextDue: UInt64?
    public let intervalNanoseconds: UInt64

    public init(framesPerSecond: Double) {
        intervalNanoseconds = UInt64(1_000_000_000 / max(framesPerSecond, 0.001))
    }

    /// Whether the frame captured at `captureNanoseconds` (monotonic) is the next preview.
    public mutating func isDue(at captureNanoseconds: UInt64) -> Bool {
        guard let due = nextDue else {
            nextDue = captureNanoseconds + intervalNanoseconds
            return true
        }
        guard captureNanoseconds >= due else { return false }
        // More than one interval late: a new grid from here, not a burst.
        nextDue = captureNanoseconds - due >= intervalNanoseconds ? captureNanoseconds + intervalNanoseconds : due + intervalNanoseconds
        return true
    }
}

/// What the coordinator accepts as a preview, beyond what every frame must be.
public enum PreviewValidation {
    /// A preview's JPEG is small by design; anything larger is not a preview.
    public static let maximumPayloadBytes = 1 << 20
    /// Preview widths and heights are at most this (`PreviewSettings.widths` and the tallest aspect).
    public static let maximumDimension: UInt32 = 4096

    public static func check(header: Capfleet_V1_FrameHeader, payloadBytes: Int) -> InputRejection? {
        guard header.layout.pixelFormat == "JPEG", header.layout.width <= maximumDimension, header.layout.height <= maximumDimension
        else { return .invalidFormat }
        guard payloadBytes <= maximumPayloadBytes else { return .oversizedClaim }
        return nil
    }
}

extension Capfleet_V1_FrameHeader {
    public var isPreview: Bool { flags & UInt32(Capfleet_V1_FrameFlag.preview.rawValue) != 0 }
}
