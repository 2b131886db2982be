import FleetCore
import Testing

@testable import FleetCapture

@Suite struct V4L2ModelTests {
    @Test func stableIdentity_prefersByID_thenByPath_thenBusInfo() {
        let links = StableDeviceIdentity.Links(
            byID: ["usb-046d_HD_Pro_Webcam_C920_A1B2C3-video-index0": "/dev/video2"],
            byPath: ["pci-0000:00:14.0-usb-0:1:1.0-video-index0": "/dev/video2", "platform-vivid.0-video-index0": "/dev/video0"])
        #expect(
            StableDeviceIdentity.derive(path: "/dev/video2", links: links, busInfo: "usb-0000:00:14.0-1", card: "C920", ordinal: 0)
                == ("v4l2-usb-046d_HD_Pro_Webcam_C920_A1B2C3-video-index0", "by-id"))
        #expect(
            StableDeviceIdentity.derive(path: "/dev/video0", links: links, busInfo: "platform:vivid-000", card: "vivid", ordinal: 0)
                == ("v4l2-platform-vivid.0-video-index0", "by-path"))
        #expect(
            StableDeviceIdentity.derive(path: "/dev/video4", links: links, busInfo: "platform:vivid-001", card: "vivid", ordinal: 1)
                == ("v4l2-platform-vivid-001-vivid-video-index1", "bus-info"))
    }

    @Test func frameSizeCatalog_expandsStepwiseRangesToTheCommonSizesThatFit() {
        let sizes = FrameSizeCatalog.sizes(width: 16...1920, widthStep: 16, height: 16...1088, heightStep: 8)
        #expect(sizes.first! == (16, 16))
        #expect(sizes.last! == (1920, 1088))
        #expect(sizes.contains { $0 == (1280, 720) })
        #expect(sizes.contains { $0 == (1920, 1080) })
        #expect(!sizes.contains { $0 == (3840, 2160) })
        let pal = FrameSizeCatalog.sizes(width: 16...16384, widthStep: 2, height: 16...8640, heightStep: 2, including: [(720, 576)])
        #expect(pal.contains { $0 == (720, 576) }, "the driver's current size is offered")
    }

    @Test func frameInterval_isTheReducedFractionOfTheRate() {
        #expect(V4L2Stream.interval(for: 30) == (1, 30))
        #expect(V4L2Stream.interval(for: 12.5) == (2, 25))
        #expect(V4L2Stream.interval(for: 29.97) == (100, 2997))
    }

    @Test func pixelFormat_bigEndianVariantsRoundTripWithTheirSuffix() {
        let code: UInt32 = PixelFormat("AR15").v4l2Code | (1 << 31)
        #expect(PixelFormat(v4l2Code: code).fourCC == "AR15-BE")
        #expect(PixelFormat("AR15-BE").v4l2Code == code)
        #expect(PixelFormat("RGB3").frameByteCount(width: 640, height: 360) == 640 * 360 * 3)
        #expect(PixelFormat("YU12").frameByteCount(width: 640, height: 360) == 640 * 360 * 3 / 2)
    }

    @Test func centredCrop_isEvenAndCentred() {
        let bounds = PixelRectangle(left: 0, top: 0, width: 720, height: 576)
        #expect(bounds.centredCrop(zoomFactor: 2) == PixelRectangle(left: 180, top: 144, width: 360, height: 288))
        #expect(bounds.centredCrop(zoomFactor: 1) == bounds)
    }

    @Test func agentCrop_doublesThePictureAroundItsCentre() {
        // A GREY ramp: column x holds x. At 2x the output's column x shows source column 2 + x/2 of a 8-wide image.
        let layout = FrameLayout(pixelFormat: .grey, width: 8, height: 2, bytesPerLine: 8)
        let source: [UInt8] = (0..<16).map { UInt8($0 % 8) }
        var output = [UInt8](repeating: 0, count: 16)
        source.withUnsafeBytes { src in
            output.withUnsafeMutableBytes { dst in
                CentredCropScaler(layout: layout).scale(from: src.baseAddress!, to: dst.baseAddress!, factor: 2)
            }
        }
        #expect(Array(output[0..<8]) == [2, 2, 3, 3, 4, 4, 5, 5])
    }

    @Test func zoomCapability_prefersTheControl_thenCrop_thenTheAgent() {
        let zoom = DeviceControl(
            id: 0x009a_090d, name: "Zoom, Absolute", kind: .integer, minimum: 100, maximum: 500, step: 1,
            defaultValue: 100, value: 100)
        let crop = CropCapabilities(
            bounds: PixelRectangle(left: 0, top: 0, width: 720, height: 576),
            defaultRectangle: PixelRectangle(left: 0, top: 0, width: 720, height: 576))
        #expect(ZoomCapability(controls: [zoom], crop: crop).method == .deviceControl)
        #expect(ZoomCapability(controls: [zoom], crop: crop).limits(forWidth: 640).maximum == 5)
        #expect(ZoomCapability(controls: [zoom], crop: crop).controlValue(for: 3, maximumFactor: 5) == 300)
        #expect(ZoomCapability(controls: [], crop: crop).method == .cropSelection)
        #expect(ZoomCapability(controls: [], crop: crop).limits(forWidth: 720) == (4, 1))
        #expect(ZoomCapability(controls: [], crop: nil).method == .agentCrop)
    }
}

@Suite struct AgentCropTests {
    @Test func agentCrop_keepsYUYVMacropixelsTogether() {
        // 8x4 YUYV: luma of column x is 10·x, chroma bytes 200 + macropixel.
        let layout = FrameLayout(pixelFormat: .yuyv, width: 8, height: 4, bytesPerLine: 16)
        var source = [UInt8](repeating: 0, count: 64)
        for y in 0..<4 {
            for x in 0..<8 {
                source[y * 16 + 2 * x] = UInt8(10 * x + y)
                source[y * 16 + 2 * x + 1] = UInt8(200 + x / 2)
            }
        }
        var output = [UInt8](repeating: 0, count: 64)
        source.withUnsafeBytes { src in
            output.withUnsafeMutableBytes { dst in
                CentredCropScaler(layout: layout).scale(from: src.baseAddress!, to: dst.baseAddress!, factor: 2)
            }
        }
        // Rows 1-2 of the source, columns 2-5, each doubled; chroma from the left pixel's macropixel.
        let lumaRow0 = (0..<8).map { output[2 * $0] }
        #expect(lumaRow0 == [21, 21, 31, 31, 41, 41, 51, 51])
        #expect((0..<4).map { output[4 * $0 + 1] } == [201, 201, 202, 202])
        #expect(output[3 * 16] == 22, "the last row shows source row 2")
    }
}
