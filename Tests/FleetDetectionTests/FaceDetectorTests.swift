import FleetCapture
import FleetCore
import FleetDetection
import FleetImaging
import Foundation
import Testing

/// The face: Eileen Collins's NASA portrait (public domain), `astronaut.png` from Debian's
/// python3-skimage, which scripts/install-deps.sh takes out of the package into
/// .build-test-assets/.
@Suite struct FaceDetectorTests {
    static var portraitPath: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent(".build-test-assets/astronaut.png").path
    }

    static func portrait() throws -> GreyImage {
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: portraitPath)))
        let picture = try PNGDecoder.decode(bytes)
        var grey = [UInt8](repeating: 0, count: picture.width * picture.height)
        for index in grey.indices {
            let r = Int(picture.pixels[index * 3]), g = Int(picture.pixels[index * 3 + 1]), b = Int(picture.pixels[index * 3 + 2])
            grey[index] = UInt8((r * 77 + g * 150 + b * 29) >> 8)
        }
        return GreyImage(width: picture.width, height: picture.height, pixels: grey)
    }

    @Test func theAstronautsFace_isFound_whereThePortraitHasIt() throws {
        let faces = try FaceDetector().detect(try Self.portrait())
        try #require(faces.count >= 1, "a face in the portrait")
        // Her face is in the upper middle of the 512x512 portrait, around x 0.33-0.53, y 0.1-0.4.
        let face = faces[0]
        #expect(face.x > 0.25 && face.x + face.width < 0.62 && face.y > 0.02 && face.y + face.height < 0.5, "\(face)")
        #expect(face.width > 0.1 && face.width < 0.35, "\(face)")
    }

    @Test func theSyntheticCameraDrawingThePortrait_showsTheFaceWhereItWasPlaced() throws {
        let overlay = SyntheticOverlay(image: try Self.portrait(), origin: NormalizedPoint(x: 0.45, y: 0.2), width: 0.45)
        var renderer = TestPatternRenderer(
            format: VideoFormat(pixelFormat: .yuyv, width: 640, height: 480, frameRateRanges: [FrameRateRange(min: 1, max: 30)]),
            overlays: [overlay])
        let frame = UnsafeMutableRawPointer.allocate(byteCount: renderer.frameBytes, alignment: 16)
        defer { frame.deallocate() }
        renderer.render(frameNumber: 7, zoom: 1, into: frame)
        let luma = try #require(LumaPlane(base: frame, pixelFormat: .yuyv, width: 640, height: 480))
        let faces = try FaceDetector().detect(try #require(GreyImage(luma: luma)))
        try #require(faces.count == 1, "\(faces)")
        // Where the portrait's face lands: the overlay's origin plus the face's place in it, scaled.
        let placed = overlay.placement(frameWidth: 640, frameHeight: 480)
        let centreX = (faces[0].x + faces[0].width / 2) * 640, centreY = (faces[0].y + faces[0].height / 2) * 480
        #expect(centreX > Double(placed.x) + 0.3 * Double(placed.width) && centreX < Double(placed.x) + 0.6 * Double(placed.width), "\(faces[0])")
        #expect(centreY > Double(placed.y) + 0.1 * Double(placed.height) && centreY < Double(placed.y) + 0.45 * Double(placed.height), "\(faces[0])")
        // And a region away from it finds nothing.
        #expect(try FaceDetector().detect(try #require(GreyImage(luma: luma)), region: NormalizedRect(x: 0, y: 0, width: 0.4, height: 1)).isEmpty)
    }

    @Test func aMissingCascade_isRefusedSayingWhatToInstall() {
        #expect(throws: DetectionError.cannotLoadCascade(path: "/nonexistent/cascade.xml")) { try FaceDetector(cascade: "/nonexistent/cascade.xml") }
        #expect(DetectionError.cannotLoadCascade(path: "x").description.contains("opencv-data"))
    }
}
