import Foundation
import Testing

extension IntegrationTests {
    /// Auto-framing (proto-docs/detection.md, "Auto-framing") from a real agent: the NASA
    /// portrait glides across a synthetic 1280x720 camera's frame and back, its face found by
    /// the detection thread, and the crop that follows it is in the take's metadata for every
    /// change, never faster than its limit, holding the face.
    @Suite struct FramingTests {
        @Test func aMovingFace_isFollowedWithinTheLimits_andTheCropIsInTheTake() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            let agent = try fleet.startAgent(
                "frame", synthetic: 1, fps: 15,
                extra: [
                    "--synthetic-format", "1280x720:NV12", "--synthetic-overlay",
                    "image:\(SecondLaneIntegrationTests.DetectionTests.portrait)@0.05,0.25,0.3,0.6,60",
                ])
            try await fleet.waitUntil("the clock locks", seconds: 30) { agent.log.contains("clock.state=locked") }
            let device = try #require(try fleet.json(["devices"]).compactMap { $0["device_id"] as? String }.first)
            try fleet.grantConsent(device)

            let refused = try fleet.cli(["detect", device, "--framing"])
            #expect(refused.status != 0 && refused.error.contains("capfleet lock"), "framing needs the lease: \(refused.error)")
            #expect(try fleet.cli(["lock", device]).status == 0)
            let badSpeed = try fleet.cli(["detect", device, "--framing", "--speed", "0"])
            #expect(badSpeed.status != 0 && badSpeed.error.contains("--speed"), "\(badSpeed.error)")
            let set = try fleet.jsonObject(["detect", device, "--framing", "--speed", "0.5", "--hold", "0.6"])
            #expect(set["faces"] as? Bool == true, "framing follows faces: \(set)")
            let framing = try #require(set["framing"] as? [String: Any], "\(set)")
            #expect(framing["maximum_speed"] as? Double == 0.5 && framing["hold_seconds"] as? Double == 0.6, "\(framing)")

            let take = try SecondLaneIntegrationTests.RecordingTests.start([device], in: fleet, store: "agent")
            try await Task.sleep(for: .seconds(10))
            #expect(try fleet.cli(["record", "stop", take], timeout: 30).status == 0)
            let shown = try SecondLaneIntegrationTests.RecordingTests.show(take, in: fleet)
            let paths = try #require(shown["segments"] as? [[String: Any]]).compactMap { $0["path"] as? String }
            struct Crop { var ms: Double; var x, y, w, h: Double }
            let crops: [Crop] = try SecondLaneIntegrationTests.RecordingTests.metadataTrack(in: paths).compactMap { entry in
                guard let object = try JSONSerialization.jsonObject(with: Data(entry.json.utf8)) as? [String: Any],
                    object["kind"] as? String == "framing", let crop = object["crop"] as? [Double], crop.count == 4
                else { return nil }
                return Crop(ms: entry.milliseconds, x: crop[0], y: crop[1], w: crop[2], h: crop[3])
            }
            try #require(crops.count > 10, "the crop changes as the face moves: \(crops.count) framing entries")
            #expect(crops.contains { $0.w < 0.99 }, "it zooms in on the face")
            #expect(crops.allSatisfy { $0.x >= 0 && $0.y >= 0 && $0.x + $0.w <= 1.0001 && $0.y + $0.h <= 1.0001 && $0.w >= 0.4999 })
            // Never faster than 0.5 frame widths a second (Matroska's millisecond times: a frame's slack).
            for (before, after) in zip(crops, crops.dropFirst()) where after.ms > before.ms {
                let seconds = (after.ms - before.ms) / 1000 + 0.002
                let moved = abs((after.x + after.w / 2) - (before.x + before.w / 2))
                #expect(moved <= 0.5 * seconds + 0.001, "moved \(moved) in \(seconds) s")
            }
            let centres = crops.map { $0.x + $0.w / 2 }
            #expect((centres.max() ?? 0) - (centres.min() ?? 0) > 0.2, "the crop travels with the face: \(centres.min() ?? 0)…\(centres.max() ?? 0)")

