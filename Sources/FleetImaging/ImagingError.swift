/// What went wrong making or encoding a picture, and what to do about it.
public enum ImagingError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Frames of this pixel format cannot be turned into a picture.
    case unsupportedPixelFormat(String)
    /// The payload is shorter than its format and size need.
    case payloadTooShort(pixelFormat: String, width: Int, height: Int, needed: Int, got: Int)
    case invalidSize(width: Int, height: Int)
    /// A TurboJPEG call failed, with the library's own message.
    case jpeg(call: String, message: String)
    /// A zlib call failed while writing a PNG.
    case png(call: String, code: Int32)
    /// A PNG that cannot be read (not one, damaged, or of a kind the fleet does not write).
    case unreadablePNG(String)

    public var description: String {
        switch self {
        case let .unsupportedPixelFormat(format):
            "cannot make a picture of \(format) frames (supported: \(FrameConversion.supportedFourCCs.joined(separator: ", ")), MJPG and JPEG); fetch the raw bytes instead (--raw)"
        case let .payloadTooShort(format, width, height, needed, got):
            "a \(width)x\(height) \(format) frame needs \(needed) bytes but has \(got); the frame is damaged or its header is wrong"
        case let .invalidSize(width, height):
            "cannot make a picture of \(width)x\(height): width and height must be between 1 and 16384"
        case let .jpeg(call, message):
            "TurboJPEG \(call) failed: \(message)"
        case let .png(call, code):
            "zlib \(call) failed with code \(code) while writing a PNG"
        case let .unreadablePNG(problem):
            "cannot read the PNG: \(problem)"
        }
    }
}
