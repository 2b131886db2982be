import FleetCapture
import FleetCore
import FleetDetection
import Testing

@Suite struct BarcodeScannerTests {
    /// A grey frame with `code` pasted at (x, y).
    static func frame(width: Int, height: Int, with code: GreyImage, at x: Int, _ y: Int) -> GreyImage {
        var pixels = [UInt8](repeating: 128, count: width * height)
        for row in 0..<code.height {
            for column in 0..<code.width { pixels[(y + row) * width + x + column] = code.pixels[row * code.width + column] }
        }
        return GreyImage(width: width, height: height, pixels: pixels)
    }

    @Test func aQRCode_isFoundWithItsText_andCornersAroundWhereItWasDrawn() throws {
        let code = try #require(QRCodePicture.make("capfleet://still/42", moduleSize: 4))
        let image = Self.frame(width: 640, height: 480, with: code, at: 400, 100)
        let found = try BarcodeScanner(symbologies: [.qr]).scan(image)
        try #require(found.count == 1, "\(found)")
        #expect(found[0].symbology == .qr && found[0].value == "capfleet://still/42")
        let bounds = found[0].bounds
        // The symbol sits inside its quiet zone of four modules.
        let quiet = 16.0
        #expect(abs(bounds.x * 640 - (400 + quiet)) <= 2 && abs(bounds.y * 480 - (100 + quiet)) <= 2, "\(bounds)")
        #expect(abs((bounds.x + bounds.width) * 640 - (400 + Double(code.width) - quiet)) <= 2, "\(bounds)")
        #expect(found[0].corners.count == 4)
    }

    @Test func aCodeOutsideTheRegion_isNotReported_andOneInsideIsInFrameCoordinates() throws {
        let code = try #require(QRCodePicture.make("left side", moduleSize: 3))
        let image = Self.frame(width: 640, height: 480, with: code, at: 20, 200)
        let scanner = try BarcodeScanner(symbologies: [.qr])
        #expect(try scanner.scan(image, region: NormalizedRect(x: 0.5, y: 0, width: 0.5, height: 1)).isEmpty)
        let inside = try scanner.scan(image, region: NormalizedRect(x: 0, y: 0.25, width: 0.5, height: 0.75))
        #expect(inside.map(\.value) == ["left side"])
        #expect(inside.first.map { abs($0.bounds.x * 640 - (20 + 12)) <= 2 } == true, "corners in the whole frame's coordinates: \(inside)")
    }

    @Test func symbologiesNotAskedFor_areNotReported() throws {
        let code = try #require(QRCodePicture.make("ignored"))
        #expect(try BarcodeScanner(symbologies: [.ean13]).scan(Self.frame(width: 320, height: 240, with: code, at: 10, 10)).isEmpty)
    }

    @Test func symbologyNames_areReadAsPeopleWriteThem_andDataMatrixIsRefusedByName() throws {
        #expect(try BarcodeSymbology.list("qr, EAN-13,code128,qr").get() == [.qr, .ean13, .code128])
        guard case let .failure(error) = BarcodeSymbology.list("qr,datamatrix") else { Issue.record("ZBar has no Data Matrix decoder"); return }
        #expect(error.description.contains("ZBar") && error.description.contains("datamatrix"), "\(error)")
    }
}