            // The detections track has the faces: from 2 s on, the crop holds each face's centre.
            let faces: [(ms: Double, x: Double, y: Double)] = try SecondLaneIntegrationTests.RecordingTests.metadataTrack(in: paths, track: 1).flatMap
            { entry in
                guard let object = try JSONSerialization.jsonObject(with: Data(entry.json.utf8)) as? [String: Any],
                    let objects = object["objects"] as? [[String: Any]]
                else { return [(ms: Double, x: Double, y: Double)]() }
                return objects.compactMap { item in
                    guard item["kind"] as? String == "face", let b = item["bounds"] as? [Double], b.count == 4 else { return nil }
                    return (entry.milliseconds, b[0] + b[2] / 2, b[1] + b[3] / 2)
                }
            }
            let judged = faces.filter { $0.ms > 2000 }
            try #require(judged.count > 10, "faces found through the take: \(faces.count)")
            let held = judged.filter { face in
                guard let crop = crops.last(where: { $0.ms <= face.ms + 1 }) else { return false }
                return face.x >= crop.x && face.x <= crop.x + crop.w && face.y >= crop.y && face.y <= crop.y + crop.h
            }
            #expect(Double(held.count) >= 0.9 * Double(judged.count), "\(held.count) of \(judged.count) faces inside the crop")

