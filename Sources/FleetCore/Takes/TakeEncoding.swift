// SPDX-License-Identifier: Apache-2.0

/// How a take stores a raw camera's frames (recordings.md, "Codecs"). Compressed camera
/// formats (MJPEG, H.264) are stored as they come whatever the take asks.
public enum VideoCodec: String, Sendable, CaseIterable, Codable {
    /// The frames as captured.
    case raw
    /// Lossless: FFV1 version 3, bit for bit the captured frames once decoded.
    case ffv1
    /// Lossy H.264 (libx264, or the host's hardware encoder).
    case h264
    /// Lossy H.265/HEVC (libx265, or the host's hardware encoder).
    case hevc

    /// The FourCC a stored segment's track names (what the index keeps as its pixel format).
    public var fourCC: String {
        switch self {
        case .raw: ""
        case .ffv1: "FFV1"
        case .h264: "H264"
        case .hevc: "HEVC"
        }
    }

    public var isLossy: Bool { self == .h264 || self == .hevc }
}

/// Whether a take's encoder steadies the picture first (recordings.md, "Stabilisation"). It
/// alters the pixels, so only lossy encoded parts (h264, hevc) take it: never raw or FFV1
/// parts, stills, detection, alignment or the live frames, which keep the camera's own.
public enum VideoStabilisation: String, Sendable, CaseIterable, Codable {
    case off
    /// libavfilter's deshake: each frame's shift against the one before, moved back.
    case deshake
}

/// A take's codec and how hard it works; every camera of the take uses it.
public struct TakeEncoding: Sendable, Hashable, Codable {
    public var codec: VideoCodec
    /// h264/hevc: constant rate factor, 0 (best) to 51; nil: `defaultQuality`.
    public var quality: Int?
    /// h264/hevc: average bits per second instead of a quality; 0: quality decides.
    public var bitrate: Int
    /// Frames from one key frame to the next; 0: ffv1 1 (every frame stands alone), h264/hevc
    /// one second's worth.
    public var gop: Int
    /// Off unless asked: h264/hevc only.
    public var stabilisation: VideoStabilisation

    /// A constant rate factor that keeps a moving camera scene above 38 dB PSNR (the encode
    /// benchmark measures it) at a twentieth of raw or less.
    public static let defaultQuality = 23
    public static let raw = TakeEncoding(codec: .raw)

    public init(codec: VideoCodec, quality: Int? = nil, bitrate: Int = 0, gop: Int = 0, stabilisation: VideoStabilisation = .off) {
        self.codec = codec
        self.quality = quality
        self.bitrate = bitrate
        self.gop = gop
        self.stabilisation = stabilisation
    }

    /// Frames per group of pictures at `frameRate`: what the encoder is told.
    public func gopFrames(frameRate: Double) -> Int {
        if gop > 0 { return gop }
        if codec == .ffv1 { return 1 }
        return max(Int(frameRate.rounded()), 1)
    }

    /// What is wrong with it, said the way `record start` takes it; nil when it is sound.
    public var problem: String? {
        if let quality, !(0...51).contains(quality) {
            return "--quality \(quality) is out of range: a constant rate factor is 0 (best) to 51"
        }
        if quality != nil, bitrate > 0 { return "--quality and --bitrate both given: a take is encoded to one or the other" }
        if !codec.isLossy, quality != nil || bitrate > 0 {
            return "--quality and --bitrate are for h264 and hevc; \(codec.rawValue) is \(codec == .ffv1 ? "lossless" : "uncompressed")"
        }
        if gop < 0 || gop > 10_000 { return "--gop \(gop) is out of range: 1 to 10000 frames" }
        if stabilisation != .off, !codec.isLossy {
            return
                "--stabilise is for h264 and hevc takes: it alters the pixels, and a \(codec == .ffv1 ? "lossless ffv1" : "raw") take keeps the camera's own"
        }
        return nil
    }

    /// What is wrong with recording `device`'s `pixelFormat` in this encoding (recordings.md,
    /// "Deeper pixels"); nil when it records. Formats of 16-bit words go in no uncompressed
    /// Matroska track that players read, so they are encoded; depth only losslessly;
    /// stabilisation only at 8 bits.
    public func problem(recording pixelFormat: PixelFormat, of device: String) -> String? {
        guard pixelFormat.hasWordSamples || pixelFormat.bayer != nil else { return nil }
        if codec == .raw {
            return
                "device \(device) captures \(pixelFormat), which a take stores encoded (players know no uncompressed layout of it): record it with --codec ffv1 (lossless, every bit)\(pixelFormat.isDepth || pixelFormat.bayer != nil ? "" : " or hevc (Main 10)"), or --codec-for \(device)=ffv1"
        }
        if pixelFormat.isDepth, codec.isLossy {
            return
                "device \(device) captures depth (\(pixelFormat)), distances that \(codec.rawValue) would change: record it with --codec-for \(device)=ffv1"
        }
        if pixelFormat.bayer != nil, codec.isLossy {
            return
                "device \(device) captures a Bayer mosaic (\(pixelFormat)), which \(codec.rawValue)'s colour planes would smear: record it with --codec-for \(device)=ffv1 (lossless, demosaiced later)"
        }
        if stabilisation != .off {
            return
                "device \(device) captures \(pixelFormat), deeper than the 8 bits stabilisation steadies: record it without --stabilise (--codec-for \(device)=\(codec.rawValue))"
        }
        return nil
    }

    /// How `recordings show` says it: "h264 crf 23, gop 30", "h264 crf 23, stabilised (deshake)", "ffv1", "raw".
    public var summary: String {
        var parts = [codec.rawValue]
        if codec.isLossy { parts.append(bitrate > 0 ? "\(bitrate / 1000) kbit/s" : "crf \(quality ?? Self.defaultQuality)") }
        if gop > 0 { parts.append("gop \(gop)") }
        if stabilisation != .off { parts.append("stabilised (\(stabilisation.rawValue))") }
        return parts.joined(separator: ", ")
    }
}

/// A bit rate as people write it: 8000000, 8M, 800k.
public enum BitRate {
    public static func parse(_ text: String) -> Int? {
        let lowered = text.lowercased()
        let (digits, scale): (Substring, Double) =
            lowered.hasSuffix("m")
            ? (lowered.dropLast(), 1e6)
            : lowered.hasSuffix("k") ? (lowered.dropLast(), 1e3) : (Substring(lowered), 1)
        guard let value = Double(digits), value.isFinite, value > 0, value * scale <= Double(Int32.max) else { return nil }
        return Int(value * scale)
    }
}

/// An encoder a host records takes with, as its HELLO lists it.
public struct HostEncoder: Sendable, Hashable, Codable {
    public var codec: VideoCodec
    /// libavcodec's name: ffv1, libx264, h264_v4l2m2m, h264_vaapi, …
    public var name: String
    public var hardware: Bool
    /// A hardware encoder's device node; empty for software.
    public var device: String

    public init(codec: VideoCodec, name: String, hardware: Bool, device: String = "") {
        self.codec = codec
        self.name = name
        self.hardware = hardware
        self.device = device
    }

    /// "h264_vaapi (hardware, /dev/dri/renderD128)", "libx264 (software)".
    public var summary: String { hardware ? "\(name) (hardware\(device.isEmpty ? "" : ", " + device))" : "\(name) (software)" }
}
