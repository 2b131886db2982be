import FleetCore
import Foundation
import Testing

@Suite struct ConsentRulesTests {
    @Test func operatorsGrantDenyAndRevoke_onlyAdminsRestrictOrLiftARestriction() {
        #expect(ConsentRules.apply(.grant, to: .notDetermined, by: .operator, reason: "signed") == .success(.authorized))
        #expect(ConsentRules.apply(.deny, to: .authorized, by: .operator, reason: "closed set") == .success(.denied))
        #expect(ConsentRules.apply(.revoke, to: .authorized, by: .operator, reason: "withdrawn") == .success(.denied))
        #expect(ConsentRules.apply(.restrict, to: .authorized, by: .admin, reason: "policy") == .success(.restricted))
        #expect(ConsentRules.apply(.grant, to: .restricted, by: .admin, reason: "policy lifted") == .success(.authorized))
        guard case let .failure(restrict) = ConsentRules.apply(.restrict, to: .denied, by: .operator, reason: "policy"),
            case let .failure(lift) = ConsentRules.apply(.grant, to: .restricted, by: .operator, reason: "please"),
            case let .failure(denyRestricted) = ConsentRules.apply(.deny, to: .restricted, by: .operator, reason: "x")
        else {
            Issue.record("operators cannot touch restrictions")
            return
        }
        #expect(restrict.neededRole == .admin && lift.neededRole == .admin && denyRestricted.neededRole == .admin)
    }

    @Test func revokeNeedsAGrant_andEveryChangeNeedsAReason() {
        guard case let .failure(nothing) = ConsentRules.apply(.revoke, to: .notDetermined, by: .admin, reason: "x") else {
            Issue.record("revoking what was never granted is refused")
            return
        }
        #expect(nothing.description.contains("no consent to revoke") && nothing.neededRole == nil)
        guard case let .failure(silent) = ConsentRules.apply(.grant, to: .notDetermined, by: .admin, reason: "  ") else {
            Issue.record("a change without a reason is refused")
            return
        }
        #expect(silent.description.contains("--reason"))
        #expect(ConsentState.allCases.filter(\.allowsRealFrames) == [.authorized])
    }
}

@Suite struct BlackFrameTests {
    @Test func rawFormats_areBlackInTheirOwnLayout() throws {
        let yuyv = try #require(BlackFrame.payload(pixelFormat: .yuyv, width: 6, height: 2))
        #expect(yuyv == Array([16, 128, 16, 128].repeated(6)))
        let uyvy = try #require(BlackFrame.payload(pixelFormat: PixelFormat("UYVY"), width: 2, height: 1))
        #expect(uyvy == [128, 16, 128, 16])
        let nv12 = try #require(BlackFrame.payload(pixelFormat: .nv12, width: 4, height: 2))
        #expect(nv12 == [UInt8](repeating: 16, count: 8) + [UInt8](repeating: 128, count: 4))
        #expect(BlackFrame.payload(pixelFormat: .grey, width: 3, height: 3) == [UInt8](repeating: 0, count: 9))
        #expect(BlackFrame.payload(pixelFormat: PixelFormat("H264"), width: 640, height: 480) == nil, "no black H.264: withheld instead")
    }

    /// libjpeg (djpeg) decodes the black JPEG to the right size with every pixel black.
    @Test(arguments: [(640, 480), (1920, 1080), (17, 9), (1, 1)])
    func mjpeg_decodesToBlackOfTheRightSize(size: (Int, Int)) throws {
        let jpeg = BlackJPEG.encode(width: size.0, height: size.1)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("capfleet-jpeg-\(UUID().uuidString.prefix(6))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let input = directory.appendingPathComponent("black.jpg")
        try Data(jpeg).write(to: input)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/djpeg")
        process.arguments = ["-pnm", input.path]
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let decoded = [UInt8](out.fileHandleForReading.readDataToEndOfFile())
        let warnings = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0 && warnings.isEmpty, "djpeg: \(warnings)")
        // P6 header: "P6\n<w> <h>\n255\n", then RGB triples.
        let header = "P6\n\(size.0) \(size.1)\n255\n"
        #expect(decoded.starts(with: Array(header.utf8)), "\(String(decoding: decoded.prefix(20), as: UTF8.self))")
        let pixels = decoded.dropFirst(header.utf8.count)
        #expect(pixels.count == size.0 * size.1 * 3 && pixels.allSatisfy { $0 == 0 })
    }
}

extension Array {
    fileprivate func repeated(_ times: Int) -> [Element] { (0..<times).flatMap { _ in self } }
}
