import FleetBus
import FleetCore
import FleetProtocol
import Foundation
import Testing

extension SecondLaneIntegrationTests {
    /// Previews, snapshots as pictures and the contact sheet, from a real coordinator and agent,
    /// read back with standard decoders: djpeg (libjpeg-turbo-progs) and Python's PIL.
    @Suite struct PreviewTests {
        /// A decoded picture: width, height, RGB bytes.
        struct Picture {
            let width: Int
            let height: Int
            let rgb: [UInt8]

            func pixel(_ x: Int, _ y: Int) -> (Int, Int, Int) {
                let index = (y * width + x) * 3
                return (Int(rgb[index]), Int(rgb[index + 1]), Int(rgb[index + 2]))
            }

            /// Every pixel within `tolerance` of black.
            func isBlack(tolerance: Int = 8) -> Bool { rgb.allSatisfy { Int($0) <= tolerance } }

            /// The frame number the synthetic camera burned in, read from the picture's green
            /// channel (its stamp is white or black, so every channel says it).
            var stampedFrameNumber: UInt32? {
                var grey = stride(from: 1, to: rgb.count, by: 3).map { rgb[$0] }
                return grey.withUnsafeMutableBytes { bytes in
                    LumaPlane(base: bytes.baseAddress!, pixelFormat: .grey, width: width, height: height).flatMap(FrameNumberStamp.read)
                }
            }
        }

        static func run(_ executable: String, _ arguments: [String]) throws -> Data {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = arguments
            let output = Pipe(), errors = Pipe()
            process.standardOutput = output
            process.standardError = errors
            try process.run()
            let data = output.fileHandleForReading.readDataToEndOfFile()
            let problem = errors.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            guard process.terminationStatus == 0 else {
                throw HarnessError("\(executable) \(arguments.joined(separator: " ")) failed: \(String(decoding: problem, as: UTF8.self))")
            }
            return data
        }

        /// djpeg's decoding of a JPEG file (as binary PPM).
        static func djpeg(_ path: String) throws -> Picture {
            try ppm(run("/usr/bin/djpeg", ["-pnm", path]))
        }

        /// PIL's decoding of any picture file; `verify` first checks the file's structure (a
        /// PNG's chunk CRCs included).
        static func pil(_ path: String) throws -> Picture {
            let script = """
                import sys
                from PIL import Image
                Image.open(sys.argv[1]).verify()
                image = Image.open(sys.argv[1]).convert("RGB")
                sys.stdout.buffer.write(b"P6\\n%d %d\\n255\\n" % image.size + image.tobytes())
                """
            return try ppm(run("/usr/bin/python3", ["-c", script, path]))
        }

        /// A binary PPM: "P6", width, height, 255, then the pixels.
        static func ppm(_ data: Data) throws -> Picture {
            let bytes = [UInt8](data)
            var fields: [String] = [], index = 0
            while fields.count < 4, index < bytes.count {
                while index < bytes.count, bytes[index] == 0x20 || bytes[index] == 0x0A { index += 1 }
                let start = index
                while index < bytes.count, bytes[index] != 0x20 && bytes[index] != 0x0A { index += 1 }
                fields.append(String(decoding: bytes[start..<index], as: UTF8.self))
            }
            index += 1
            guard fields.count == 4, fields[0] == "P6", let width = Int(fields[1]), let height = Int(fields[2]),
                bytes.count - index == width * height * 3
            else { throw HarnessError("not a binary PPM: \(fields)") }
            return Picture(width: width, height: height, rgb: Array(bytes[index...]))
        }

        @Test func previews_comeOnceASecond_blackUntilConsent_snapshotsAndTheContactSheetDecode_withTheFrameNumberInThePixels() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            try fleet.startAgent("studio", synthetic: 2, fps: 15)
            try await fleet.waitUntil("both cameras send previews", seconds: 30) {
                let stats = try fleet.deviceStats()
                return stats.count == 2 && stats.values.allSatisfy { ($0["previews_received"] as? Int ?? 0) >= 1 }
            }
            let devices = try fleet.json(["devices"]).compactMap { $0["device_id"] as? String }.sorted()
            let (granted, withheld) = (devices[0], devices[1])

