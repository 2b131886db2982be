import FleetCapture
import FleetCore
import Foundation
import Testing

extension IntegrationTests {
    /// Cameras deeper than 8 bits through the whole fleet (frames.md, "Colour and depth";
    /// recordings.md, "Deeper pixels"): the synthetic camera's 12-bit and depth formats listed
    /// with their colour and unit, recorded by their agents in FFV1 at full depth, said so in the
    /// index and the files, and a depth still as 16-bit PNG with its unit in the sidecar.
    @Suite(.serialized) struct DeepPixelTakeTests {
        @Test func deepAndDepthCameras_areRecordedAtTheirDepth_andSaySo() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            let devices = try await SecondLaneIntegrationTests.RecordingTests.devices(in: fleet, agents: ["deep1", "deep2"], fps: 10)
            let (grey, depth) = (devices[0], devices[1])

            let formats = try fleet.json(["formats", grey])
            let y12 = try #require(formats.first { $0["pixel_format"] as? String == "Y12" }, "\(formats)")
            #expect(y12["bit_depth"] as? Int == 12)
            let colour = try #require(y12["colour"] as? [String: Any], "\(y12)")
            #expect(colour["transfer"] as? String == "linear" && colour["range"] as? String == "full", "\(colour)")
            let p010 = try #require(formats.first { $0["pixel_format"] as? String == "P010" })
            #expect((p010["colour"] as? [String: Any])?["transfer"] as? String == "hlg", "\(p010)")
            let z16 = try #require(formats.first { $0["pixel_format"] as? String == "Z16" })
            #expect(z16["depth_unit_metres"] as? Double == 0.001 && z16["bit_depth"] as? Int == 16, "\(z16)")
            let table = try fleet.cli(["formats", grey])
            #expect(table.output.contains("BT.2020 HLG limited") && table.output.contains("depth, 1 mm a unit"), "\(table.output)")

            _ = try fleet.json(["lock", grey])
            _ = try fleet.json(["lock", depth])
            let toY12 = try fleet.json(["format", grey, "--size", "1280x720", "--pixel-format", "Y12"])
            #expect((toY12.first?["active_format"] as? [String: Any])?["pixel_format"] as? String == "Y12", "\(toY12)")
            let toZ16 = try fleet.json(["format", depth, "--size", "640x480", "--pixel-format", "Z16"])
            #expect((toZ16.first?["active_format"] as? [String: Any])?["pixel_format"] as? String == "Z16", "\(toZ16)")

            // Raw (the default) cannot hold them, nor a lossy codec depth: refused up front, saying what to do.
            let raw = try fleet.cli(["record", "start", grey], timeout: 15)
            #expect(raw.status != 0 && raw.error.contains("--codec ffv1"), "\(raw.error)")
            let lossyDepth = try fleet.cli(["record", "start", grey, depth, "--codec", "hevc"], timeout: 15)
            #expect(lossyDepth.status != 0 && lossyDepth.error.contains("--codec-for \(depth)=ffv1"), "\(lossyDepth.error)")
            let started = try fleet.cli(["record", "start", grey, depth, "--store", "agent", "--codec", "ffv1", "--json"], timeout: 15)
            #expect(started.status == 0, "\(started.output)\(started.error)")
            let take = try #require(try JSONSerialization.jsonObject(with: Data(started.output.utf8)) as? [String: Any])
            let takeID = try #require(take["id"] as? String)
            try await Task.sleep(for: .seconds(4))
            #expect(try fleet.cli(["record", "stop", takeID], timeout: 30).status == 0)

