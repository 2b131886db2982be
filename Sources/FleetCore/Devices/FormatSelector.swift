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
    /// What `supported` lists: whole formats, or only the sizes the device has.
    public let what: String

    public init(request: String, supported: [String], what: String = "formats") {
        self.request = request
        self.supported = supported
        self.what = what
    }

    public var description: String {
        "the device cannot do \(request); its \(what): \(supported.joined(separator: "; ")). See capfleet formats DEVICE"
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
            // A size or pixel format is matched exactly, as AVFoundation's activeFormat is one
            // entry of the device's list: the nearest size is a different picture, and a rate
            // outside every range is refused, not rounded into one (activeVideoMinFrameDuration).
            let sized = formats.indices.filter { index in
                (width == nil || formats[index].width == width) && (height == nil || formats[index].height == height)
            }
            guard !sized.isEmpty else {
                return .failure(
                    FormatRefusal(
                        request: label, supported: sizes(of: formats.indices.filter { pixel == nil || formats[$0].pixelFormat == pixel }, formats),
                        what: "sizes"))
            }
            let pixeled = sized.filter { pixel == nil || formats[$0].pixelFormat == pixel }
            guard !pixeled.isEmpty else {
                return .failure(
                    FormatRefusal(
                        request: label, supported: sized.map { formats[$0].label },
                        what: width == nil && height == nil ? "formats" : "formats at that size"))
            }
            let candidates = pixeled.filter { index in fps.map { formats[index].supports(framesPerSecond: $0) } ?? true }
            guard let best = candidates.min(by: { score(formats[$0], width, height) < score(formats[$1], width, height) }) else {
                return .failure(FormatRefusal(request: label, supported: pixeled.map { formats[$0].label }, what: "frame rate ranges there"))
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
    /// Each distinct size once, in list order, with the rates it runs at: `1920x1080 (NV12 1-60fps, YUYV 1-30fps)`.
    static func sizes(of indices: [Int], _ formats: [VideoFormat]) -> [String] {
        var order: [String] = []
        var entries: [String: [String]] = [:]
        for index in indices {
            let format = formats[index]
            let size = "\(format.width)x\(format.height)"
            if entries[size] == nil { order.append(size) }
            entries[size, default: []].append(String(format.label.dropFirst(size.count + 1)))
        }
        return order.map { "\($0) (\(entries[$0, default: []].joined(separator: ", ")))" }
    }

    /// The rate a device runs at after it takes `format`, the one rule every camera follows:
    /// the rate it had, if the new format runs it, else the new format's default. The
    /// slowest rate it may fall to is kept likewise, never above the rate.
    public static func frameRate(keeping current: FrameRateRange, on format: VideoFormat) -> FrameRateRange {
        let fps = format.supports(framesPerSecond: current.maxFramesPerSecond) ? current.maxFramesPerSecond : defaultFrameRate(of: format)
        let slowest =
            current.minFramesPerSecond <= fps && format.supports(framesPerSecond: current.minFramesPerSecond) ? current.minFramesPerSecond : fps
        return FrameRateRange(min: slowest, max: fps)
    }

    /// A format's default rate: its highest rate up to 30 fps, the usual video rate.
    public static func defaultFrameRate(of format: VideoFormat) -> Double {
        format.frameRateRanges.map { min($0.maxFramesPerSecond, max($0.minFramesPerSecond, 30)) }.max() ?? 30
    }
}
