/// A FourCC pixel format and the memory layout rules the fleet relies on to check
/// that a frame's payload matches its declared format.
public struct PixelFormat: Hashable, Sendable, CustomStringConvertible {
    public let fourCC: String

    public init(_ fourCC: String) { self.fourCC = fourCC }

    public static let yuyv = PixelFormat("YUYV")
    public static let nv12 = PixelFormat("NV12")
    public static let mjpeg = PixelFormat("MJPG")
    public static let grey = PixelFormat("GREY")

    public var description: String { fourCC }

    /// The V4L2 fourcc code (little-endian packing of the four characters).
    public var v4l2Code: UInt32 {
        var code: UInt32 = 0
        for (shift, byte) in fourCC.utf8.prefix(4).enumerated() { code |= UInt32(byte) << (8 * UInt32(shift)) }
        return code
    }

    public init(v4l2Code code: UInt32) {
        let bytes = (0..<4).map { UInt8((code >> (8 * UInt32($0))) & 0xff) }
        self.fourCC = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: " \0")
    }

    public var isCompressed: Bool { self == .mjpeg || fourCC == "JPEG" || fourCC == "H264" }

    /// Exact payload size of one uncompressed frame, or nil for compressed formats whose
    /// size varies per frame (see `maximumPayloadBytes`).
    public func frameByteCount(width: Int, height: Int) -> Int? {
        switch self {
        case .yuyv: width * height * 2
        case .nv12: width * height + 2 * ((width + 1) / 2) * ((height + 1) / 2)
        case .grey: width * height
        default: nil
        }
    }

    /// Upper bound of one frame's payload: exact for raw formats; for compressed formats
    /// the raw 4:2:2 size, which a sane encoder never exceeds.
    public func maximumPayloadBytes(width: Int, height: Int) -> Int {
        frameByteCount(width: width, height: height) ?? width * height * 2 + 4096
    }

    /// Bytes per line of the first plane for raw formats.
    public func bytesPerLine(width: Int) -> Int {
        switch self {
        case .yuyv: width * 2
        default: width
        }
    }
}

extension String {
    fileprivate func trimmingCharacters(in set: String) -> String {
        var scalars = Substring(self)
        while let last = scalars.last, set.contains(last) { scalars = scalars.dropLast() }
        return String(scalars)
    }
}