            // About one a second, counted apart: every frame counted is a full 640x480 YUYV one.
            let before = try #require(try fleet.deviceStats()[granted])
            let started = Date()
            try await Task.sleep(for: .seconds(8))
            let after = try #require(try fleet.deviceStats()[granted])
            let rate =
                Double((after["previews_received"] as? Int ?? 0) - (before["previews_received"] as? Int ?? 0)) / Date().timeIntervalSince(started)
            print("previews a second: \(rate) (telemetry says \(after["previews_per_second"] ?? "nothing"))")
            #expect(rate > 0.75 && rate < 1.3, "previews a second: \(rate)")
            let perSecond = after["previews_per_second"] as? Double ?? 0
            #expect(perSecond > 0.6 && perSecond < 1.4, "previews_per_second: \(perSecond)")
            let frames = after["frames_received"] as? Int ?? 0
            #expect(after["bytes_received"] as? Int == frames * 640 * 480 * 2, "previews are not counted as frames")
            let rejections = try fleet.cli(["rejections"]).output
            #expect(rejections.contains("no input has been rejected"), "\(rejections)\n\(fleet.logLines(containing: "reject"))")

            // Before consent: the preview is a black JPEG of 320x240, flagged and labelled.
            let blackPath = fleet.directory + "/black-preview.jpg"
            let blackInfo = try fleet.jsonObject(["snapshot", granted, "--preview", "-o", blackPath])
            #expect(
                blackInfo["preview"] as? Bool == true && blackInfo["black"] as? Bool == true && blackInfo["pixel_format"] as? String == "JPEG",
                "\(blackInfo)")
            #expect((blackInfo["preview_age_ms"] as? Int ?? 10_000) < 2500)
            let black = try Self.djpeg(blackPath)
            #expect(black.width == 320 && black.height == 240)
            #expect(black.isBlack(), "no pixel of a device without consent")

            // After the grant: the next previews are real, within a couple of seconds.
            try fleet.grantConsent(granted)
            let realPath = fleet.directory + "/preview.jpg"
            try await fleet.waitUntil("a real preview", seconds: 5) {
                try fleet.jsonObject(["snapshot", granted, "--preview", "-o", realPath])["black"] as? Bool == false
            }
            #expect(try fleet.jsonObject(["snapshot", withheld, "--preview"])["black"] as? Bool == true, "consent is per camera")
            let real = try Self.djpeg(realPath)
            #expect(real.width == 320 && real.height == 240)
            #expect(!real.isBlack(tolerance: 40) && Set(real.rgb).count > 32, "a test pattern, not a flat picture")

