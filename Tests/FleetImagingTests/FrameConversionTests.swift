import FleetCore
import Testing

@testable import FleetImaging

/// A reference picture of flat 4x4 blocks (so 4:2:0 and 4:2:2 chroma loses nothing), written
/// into every supported raw format by the BT.601 limited-range formulas, then converted back.
struct FrameConversionTests {
    static let palette: [RGB] = [
        RGB(255, 0, 0), RGB(0, 255, 0), RGB(0, 0, 255), RGB(255, 255, 255), RGB(0, 0, 0),
        RGB(200, 120, 40), RGB(30, 180, 220), RGB(128, 128, 128),
    ]

    static func reference(width: Int, height: Int) -> RGBImage {
        var image = RGBImage(width: width, height: height, filledWith: .black)
        for y in stride(from: 0, to: height, by: 4) {
            for x in stride(from: 0, to: width, by: 4) {
                image.fill(x: x, y: y, width: 4, height: 4, with: palette[(x / 4 + y / 4 * 3) % palette.count])
            }
        }
        return image
    }

    static func yuv(_ c: RGB) -> (y: UInt8, u: UInt8, v: UInt8) {
        let r = Double(c.red), g = Double(c.green), b = Double(c.blue)
        func byte(_ value: Double) -> UInt8 { UInt8(max(0, min(255, value.rounded()))) }
        return (
            byte(16 + (65.481 * r + 128.553 * g + 24.966 * b) / 255),
            byte(128 + (-37.797 * r - 74.203 * g + 112 * b) / 255),
            byte(128 + (112 * r - 93.786 * g - 18.214 * b) / 255)
        )
    }

    /// The reference picture in `fourCC`, as a camera would send it.
    static func encode(_ image: RGBImage, as fourCC: String) -> [UInt8] {
        let w = image.width, h = image.height
        var out: [UInt8] = []
        switch fourCC {
        case "YUYV", "YVYU", "UYVY", "VYUY":
            for y in 0..<h {
                for x in stride(from: 0, to: w, by: 2) {
                    let a = yuv(image[x, y]), b = yuv(image[x + 1, y])
                    switch fourCC {
                    case "YUYV": out += [a.y, a.u, b.y, a.v]
                    case "YVYU": out += [a.y, a.v, b.y, a.u]
                    case "UYVY": out += [a.u, a.y, a.v, b.y]
                    default: out += [a.v, a.y, a.u, b.y]
                    }
                }
            }
        case "NV12", "NV21", "YU12", "YV12":
            for y in 0..<h { for x in 0..<w { out.append(yuv(image[x, y]).y) } }
            var us: [UInt8] = [], vs: [UInt8] = []
            for y in stride(from: 0, to: h, by: 2) {
                for x in stride(from: 0, to: w, by: 2) {
                    let c = yuv(image[x, y])
                    us.append(c.u)
                    vs.append(c.v)
                }
            }
            switch fourCC {
            case "NV12": for (u, v) in zip(us, vs) { out += [u, v] }
            case "NV21": for (u, v) in zip(us, vs) { out += [v, u] }
            case "YU12": out += us + vs
            default: out += vs + us
            }
        case "GREY":
            for y in 0..<h { for x in 0..<w { out.append(image[x, y].green) } }
        default:
            // Packed RGB: the byte order of each pixel, X and A as 0xFF.
            let order: [Character] =
                switch fourCC {
                case "RGB3": ["R", "G", "B"]
                case "BGR3": ["B", "G", "R"]
                case "BGR4", "AR24", "XR24": ["B", "G", "R", "A"]
                case "AB24", "XB24": ["R", "G", "B", "A"]
                case "RGB4", "BA24", "BX24": ["A", "R", "G", "B"]
                default: ["A", "B", "G", "R"]  // RA24, RX24
                }
            for y in 0..<h {
                for x in 0..<w {
                    let c = image[x, y]
                    for channel in order {
                        out.append(channel == "R" ? c.red : channel == "G" ? c.green : channel == "B" ? c.blue : 0xFF)
                    }
                }
            }
        }
        return out
    }

    static func convert(_ bytes: [UInt8], _ fourCC: String, _ w: Int, _ h: Int, to size: (Int, Int)? = nil) throws -> RGBImage {
        try bytes.withUnsafeBytes { raw in
            try FrameConversion.rgb(
                from: RawFrame(bytes: raw, pixelFormat: PixelFormat(fourCC), width: w, height: h),
                width: size?.0 ?? w, height: size?.1 ?? h)
        }
    }