            let shown = try SecondLaneIntegrationTests.RecordingTests.show(takeID, in: fleet)
            let parts = try #require(shown["devices"] as? [[String: Any]])
            let greyPart = try #require(parts.first { $0["device_id"] as? String == grey })
            let depthPart = try #require(parts.first { $0["device_id"] as? String == depth })
            #expect(greyPart["bit_depth"] as? Int == 12 && greyPart["source_format"] as? String == "Y12", "\(greyPart)")
            #expect((greyPart["colour"] as? [String: Any])?["transfer"] as? String == "linear", "\(greyPart)")
            #expect(depthPart["bit_depth"] as? Int == 16 && depthPart["depth_unit_metres"] as? Double == 0.001, "\(depthPart)")
            #expect((greyPart["frames"] as? Int ?? 0) >= 20 && (depthPart["frames"] as? Int ?? 0) >= 20, "about 4 s at 10 fps: \(parts)")
            let text = try fleet.cli(["recordings", "show", takeID])
            #expect(text.output.contains("(ffv1 from Y12), 12-bit"), "\(text.output)")
            #expect(text.output.contains("depth 1 mm"), "\(text.output)")

            let segments = try #require(shown["segments"] as? [[String: Any]])
            for segment in segments {
                let path = try #require(segment["path"] as? String)
                let device = segment["device_id"] as? String
                let stream = try Self.probe(path, "stream=pix_fmt:stream_tags=BIT_DEPTH,DEPTH_UNIT_METRES")
                if device == grey {
                    #expect(stream.contains("pix_fmt=gray12le") && stream.contains("BIT_DEPTH=12"), "\(stream)")
                } else {
                    #expect(stream.contains("pix_fmt=gray16le") && stream.contains("DEPTH_UNIT_METRES=0.001"), "\(stream)")
                    // The known scene comes back in millimetres: row 100, away from the stamp and the box, is 1.2 m away.
                    let first = try Self.firstFrameWords(path)
                    #expect(first.count == 640 * 480 && first[100 * 640 + 600] == 1200 && first[479 * 640 + 600] == 1958, "depth values")
                }
            }
            #expect(try fleet.cli(["recordings", "verify", takeID], timeout: 60).status == 0)

            // A depth still: 16-bit PNG of the distances, the unit in its sidecar.
            let output = fleet.directory + "/depth-still"
            let still = try fleet.cli(["still", depth, "--size", "streaming", "-o", output, "--json"], timeout: 60)
            #expect(still.status == 0, "\(still.output)\(still.error)")
            let sidecar = try SecondLaneIntegrationTests.StillTests.sidecar(output + "/\(depth)-1.json")
            #expect(sidecar["bits_per_sample"] as? Int == 16, "\(sidecar)")
            let stillFormat = try #require(sidecar["format"] as? [String: Any])
            #expect(stillFormat["depth_unit_metres"] as? Double == 0.001 && stillFormat["pixel_format"] as? String == "Z16", "\(stillFormat)")
            let script = "import sys\nfrom PIL import Image\nimage = Image.open(sys.argv[1])\nprint(image.mode, image.getpixel((600, 100)))"
            let pixel = String(
                decoding: try SecondLaneIntegrationTests.PreviewTests.run("/usr/bin/python3", ["-c", script, output + "/\(depth)-1.png"]),
                as: UTF8.self)
            #expect(pixel.trimmingCharacters(in: .whitespacesAndNewlines).hasSuffix(" 1200"), "the still's sample is the distance in mm: \(pixel)")
        }

        static func probe(_ path: String, _ entries: String) throws -> String {
            String(
                decoding: try SecondLaneIntegrationTests.PreviewTests.run(
                    "/usr/bin/ffprobe", ["-v", "error", "-select_streams", "v:0", "-show_entries", entries, "-of", "default=nw=1", path]),
                as: UTF8.self)
        }

        static func firstFrameWords(_ path: String) throws -> [UInt16] {
            let data = try SecondLaneIntegrationTests.PreviewTests.run(
                "/usr/bin/ffmpeg", ["-v", "error", "-i", path, "-map", "0:v", "-frames:v", "1", "-f", "rawvideo", "-pix_fmt", "gray16le", "-"])
            return data.withUnsafeBytes { raw in (0..<raw.count / 2).map { UInt16(raw[$0 * 2]) | UInt16(raw[$0 * 2 + 1]) << 8 } }
        }
    }
}