            // Full resolution as JPEG and PNG: the burned-in frame number reads back as the header's sequence.
            for (name, decode) in [("x.jpg", Self.djpeg), ("x.png", Self.pil)] {
                let path = fleet.directory + "/" + name
                let info = try fleet.jsonObject(["snapshot", granted, "-o", path])
                let picture = try decode(path)
                #expect(picture.width == 640 && picture.height == 480, "\(name)")
                let sequence = try #require(info["sequence"] as? Int)
                #expect(
                    picture.stampedFrameNumber.map(Int.init) == sequence,
                    "\(name): frame \(sequence) reads as \(picture.stampedFrameNumber.map(String.init) ?? "no stamp")")
            }
            let rawPath = fleet.directory + "/x.raw"
            #expect(try fleet.cli(["snapshot", granted, "-o", rawPath]).status == 0)
            #expect((try FileManager.default.attributesOfItem(atPath: rawPath)[.size] as? Int) == 640 * 480 * 2)
            let unknown = try fleet.cli(["snapshot", granted, "-o", fleet.directory + "/x.gif"])
            #expect(unknown.status != 0 && unknown.error.contains(".jpg or .png"), "\(unknown.error)")

            // The contact sheet: one tile per camera, the granted one real, the other black.
            try await Task.sleep(for: .seconds(1.5))
            let sheetPath = fleet.directory + "/sheet.png"
            let layout = try fleet.jsonObject(["contact-sheet", "-o", sheetPath])
            let sheet = try Self.pil(sheetPath)
            #expect(sheet.width == layout["width"] as? Int && sheet.height == layout["height"] as? Int)
            #expect(layout["columns"] as? Int == 2 && layout["rows"] as? Int == 1, "\(layout)")
            let tiles = try #require(layout["tiles"] as? [[String: Any]])
            #expect(tiles.compactMap { $0["device_id"] as? String } == devices)
            for tile in tiles {
                let x = try #require(tile["x"] as? Int), y = try #require(tile["y"] as? Int)
                var distinct = Set<Int>(), brightest = 0
                for py in stride(from: y + 10, to: y + 230, by: 3) {
                    for px in stride(from: x + 10, to: x + 310, by: 3) {
                        let (r, g, b) = sheet.pixel(px, py)
                        distinct.insert(r << 16 | g << 8 | b)
                        brightest = max(brightest, r, g, b)
                    }
                }
                if tile["device_id"] as? String == granted {
                    #expect(distinct.count > 16, "the granted camera's tile shows its picture")
                } else {
                    #expect(tile["device_id"] as? String == withheld)
                    #expect(brightest <= 10, "the camera without consent shows black, brightest \(brightest)")
                }
            }
        }

        @Test func previewsFromAnotherPeer_areCheckedLikeFrames_andOnlyASmallJPEGOfARegisteredDeviceIsKept() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            // This agent sends no previews of its own: the only ones come from the socket below.
            let settings = fleet.directory + "/no-previews.conf"
            try "preview = off\n".write(toFile: settings, atomically: true, encoding: .utf8)
            try fleet.startAgent("quiet", extra: ["--config", settings])
            try await fleet.waitUntil("the camera streams", seconds: 20) {
                try fleet.deviceStats().values.contains { ($0["frames_captured"] as? Int ?? 0) > 2 }
            }
            let device = try #require(try fleet.json(["devices"]).first)
            let deviceID = try #require(device["device_id"] as? String), nodeID = try #require(device["node_id"] as? String)
            let none = try fleet.cli(["snapshot", deviceID, "--preview"])
            #expect(none.status != 0 && none.error.contains("has sent no preview"), "\(none.error)")

            func preview(device: String, format: String, width: UInt32, height: UInt32, payload: [UInt8]) throws -> [[UInt8]] {
                let header =
                    try Capfleet_V1_FrameHeader.with {
                        $0.protocolVersion = .current
                        $0.nodeID = nodeID
                        $0.deviceID = device
                        $0.sequence = 777
                        $0.layout = .with {
                            $0.pixelFormat = format; $0.width = width; $0.height = height
                        }
                        $0.payloadSize = UInt64(payload.count)
                        $0.flags = UInt32(Capfleet_V1_FrameFlag.preview.rawValue | Capfleet_V1_FrameFlag.black.rawValue)
                    }.serializedBytes() as [UInt8]
                return [header, payload]
            }
            let context = ZMQContext()
            let push = try fleet.socket(.push, port: fleet.ingestPort, keys: try fleet.agentKeys("quiet"), context: context)
            let jpeg = BlackJPEG.encode(width: 64, height: 48)
            _ = try push.send(
                parts: try preview(device: deviceID, format: "YUYV", width: 64, height: 48, payload: [UInt8](repeating: 16, count: 64 * 48 * 2)))
            _ = try push.send(
                parts: try preview(device: deviceID, format: "JPEG", width: 1024, height: 1024, payload: [UInt8](repeating: 0xFF, count: 2 << 20)))
            _ = try push.send(parts: try preview(device: "no-such-camera", format: "JPEG", width: 64, height: 48, payload: jpeg))
            _ = try push.send(parts: try preview(device: deviceID, format: "JPEG", width: 64, height: 48, payload: jpeg))

            try await fleet.waitUntil("the three bad previews are counted", seconds: 10) {
                let counts = Dictionary(
                    try fleet.json(["rejections"]).map { ("\($0["endpoint"] ?? "") \($0["reason"] ?? "")", $0["count"] as? Int ?? 0) },
                    uniquingKeysWith: +)
                return counts["ingest invalid_format"] == 1 && counts["ingest oversized_claim"] == 1 && counts["ingest unknown_device"] == 1
            }
            let path = fleet.directory + "/kept.jpg"
            let kept = try fleet.jsonObject(["snapshot", deviceID, "--preview", "-o", path])
            #expect(kept["sequence"] as? Int == 777 && kept["width"] as? Int == 64 && kept["black"] as? Bool == true, "\(kept)")
            #expect([UInt8](try Data(contentsOf: URL(fileURLWithPath: path))) == jpeg, "the preview is kept byte for byte")
            let picture = try Self.djpeg(path)
            #expect(picture.width == 64 && picture.height == 48 && picture.isBlack())
            // The fleet's status is made once a second.
            try await fleet.waitUntil("the preview is counted", seconds: 3) { try fleet.deviceStats()[deviceID]?["previews_received"] as? Int == 1 }
            let stats = try #require(try fleet.deviceStats()[deviceID])
            let frames = stats["frames_received"] as? Int ?? 0
            #expect(stats["bytes_received"] as? Int == frames * 640 * 480 * 2, "the preview is not counted as a frame")
        }
    }
}
