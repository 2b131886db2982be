import FleetCore

/// Any frame the fleet can picture, raw or JPEG, to RGB at its own size or shrunk to a
/// width: the one step both the agent's previews and the CLI's snapshots take. Holds a
/// JPEG decoder, so one renderer belongs to one thread at a time.
public final class FrameRenderer {
    private var decoder: JPEGDecoder?

    public init() {}

    /// Whether frames of `format` can become pictures.
    public static func canRender(_ format: PixelFormat) -> Bool {
        format.isJPEG || FrameConversion.canConvert(format)
    }

    /// The frame at its own size.
    public func picture(of frame: RawFrame) throws(ImagingError) -> RGBImage {
        try picture(of: frame, width: frame.width)
    }

    /// The frame `width` pixels wide (never wider than the frame), keeping its aspect.
    public func picture(of frame: RawFrame, width wanted: Int) throws(ImagingError) -> RGBImage {
        if frame.pixelFormat.isJPEG {
            if decoder == nil { decoder = try JPEGDecoder() }
            let decoded = try decoder!.decode(frame.bytes, atLeastWidth: wanted)
            let size = FrameConversion.scaledSize(width: decoded.width, height: decoded.height, toWidth: wanted)
            return FrameConversion.resized(decoded, width: size.width, height: size.height)
        }
        let size = FrameConversion.scaledSize(width: frame.width, height: frame.height, toWidth: wanted)
        return try FrameConversion.rgb(from: frame, width: size.width, height: size.height)
    }
}

extension PixelFormat {
    /// MJPG from cameras, JPEG from previews and stills: both decode the same way.
    public var isJPEG: Bool { self == .mjpeg || fourCC == "JPEG" }
}
