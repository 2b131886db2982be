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
    /// Big-endian variants (bit 31 set in V4L2) carry a "-BE" suffix, as v4l2-ctl prints them.
    public var v4l2Code: UInt32 {
        var code: UInt32 = 0
        let bigEndian = fourCC.hasSuffix("-BE")
        let characters = bigEndian ? String(fourCC.dropLast(3)) : fourCC
        for (shift, byte) in (characters + "    ").utf8.prefix(4).enumerated() { code |= UInt32(byte) << (8 * UInt32(shift)) }
        return bigEndian ? code | (1 << 31) : code
    }

    public init(v4l2Code code: UInt32) {
        let bigEndian = code & (1 << 31) != 0
        let bytes = (0..<4).map { UInt8((code & 0x7fff_ffff) >> (8 * UInt32($0)) & 0xff) }
        let characters = String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: " \0")
        self.fourCC = bigEndian ? characters + "-BE" : characters
    }

    public var isCompressed: Bool { self == .mjpeg || fourCC == "JPEG" || fourCC == "H264" }

    /// Bytes per pixel of packed single-plane formats the fleet knows.
    private static let packedBytesPerPixel: [String: Int] = [
        "GREY": 1, "Y8": 1, "RGB1": 1, "BA81": 1, "GBRG": 1, "GRBG": 1, "RGGB": 1,
        "YUYV": 2, "UYVY": 2, "YVYU": 2, "VYUY": 2, "Y16": 2, "Y10": 2, "Y12": 2, "Z16": 2,
        "BG10": 2, "GB10": 2, "BA10": 2, "RG10": 2, "BG12": 2, "GB12": 2, "BA12": 2, "RG12": 2, "BYR2": 2, "GB16": 2, "GR16": 2, "RG16": 2, "RGBP": 2,
        "RGBR": 2,
        "RGBO": 2, "RGBQ": 2, "AR12": 2, "XR12": 2, "AR15": 2, "XR15": 2, "RGB4": 4, "BGR4": 4, "Y16-BE": 2,
        "RGB3": 3, "BGR3": 3, "HSV3": 3, "AR24": 4, "XR24": 4, "BA24": 4, "BX24": 4, "RA24": 4, "RX24": 4,
        "AB24": 4, "XB24": 4, "HSV4": 4, "AYUV": 4, "XYUV": 4, "VUYA": 4, "VUYX": 4, "YUV4": 4,
    ]

    /// Planar and semi-planar 4:2:0 formats: a full-size luma plane plus half-size chroma.
    private static let fourTwoZero: Set<String> = ["NV12", "NV21", "YU12", "YV12"]
    /// Semi-planar 4:2:2: luma plus full-height, half-width chroma pairs.
    private static let fourTwoTwoPlanar: Set<String> = ["NV16", "NV61", "422P"]

    /// Exact payload size of one uncompressed frame, or nil for compressed or unknown
    /// formats whose size the fleet cannot predict (see `maximumPayloadBytes`).
    public func frameByteCount(width: Int, height: Int) -> Int? {
        if Self.fourTwoZero.contains(fourCC) { return width * height + 2 * ((width + 1) / 2) * ((height + 1) / 2) }
        if Self.fourTwoTwoPlanar.contains(fourCC) { return width * height * 2 }
        if fourCC == "NV24" || fourCC == "NV42" { return width * height * 3 }
        if semiPlanarWordBits != nil { return 2 * (width * height + 2 * ((width + 1) / 2) * ((height + 1) / 2)) }
        return Self.packedBytesPerPixel[fourCC].map { width * height * $0 }
    }

    /// Upper bound of one frame's payload: exact for known raw formats; otherwise four bytes
    /// a pixel, which no raw format of a camera exceeds and no sane encoder either.
    public func maximumPayloadBytes(width: Int, height: Int) -> Int {
        frameByteCount(width: width, height: height) ?? width * height * 4 + 4096
    }

    /// FFmpeg's name of this layout (`-pixel_format` of rawvideo), so that ffplay, mpv and
    /// ffmpeg read frames as they are; nil where FFmpeg has none (or a compressed format).
    public var ffmpegName: String? {
        switch fourCC {
        case "YUYV": "yuyv422"
        case "UYVY": "uyvy422"
        case "YVYU": "yvyu422"
        case "NV12": "nv12"
        case "NV21": "nv21"
        case "NV16": "nv16"
        case "NV24": "nv24"
        case "NV42": "nv42"
        case "YU12": "yuv420p"
        case "422P": "yuv422p"
        case "GREY", "Y8": "gray"
        case "Y16", "Z16": "gray16le"
        case "Y10": "gray10le"
        case "Y12": "gray12le"
        case "P010": "p010le"
        case "P016": "p016le"
        case "Y16-BE": "gray16be"
        case "RGBP": "rgb565le"
        case "RGB3": "rgb24"
        case "BGR3": "bgr24"
        case "XR24": "bgr0"
        case "AR24": "bgra"
        case "XB24": "rgb0"
        case "AB24": "rgba"
        default: nil
        }
    }

    /// Bytes per line of the first plane for raw formats.
    public func bytesPerLine(width: Int) -> Int {
        width * (Self.packedBytesPerPixel[fourCC] ?? (semiPlanarWordBits != nil ? 2 : 1))
    }
}

extension String {
    fileprivate func trimmingCharacters(in set: String) -> String {
        var scalars = Substring(self)
        while let last = scalars.last, set.contains(last) { scalars = scalars.dropLast() }
        return String(scalars)
    }
}