            // Reframed on export as it was framed live: every frame cut to the crop in force at
            // it, at one size. The last frame matches the source cut to the last crop, and is
            // far from the source cut to a crop centred elsewhere.
            let exportDirectory = fleet.directory + "/framed-export"
            let exported = try fleet.cli(
                ["recordings", "export", take, "--to", exportDirectory, "--framed", "--framed-size", "640x360"], timeout: 120)
            #expect(exported.status == 0, "\(exported.output)\(exported.error)")
            let segment = try #require((shown["segments"] as? [[String: Any]])?.first)
            let segmentFile = ((segment["path"] as? String ?? "") as NSString).lastPathComponent
            let reframed = exportDirectory + "/framed/" + segmentFile
            let probed = String(
                decoding: try SecondLaneIntegrationTests.PreviewTests.run(
                    "/usr/bin/ffprobe",
                    [
                        "-v", "error", "-count_frames", "-select_streams", "v:0", "-show_entries", "stream=width,height,nb_read_frames", "-of",
                        "csv=p=0", reframed,
                    ]),
                as: UTF8.self
            ).trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(probed == "640,360,\(segment["frames"] as? Int ?? -1)", "every frame reframed, at the size asked: \(probed)")
            func grey(_ path: String, filter: String) throws -> [UInt8] {
                [UInt8](
                    try SecondLaneIntegrationTests.PreviewTests.run(
                        "/usr/bin/ffmpeg",
                        ["-nostdin", "-v", "error", "-i", path, "-vf", filter + "format=gray", "-fps_mode", "passthrough", "-f", "rawvideo", "-"]))
            }
            func psnr(_ a: ArraySlice<UInt8>, _ b: ArraySlice<UInt8>) -> Double {
                let squared = zip(a, b).reduce(0.0) { $0 + pow(Double($1.0) - Double($1.1), 2) } / Double(max(a.count, 1))
                return squared == 0 ? 99 : 10 * log10(255 * 255 / squared)
            }
            let frameBytes = 640 * 360
            let framedFrames = try grey(reframed, filter: "")
            let last = framedFrames.suffix(frameBytes)
            let lastCrop = try #require(crops.last)
            let elsewhere = try #require(
                crops.max { abs(($0.x + $0.w / 2) - (lastCrop.x + lastCrop.w / 2)) < abs(($1.x + $1.w / 2) - (lastCrop.x + lastCrop.w / 2)) })
            // Cut first, then scaled (the export scales, then cuts): the two land up to a pixel
            // apart, which costs some decibels but nothing like another crop's.
            func cut(_ crop: Crop) -> String { "crop=iw*\(crop.w):ih*\(crop.h):iw*\(crop.x):ih*\(crop.y):exact=1,scale=640:360," }
            let source = exportDirectory + "/" + device + "/" + segmentFile
            let right = psnr(last, try grey(source, filter: cut(lastCrop)).suffix(frameBytes))
            let wrong = psnr(last, try grey(source, filter: cut(elsewhere)).suffix(frameBytes))
            print(
                "framing: reframed export's last frame against the source cut to its crop \(String(format: "%.1f", right)) dB, to a crop elsewhere \(String(format: "%.1f", wrong)) dB"
            )
            #expect(
                right >= 22 && right > wrong + 10,
                "right crop \(right) dB (\(lastCrop)), wrong crop \(wrong) dB (\(elsewhere)); the last crops \(crops.suffix(4)); \(framedFrames.count / frameBytes) frames reframed"
            )

            // The preview shows the whole sensor with the crop drawn on it, in amber.
            let preview = fleet.directory + "/framed-preview.jpg"
            let amber =
                "import sys\nfrom PIL import Image\nimage = Image.open(sys.argv[1]).convert('RGB')\nprint(sum(1 for r, g, b in image.getdata() if r > 225 and 140 < g < 230 and b < 90))"
            var amberPixels = 0
            for _ in 0..<10 where amberPixels <= 200 {
                if try fleet.cli(["snapshot", device, "--preview", "-o", preview], timeout: 15).status == 0 {
                    let counted = String(
                        decoding: try SecondLaneIntegrationTests.PreviewTests.run("/usr/bin/python3", ["-c", amber, preview]), as: UTF8.self)
                    amberPixels = Int(counted.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
                }
                if amberPixels <= 200 { try await Task.sleep(for: .seconds(1)) }
            }
            #expect(amberPixels > 200, "the crop's outline: \(amberPixels) amber pixels")
        }

        /// The fleet's policy frames every camera, and refuses an operator's framing.
        @Test func thePolicy_framesEveryCamera_andOperatorsCannotOverrideIt() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator(environment: ["CAPFLEET_FRAMING_CONTROL": "policy", "CAPFLEET_FRAMING_POLICY": "on"])
            let agent = try fleet.startAgent("policy", synthetic: 1, fps: 15, extra: ["--synthetic-format", "1280x720:NV12"])
            try await fleet.waitUntil("the clock locks", seconds: 30) { agent.log.contains("clock.state=locked") }
            let device = try #require(try fleet.json(["devices"]).compactMap { $0["device_id"] as? String }.first)
            try await fleet.waitUntil("the policy's framing is the camera's", seconds: 15) {
                let shown = try fleet.jsonObject(["device", device])
                return ((shown["detection"] as? [String: Any])?["framing"] as? [String: Any]) != nil
            }
            #expect(try fleet.cli(["lock", device]).status == 0)
            let refused = try fleet.cli(["detect", device, "--framing"])
            #expect(refused.status != 0 && refused.error.contains("framing_control = policy"), "\(refused.error)")
            let codes = try fleet.jsonObject(["detect", device, "--codes", "qr"])
            #expect(codes["codes"] as? [String] == ["qr"] && codes["framing"] != nil, "codes taken, framed by the policy: \(codes)")
        }

        /// Framing with the camera's own optics (detection.md, "Framing with the camera's optics"):
        /// the synthetic camera's zoom, pan and tilt follow the portrait gliding across a 640x480
        /// scene (too narrow for a crop), so what the camera saw is the framed view: the face the
        /// detector found in those frames is larger than in the whole view and near their middle.
        /// Every frame says where in the whole view it is; an operator's zoom and pan are refused
        /// meanwhile; stopping framing brings the camera back to its whole view.
        @Test func theCamerasOwnZoomAndPan_frameTheFace_andItsFramesShowOnlyTheFramedView() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            let agent = try fleet.startAgent(
                "optics", synthetic: 1, fps: 15,
                extra: ["--synthetic-overlay", "image:\(SecondLaneIntegrationTests.DetectionTests.portrait)@0.05,0.25,0.3,0.6,90"])
            try await fleet.waitUntil("the clock locks", seconds: 30) { agent.log.contains("clock.state=locked") }
            let device = try #require(try fleet.json(["devices"]).compactMap { $0["device_id"] as? String }.first)
            try fleet.grantConsent(device)
            #expect(try fleet.cli(["lock", device]).status == 0)
            let set = try fleet.jsonObject(["detect", device, "--framing", "--optics", "--hold", "0.4"])
            #expect((set["framing"] as? [String: Any])?["by"] as? String == "optics", "\(set)")
            func zoom() throws -> Double { (try fleet.jsonObject(["device", device])["device"] as? [String: Any])?["zoom_factor"] as? Double ?? 0 }
            try await fleet.waitUntil("the camera zooms in on the face", seconds: 20) { try zoom() > 1.5 }
            let zoomRefused = try fleet.cli(["zoom", device, "3"])
            #expect(zoomRefused.status != 0 && zoomRefused.error.contains("auto-framing steers it"), "\(zoomRefused.error)")
            let panRefused = try fleet.cli(["control", device, "pan_absolute", "0"])
            #expect(panRefused.status != 0 && panRefused.error.contains("auto-framing steers it"), "\(panRefused.error)")

            let take = try SecondLaneIntegrationTests.RecordingTests.start([device], in: fleet, store: "agent")
            try await Task.sleep(for: .seconds(10))
            #expect(try fleet.cli(["record", "stop", take], timeout: 30).status == 0)
            let shown = try SecondLaneIntegrationTests.RecordingTests.show(take, in: fleet)
            let paths = try #require(shown["segments"] as? [[String: Any]]).compactMap { $0["path"] as? String }
            struct View { var ms: Double; var x, y, w: Double }
            let views: [View] = try SecondLaneIntegrationTests.RecordingTests.metadataTrack(in: paths).compactMap { entry in
                guard let object = try JSONSerialization.jsonObject(with: Data(entry.json.utf8)) as? [String: Any],
                    object["kind"] as? String == "framing", let crop = object["crop"] as? [Double], crop.count == 4
                else { return nil }
                #expect(object["optical"] as? Bool == true, "framed by the optics: \(entry.json)")
                return View(ms: entry.milliseconds, x: crop[0], y: crop[1], w: crop[2])
            }
            try #require(views.count > 10, "the view moves with the face: \(views.count) framing entries")
            let centres = views.map { $0.x + $0.w / 2 }
            #expect((centres.max() ?? 0) - (centres.min() ?? 0) > 0.15, "the camera pans with the face: \(centres.min() ?? 0)…\(centres.max() ?? 0)")
            #expect(views.allSatisfy { $0.w >= 0.4999 && $0.x >= 0 && $0.x + $0.w <= 1.0001 }, "no closer than --min-crop allows, inside the view")

            // What the camera saw: faces in the frames' own coordinates. The portrait's face is
            // under a sixth of the whole view's height; framed, it is larger and near the middle.
            let faces: [(x: Double, h: Double)] = try SecondLaneIntegrationTests.RecordingTests.metadataTrack(in: paths, track: 1).flatMap { entry in
                guard let object = try JSONSerialization.jsonObject(with: Data(entry.json.utf8)) as? [String: Any],
                    let objects = object["objects"] as? [[String: Any]]
                else { return [(x: Double, h: Double)]() }
                return objects.compactMap { item in
                    guard item["kind"] as? String == "face", let b = item["bounds"] as? [Double], b.count == 4 else { return nil }
                    return (b[0] + b[2] / 2, b[3])
                }
            }
            try #require(faces.count > 10, "faces found through the take: \(faces.count)")
            let whole = try await Self.faceHeightInTheWholeView(fleet, device)
            let larger = faces.filter { $0.h > 1.5 * whole }.count, middle = faces.filter { abs($0.x - 0.5) < 0.3 }.count
            print(
                "framing by optics: \(faces.count) faces, \(larger) over 1.5x their unframed height \(whole), \(middle) in the middle; views \(views.count)"
            )
            #expect(Double(larger) >= 0.8 * Double(faces.count), "zoomed in on: \(faces.map(\.h))")
            #expect(Double(middle) >= 0.8 * Double(faces.count), "kept near the middle: \(faces.map(\.x))")
        }

        /// Turns framing off (the camera goes back to its whole view, zoom 1) and reads the face's
        /// height there from the detection reports.
        static func faceHeightInTheWholeView(_ fleet: FleetHarness, _ device: String) async throws -> Double {
            #expect(try fleet.cli(["detect", device, "--faces"]).status == 0)
            try await fleet.waitUntil("the camera goes back to its whole view", seconds: 15) {
                (try fleet.jsonObject(["device", device])["device"] as? [String: Any])?["zoom_factor"] as? Double == 1
            }
            try await Task.sleep(for: .seconds(1))
            let reports = try fleet.cli(["metadata", device, "--count", "3", "--json"], timeout: 20)
            let heights = reports.output.split(separator: "\n").compactMap { line -> Double? in
                guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                    let face = (object["objects"] as? [[String: Any]])?.first(where: { $0["kind"] as? String == "face" }),
                    let bounds = face["bounds"] as? [Double], bounds.count == 4
                else { return nil }
                return bounds[3]
            }
            let height = try #require(heights.max(), "faces in the whole view: \(reports.output)\(reports.error)")
            #expect(height < 0.3, "the portrait's face in the whole view: \(height)")
            return height
        }
    }
}