    @Test(arguments: [
        "YUYV", "YVYU", "UYVY", "VYUY", "NV12", "NV21", "YU12", "YV12", "RGB3", "BGR3", "RGB4", "BGR4",
        "AR24", "XR24", "AB24", "XB24", "BA24", "BX24", "RA24", "RX24",
    ])
    func everySupportedFormat_convertsBackToTheColoursItWasMadeFrom(fourCC: String) throws {
        let reference = Self.reference(width: 64, height: 48)
        let bytes = Self.encode(reference, as: fourCC)
        #expect(bytes.count == PixelFormat(fourCC).frameByteCount(width: 64, height: 48), "the test's frame has the fleet's size for \(fourCC)")
        let picture = try Self.convert(bytes, fourCC, 64, 48)
        #expect(picture.width == 64 && picture.height == 48)
        var worst = 0
        for y in 0..<48 { for x in 0..<64 { worst = max(worst, picture[x, y].distance(to: reference[x, y])) } }
        // Limited-range YUV rounds each channel; RGB formats come back exact.
        #expect(
            worst <= (fourCC.hasPrefix("R") || fourCC.hasPrefix("B") || fourCC.hasSuffix("24") ? 0 : 3), "\(fourCC): worst channel error \(worst)")
    }

    @Test func grey_becomesEqualChannels() throws {
        let picture = try Self.convert([0, 64, 128, 255], "GREY", 2, 2)
        #expect(picture[0, 0] == .black && picture[1, 0] == RGB(64, 64, 64) && picture[1, 1] == .white)
    }

    @Test func limitedRangeBlack_isBlack_andWhiteIsWhite() throws {
        // Two YUYV pixels: black (16, 128, 128) and white (235, 128, 128).
        let picture = try Self.convert([16, 128, 235, 128], "YUYV", 2, 1)
        #expect(picture[0, 0] == .black && picture[1, 0] == .white, "\(picture[0, 0]) \(picture[1, 0])")
    }

    @Test func downscaling_keepsFlatAreasTheirColour_andTheAspect() throws {
        // 16x16 blocks at 640x480, shrunk 2x: blocks become 8x8 of the same colour.
        var reference = RGBImage(width: 640, height: 480, filledWith: .black)
        for y in stride(from: 0, to: 480, by: 16) {
            for x in stride(from: 0, to: 640, by: 16) {
                reference.fill(x: x, y: y, width: 16, height: 16, with: Self.palette[(x / 16 + y / 16) % Self.palette.count])
            }
        }
        let size = FrameConversion.scaledSize(width: 640, height: 480, toWidth: 320)
        #expect(size == (320, 240))
        let picture = try Self.convert(Self.encode(reference, as: "YUYV"), "YUYV", 640, 480, to: size)
        for (x, y) in [(4, 4), (12, 4), (100, 60), (316, 236)] {
            let expected = reference[x * 2 + 1, y * 2 + 1]
            #expect(picture[x, y].distance(to: expected) <= 3, "(\(x), \(y)): \(picture[x, y]) against \(expected)")
        }
        #expect(FrameConversion.scaledSize(width: 1920, height: 1080, toWidth: 320) == (320, 180))
        #expect(FrameConversion.scaledSize(width: 200, height: 100, toWidth: 320) == (200, 100), "never wider than the frame")
    }

    @Test func aFormatWithoutConversion_andAShortPayload_areRefusedWithTheReason() throws {
        #expect(throws: ImagingError.unsupportedPixelFormat("H264")) { try Self.convert([1, 2, 3], "H264", 2, 2) }
        #expect(throws: ImagingError.payloadTooShort(pixelFormat: "YUYV", width: 4, height: 4, needed: 32, got: 8)) {
            try Self.convert([UInt8](repeating: 16, count: 8), "YUYV", 4, 4)
        }
        #expect(!FrameRenderer.canRender(PixelFormat("H264")) && FrameRenderer.canRender(.mjpeg) && FrameRenderer.canRender(.nv12))
        #expect(ImagingError.unsupportedPixelFormat("H264").description.contains("--raw"))
    }
}
