/// Picks a device's active format the way camera engineers know it: an exact entry of the
/// format list, the best match for a size/pixel format/frame rate, or a session preset.
/// A request the device cannot meet is refused with what it supports.
public enum FormatRequest: Sendable, Equatable {
    case index(Int)
    case bestMatch(width: Int?, height: Int?, pixelFormat: PixelFormat?, framesPerSecond: Double?)
    case preset(FormatPreset)
}

public enum FormatPreset: String, Sendable, CaseIterable {
    /// The largest format that runs at 30 fps: the highest-quality video.
    case high
    /// Closest to 1280x720 at 30 fps.
    case medium
    /// The smallest format at 15 fps or more.
    case low
    /// The largest format whatever its rate: stills.
    case photo
    case hd720 = "1280x720"
    case hd1080 = "1920x1080"
    case uhd2160 = "3840x2160"
}

public struct FormatRefusal: Error, Sendable, Equatable, CustomStringConvertible {
    public let request: String
    public let supported: [String]

    public var description: String {
        "the device cannot do \(request); it supports: \(supported.joined(separator: "; "))"
    }
}

public enum FormatSelector {
    /// Pixel formats in order of preference when a request leaves it open: planar 4:2:0
    /// first (what encoders want), then packed 4:2:2, then compressed.
    static let preference: [PixelFormat] = [.nv12, .yuyv, .mjpeg, .grey]

    public static func select(_ request: FormatRequest, from formats: [VideoFormat]) -> Result<Int, FormatRefusal> {
        let refuse = { (what: String) in Result<Int, FormatRefusal>.failure(FormatRefusal(request: what, supported: formats.map(\.label))) }
        switch request {
        case let .index(index):
            return formats.indices.contains(index) ? .success(index) : refuse("format #\(index)")
        case let .bestMatch(width, height, pixel, fps):
            let size = "\(width.map(String.init) ?? "any")x\(height.map(String.init) ?? "any")"
            let pixelText: String = pixel.map { " \($0)" } ?? ""
            let rateText: String = fps.map { " at \(VideoFormat.trim($0)) fps" } ?? ""
            let label = size + pixelText + rateText
            let candidates = formats.indices.filter { index in
                (pixel == nil || formats[index].pixelFormat == pixel) && (fps.map { formats[index].supports(framesPerSecond: $0) } ?? true)
            }
            guard let best = candidates.min(by: { score(formats[$0], width, height) < score(formats[$1], width, height) }) else {
                return refuse(label)
            }
            return .success(best)
        case let .preset(preset):
            guard let index = choose(preset, formats) else { return refuse("preset \(preset.rawValue)") }
            return .success(index)
        }
    }

    /// Smaller is better: distance in pixel count, then preferred pixel format, then unbinned.
    private static func score(_ format: VideoFormat, _ width: Int?, _ height: Int?) -> (Int, Int, Int, Int) {
        let sizeDistance = abs(format.width - (width ?? format.width)) + abs(format.height - (height ?? format.height))
        let pixelRank = preference.firstIndex(of: format.pixelFormat) ?? preference.count
        return (sizeDistance, format.isBinned ? 1 : 0, pixelRank, -format.width * format.height)
    }

    private static func choose(_ preset: FormatPreset, _ formats: [VideoFormat]) -> Int? {
        func rank(_ index: Int) -> Int { preference.firstIndex(of: formats[index].pixelFormat) ?? preference.count }
        func area(_ index: Int) -> Int { formats[index].width * formats[index].height }
        let unbinned = formats.indices.filter { !formats[$0].isBinned }
        func exact(_ width: Int, _ height: Int) -> Int? {
            unbinned.filter { formats[$0].width == width && formats[$0].height == height }.min { rank($0) < rank($1) }
        }
        switch preset {
        case .high:
            return unbinned.filter { formats[$0].supports(framesPerSecond: 30) }
                .max { (area($0), -rank($0)) < (area($1), -rank($1)) }
        case .medium:
            return unbinned.filter { formats[$0].supports(framesPerSecond: 30) }
                .min { (abs(area($0) - 1280 * 720), rank($0)) < (abs(area($1) - 1280 * 720), rank($1)) }
        case .low:
            return unbinned.filter { formats[$0].maxFramesPerSecond >= 15 }.min { (area($0), rank($0)) < (area($1), rank($1)) }
        case .photo:
            return unbinned.max { (area($0), -rank($0)) < (area($1), -rank($1)) }
        case .hd720: return exact(1280, 720)
        case .hd1080: return exact(1920, 1080)
        case .uhd2160: return exact(3840, 2160)
        }
    }
}

extension FormatSelector {
    /// A format's default rate: its highest rate up to 30 fps, the usual video rate.
    public static func defaultFrameRate(of format: VideoFormat) -> Double {
        format.frameRateRanges.map { min($0.maxFramesPerSecond, max($0.minFramesPerSecond, 30)) }.max() ?? 30
    }
}
