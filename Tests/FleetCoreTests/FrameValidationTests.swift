import FleetCore
import FleetProtocol
import Testing

@Suite struct FrameValidationTests {
    func header(width: UInt32 = 640, height: UInt32 = 480, pixel: String = "YUYV", payload: UInt64 = 614_400) -> Capfleet_V1_FrameHeader {
        .with {
            $0.protocolVersion = .current
            $0.nodeID = "n"
            $0.deviceID = "d"
            $0.layout = .with {
                $0.pixelFormat = pixel
                $0.width = width
                $0.height = height
            }
            $0.payloadSize = payload
        }
    }

    let limit = 128 * 1024 * 1024

    @Test func frameValidation_acceptsAnExactYUYVFrame() {
        #expect(FrameValidation.check(header: header(), payloadBytes: 614_400, maxPayloadBytes: limit) == nil)
    }

    @Test func frameValidation_acceptsAnExactNV12Frame() {
        #expect(FrameValidation.check(header: header(pixel: "NV12", payload: 460_800), payloadBytes: 460_800, maxPayloadBytes: limit) == nil)
    }

    @Test func frameValidation_refusesPayloadThatDisagreesWithHeader() {
        #expect(FrameValidation.check(header: header(), payloadBytes: 1000, maxPayloadBytes: limit) == .payloadSizeMismatch)
    }

    @Test func frameValidation_refusesPayloadThatDisagreesWithFormat() {
        #expect(FrameValidation.check(header: header(payload: 1000), payloadBytes: 1000, maxPayloadBytes: limit) == .formatSizeMismatch)
    }

    @Test func frameValidation_refusesATwoGigabyteClaim() {
        #expect(FrameValidation.check(header: header(payload: 2_000_000_000), payloadBytes: 10, maxPayloadBytes: limit) == .oversizedClaim)
    }

    @Test func frameValidation_refusesAbsurdDimensions() {
        #expect(FrameValidation.check(header: header(width: 0), payloadBytes: 614_400, maxPayloadBytes: limit) == .invalidFormat)
        #expect(FrameValidation.check(header: header(width: 100_000), payloadBytes: 614_400, maxPayloadBytes: limit) == .invalidFormat)
    }

    @Test func frameValidation_refusesAnotherProtocolVersion() {
        var old = header()
        old.protocolVersion = .unspecified
        #expect(FrameValidation.check(header: old, payloadBytes: 614_400, maxPayloadBytes: limit) == .incompatibleVersion)
    }

    @Test func frameValidation_boundsCompressedFrames() {
        #expect(FrameValidation.check(header: header(pixel: "MJPG", payload: 50_000), payloadBytes: 50_000, maxPayloadBytes: limit) == nil)
        #expect(FrameValidation.check(header: header(pixel: "MJPG", payload: 0), payloadBytes: 0, maxPayloadBytes: limit) == .formatSizeMismatch)
    }
}

@Suite struct PixelFormatTests {
    @Test func pixelFormat_rawFrameSizesMatchV4L2Layouts() {
        #expect(PixelFormat.yuyv.frameByteCount(width: 1920, height: 1080) == 4_147_200)
        #expect(PixelFormat.nv12.frameByteCount(width: 3840, height: 2160) == 12_441_600)
        #expect(PixelFormat.nv12.frameByteCount(width: 3, height: 3) == 9 + 8)
        #expect(PixelFormat.mjpeg.frameByteCount(width: 640, height: 480) == nil)
    }

    @Test func pixelFormat_roundTripsV4L2FourCC() {
        #expect(PixelFormat.yuyv.v4l2Code == 0x5659_5559)
        #expect(PixelFormat(v4l2Code: 0x3231_564E) == .nv12)
    }
}
