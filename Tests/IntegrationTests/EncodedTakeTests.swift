import FleetCapture
import FleetCore
import FleetImaging
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

extension IntegrationTests {
    /// Takes encoded on the camera's host (`record start --codec`): every segment decodes with
    /// Debian's ffmpeg and holds what the index says; FFV1 gives back the very frames the
    /// synthetic camera made; an encoder too slow for its camera drops `encoder_late` without
    /// holding up capture; an agent killed mid-take leaves segments that decode.
    @Suite(.serialized) struct EncodedTakeTests {
        @Test(arguments: [("ffv1", "agent"), ("h264", "agent"), ("hevc", "agent"), ("ffv1", "coordinator"), ("h264", "coordinator")])
        func aTakeInEachCodec_decodesAndHoldsWhatTheIndexSays(codec: String, store: String) async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator(environment: ["CAPFLEET_SEGMENT_SECONDS": "2"])
            let devices = try await SecondLaneIntegrationTests.RecordingTests.devices(in: fleet, agents: ["e1"], fps: 15)
            let started = try fleet.cli(["record", "start"] + devices + ["--store", store, "--codec", codec, "--json"], timeout: 15)
            #expect(started.status == 0, "\(started.output)\(started.error)")
            let take = try #require(try JSONSerialization.jsonObject(with: Data(started.output.utf8)) as? [String: Any])
            #expect(take["codec"] as? String == codec, "\(take)")
            let takeID = try #require(take["id"] as? String)
            try await Task.sleep(for: .seconds(4))
            // Viewers still get raw frames while the take's packets go to the recording.
            let picture = fleet.directory + "/during.png"
            let shot = try fleet.cli(["snapshot", devices[0], "-o", picture], timeout: 15)
            #expect(
                shot.status == 0 && (try? Data(contentsOf: URL(fileURLWithPath: picture)).prefix(4)) == Data([0x89, 0x50, 0x4E, 0x47]),
                "a snapshot during the take is a picture: \(shot.output)\(shot.error)")
            try await Task.sleep(for: .seconds(1))
            #expect(try fleet.cli(["record", "stop", takeID], timeout: 30).status == 0)

            let shown = try SecondLaneIntegrationTests.RecordingTests.show(takeID, in: fleet)
            let part = try #require((shown["devices"] as? [[String: Any]])?.first)
            #expect(part["state"] as? String == "stopped", "\(part)")
            #expect(try SecondLaneIntegrationTests.RecordingTests.lostByTheFleet(part, in: fleet) == 0, "\(part["drops"] ?? "")")
            #expect(part["encoder"] as? String == ["ffv1": "ffv1", "h264": "libx264", "hevc": "libx265"][codec], "\(part)")
            #expect(part["source_format"] as? String == "YUYV", "\(part)")
            #expect((part["format"] as? String)?.hasSuffix(codec.uppercased()) == true, "the part is stored as \(codec): \(part)")
            let frames = try #require(part["frames"] as? Int)
            #expect(frames >= 60, "about 5 s at 15 fps: \(part)")
            let segments = try #require(shown["segments"] as? [[String: Any]])
            #expect(segments.count >= 2, "2 s segments: \(segments.count)")
            #expect(segments.reduce(0) { $0 + ($1["frames"] as? Int ?? 0) } == frames)
            let renderer = TestPatternRenderer(
                format: VideoFormat(
                    pixelFormat: .yuyv, width: 640, height: 480,
                    frameRateRanges: [FrameRateRange(min: 15, max: 15)]))
            for segment in segments {
                let path = try #require(segment["path"] as? String)
                let decoded = try Self.decode(path)
                #expect(decoded.errors.isEmpty, "ffmpeg decodes \(path) without a complaint: \(decoded.errors)")
                #expect(decoded.frames.count == segment["frames"] as? Int, "every frame of \(path) decodes, as many as the index says")
                #expect(try Self.probe(path).hasPrefix(codec == "h264" ? "h264" : codec), "\(path)")
                guard codec == "ffv1", let first = segment["first_sequence"] as? Int else { continue }
                // The synthetic camera's frame N is its pattern drawn with the number N.
                for (offset, frame) in decoded.frames.enumerated() {
                    var expected = renderer
                    var made = [UInt8](repeating: 0, count: renderer.frameBytes)
                    made.withUnsafeMutableBytes { expected.render(frameNumber: UInt32(first + offset), zoom: 1, into: $0.baseAddress!) }
                    guard frame == made else {
                        let differing = zip(frame, made).filter { $0 != $1 }.count
                        Issue.record("frame \(first + offset) of \(path) is not the one the camera made: \(differing) of \(made.count) bytes differ")
                        break
                    }
                }
            }
            #expect(try fleet.cli(["recordings", "verify", takeID], timeout: 60).status == 0)
        }

        /// An encoded pre-roll (recordings.md, "Encoded pre-roll"): the same memory keeps ten
        /// seconds of a camera's frames as H.264 where it keeps under two raw; a take reaching
        /// eight seconds into it starts on the whole fleet second before, its first frame there,
        /// nothing lost, every segment decoding; a take in the same codec taps the pre-roll's
        /// encoder (no second one opens); a take asking the camera for another codec is refused.
        @Test func anEncodedPreRoll_keepsLongerInLessMemory_andATakeReachingIntoItStartsOnAKeyFrame() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator(environment: ["CAPFLEET_SEGMENT_SECONDS": "2"])
            let agent = try fleet.startAgent("r1", fps: 15)
            try await fleet.waitUntil("the clock locks", seconds: 30) { agent.log.contains("clock.state=locked") }
            let camera = try #require(try fleet.json(["devices"]).first?["device_id"] as? String)
            try fleet.grantConsent(camera)
            #expect(try fleet.cli(["lock", camera]).status == 0)
            func kept() throws -> [String: Any] {
                let text = try fleet.cli(["preroll", camera, "--json"]).output
                return (try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[String: Any]])?.first ?? [:]
            }
            // Raw, 16 MiB holds 27 of the camera's 600 kB frames: under two seconds of the ten.
            var set = try fleet.cli(["preroll", camera, "10s", "--budget", "16"])
            #expect(set.status == 0, "\(set.output)\(set.error)")
            try await fleet.waitUntil("the raw pre-roll fills its budget", seconds: 20) { try kept()["kept_frames"] as? Int ?? 0 >= 25 }
            let raw = try kept()
            #expect((raw["kept_ns"] as? Int ?? .max) < 2_000_000_000, "\(raw)")
            set = try fleet.cli(["preroll", camera, "10s", "--budget", "16", "--codec", "h264"])
            #expect(set.status == 0 && set.output.contains("encoded as h264"), "\(set.output)\(set.error)")
            try await fleet.waitUntil("the encoded pre-roll keeps ten seconds", seconds: 30) {
                try kept()["kept_ns"] as? Int ?? 0 >= 9_900_000_000
            }
            let encoded = try kept()
            print(
                "encoded pre-roll: raw kept \(raw["kept_ns"] ?? "?") ns in \(raw["kept_bytes"] ?? "?") bytes; h264 kept \(encoded["kept_ns"] ?? "?") ns in \(encoded["kept_bytes"] ?? "?") bytes"
            )
            #expect(encoded["encoding"] as? String == "h264, crf 23", "\(encoded)")
            #expect((encoded["kept_bytes"] as? Int ?? .max) < 16 << 20, "\(encoded)")

            let refused = try fleet.cli(["record", "start", camera, "--pre-roll", "3s", "--codec-for", "\(camera)=ffv1"], timeout: 15)
            #expect(refused.status != 0 && refused.error.contains("keeps its pre-roll encoded as h264"), "\(refused.error)")
            let started = try fleet.cli(["record", "start", camera, "--pre-roll", "8s", "--store", "agent", "--json"], timeout: 15)
            let take = try #require(try JSONSerialization.jsonObject(with: Data(started.output.utf8)) as? [String: Any], "\(started.error)")
            let takeID = try #require(take["id"] as? String)
            try await Task.sleep(for: .seconds(2))
            #expect(try fleet.cli(["record", "stop", takeID], timeout: 30).status == 0)
            let shown = try SecondLaneIntegrationTests.RecordingTests.show(takeID, in: fleet)
            let start = try #require((shown["start_fleet_ns"] as? NSNumber)?.uint64Value, "\(shown)")
            #expect(start % 1_000_000_000 == 0, "an encoded pre-roll's take starts on a whole fleet second: \(start)")
            let part = try #require((shown["devices"] as? [[String: Any]])?.first)
            let first = try #require((part["first_fleet_ns"] as? NSNumber)?.uint64Value, "\(part)")
            // Its first frame is the key frame of that second: within one frame interval of it.
            #expect(first >= start && first - start <= 70_000_000, "the part begins \(Int64(first) - Int64(start)) ns after the start")
            #expect((part["format"] as? String)?.hasSuffix("H264") == true && part["encoder"] as? String == "libx264", "\(part)")
            #expect(try SecondLaneIntegrationTests.RecordingTests.lostByTheFleet(part, in: fleet) == 0, "\(part["drops"] ?? "")")
            #expect(SecondLaneIntegrationTests.RecordingTests.spanAccounted(part), "\(part)")
            let frames = part["frames"] as? Int ?? 0
            let inSpan = SecondLaneIntegrationTests.RecordingTests.framesInSpan(of: shown, fps: 15)
            #expect(frames >= 120 && frames >= inSpan, "eight seconds kept and the live ones at 15 fps: \(frames), the span holds \(inSpan)")
            let segments = try #require(shown["segments"] as? [[String: Any]])
            for segment in segments {
                let path = try #require(segment["path"] as? String)
                let decoded = try Self.decode(path)
                #expect(decoded.errors.isEmpty && decoded.frames.count == segment["frames"] as? Int, "\(path): \(decoded.errors)")
            }
            #expect(try fleet.cli(["recordings", "verify", takeID], timeout: 60).status == 0)

            // Written on the coordinator instead: the kept packets cross with the live ones.
            let onCoordinator = try fleet.cli(["record", "start", camera, "--pre-roll", "3s", "--store", "coordinator", "--json"], timeout: 15)
            let coordinatorID = try #require(
                (try JSONSerialization.jsonObject(with: Data(onCoordinator.output.utf8)) as? [String: Any])?["id"] as? String,
                "\(onCoordinator.error)")
            try await Task.sleep(for: .seconds(1))
            #expect(try fleet.cli(["record", "stop", coordinatorID], timeout: 30).status == 0)
            let coordinatorShown = try SecondLaneIntegrationTests.RecordingTests.show(coordinatorID, in: fleet)
            let coordinatorStart = try #require((coordinatorShown["start_fleet_ns"] as? NSNumber)?.uint64Value)
            let coordinatorPart = try #require((coordinatorShown["devices"] as? [[String: Any]])?.first)
            let coordinatorFirst = try #require((coordinatorPart["first_fleet_ns"] as? NSNumber)?.uint64Value, "\(coordinatorPart)")
            #expect(coordinatorStart % 1_000_000_000 == 0 && coordinatorFirst - coordinatorStart <= 70_000_000, "\(coordinatorPart)")
            #expect(try SecondLaneIntegrationTests.RecordingTests.lostByTheFleet(coordinatorPart, in: fleet) == 0, "\(coordinatorPart)")
            // At least three seconds at 15 fps: the start goes back to the whole second at or before
            // the instant less 3 s (3 to 4 s), and the take stops about when its instant comes.
            #expect(
                SecondLaneIntegrationTests.RecordingTests.spanAccounted(coordinatorPart) && (coordinatorPart["frames"] as? Int ?? 0) >= 44,
                "\(coordinatorPart)")
            #expect(try fleet.cli(["recordings", "verify", coordinatorID], timeout: 60).status == 0)

            // A take in the pre-roll's codec taps its encoder: the agent opens no other.
            let opened = agent.log.components(separatedBy: "encoder opened").count - 1
            #expect(opened == 1, "the pre-roll's encoder only: \(opened)")
            let tapped = try fleet.cli(["record", "start", camera, "--codec", "h264", "--store", "agent", "--json"], timeout: 15)
            let tappedID = try #require(
                (try JSONSerialization.jsonObject(with: Data(tapped.output.utf8)) as? [String: Any])?["id"] as? String, "\(tapped.error)")
            try await Task.sleep(for: .seconds(3))
            #expect(try fleet.cli(["record", "stop", tappedID], timeout: 30).status == 0)
            let tappedShown = try SecondLaneIntegrationTests.RecordingTests.show(tappedID, in: fleet)
            let tappedPart = try #require((tappedShown["devices"] as? [[String: Any]])?.first)
            #expect((tappedPart["frames"] as? Int ?? 0) >= 25 && SecondLaneIntegrationTests.RecordingTests.spanAccounted(tappedPart), "\(tappedPart)")
            for segment in try #require(tappedShown["segments"] as? [[String: Any]]) {
                let decoded = try Self.decode(try #require(segment["path"] as? String))
                #expect(decoded.errors.isEmpty && decoded.frames.count == segment["frames"] as? Int, "\(decoded.errors)")
            }
            #expect(agent.log.components(separatedBy: "encoder opened").count - 1 == 1, "a tap opens no encoder of its own")

            // A still at an instant already past (stills.md, "From the past"): decoded from the
            // kept packets, it is the frame nearest the instant, its stamp that frame's number.
            let instant = UInt64(Date().timeIntervalSince1970 * 1e9) - 1_500_000_000
            let stills = fleet.directory + "/past-stills"
            let still = try fleet.cli(["still", camera, "--size", "streaming", "--at", String(instant), "-o", stills, "--json"], timeout: 60)
            #expect(still.status == 0, "\(still.output)\(still.error)")
            let files = try FileManager.default.contentsOfDirectory(atPath: stills)
            let png = try #require(files.first { $0.hasSuffix(".png") }, "\(files)")
            let sidecarName = try #require(files.first { $0.hasSuffix(".json") && $0.hasPrefix((png as NSString).deletingPathExtension) }, "\(files)")
            let sidecar = try #require(
                try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: stills + "/" + sidecarName))) as? [String: Any])
            let taken = try #require((sidecar["fleet_time_ns"] as? NSNumber)?.uint64Value, "\(sidecar)")
            #expect(max(taken, instant) - min(taken, instant) <= 70_000_000, "the frame nearest the instant: \(taken) for \(instant)")
            let picture = try PNGDecoder.decode([UInt8](try Data(contentsOf: URL(fileURLWithPath: stills + "/" + png))))
            var green = (0..<(picture.width * picture.height)).map { picture.pixels[$0 * 3 + 1] }
            let stamp = green.withUnsafeMutableBytes { bytes in
                LumaPlane(base: bytes.baseAddress!, pixelFormat: .grey, width: picture.width, height: picture.height).flatMap {
                    FrameNumberStamp.read(from: $0)
                }
            }
            let sequence = try #require((sidecar["sequence"] as? NSNumber)?.uint64Value, "\(sidecar)")
            #expect(
                stamp == UInt32(truncatingIfNeeded: sequence),
                "the decoded picture is frame \(sequence): its stamp reads \(stamp.map(String.init) ?? "nothing")")
            print(
                "encoded pre-roll: a still 1.5 s past decoded as frame \(sequence) (stamp \(stamp.map(String.init) ?? "-")), \(Int64(taken) - Int64(instant)) ns from the instant"
            )

            #expect(try fleet.cli(["preroll", camera, "--off"]).status == 0)
            try await fleet.waitUntil("off: nothing kept", seconds: 10) { try kept()["kept_frames"] == nil }
        }

        /// An encoded pre-roll on disk (recordings.md, "On disk"): 1 MiB of memory holds under a
        /// second of a camera's FFV1 packets (a photograph fills its frame: bars alone compress to
        /// nothing); with 64 MiB of its host's disk the pre-roll keeps its ten seconds, a take
        /// reaching eight seconds back starts on the whole second before with every frame there and
        /// decoding, each showing its own number, and a still from seven seconds back is decoded
        /// from the disk. Turned off, the disk is emptied.
        @Test func anEncodedPreRollOnDisk_keepsWhatItsMemoryCannot_andATakeReachesIntoIt() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator(environment: ["CAPFLEET_SEGMENT_SECONDS": "4"])
            let agent = try fleet.startAgent(
                "d1", fps: 15, extra: ["--synthetic-overlay", "image:\(SecondLaneIntegrationTests.DetectionTests.portrait)@0,0,1"])
            try await fleet.waitUntil("the clock locks", seconds: 30) { agent.log.contains("clock.state=locked") }
            let camera = try #require(try fleet.json(["devices"]).first?["device_id"] as? String)
            try fleet.grantConsent(camera)
            #expect(try fleet.cli(["lock", camera]).status == 0)
            func kept() throws -> [String: Any] {
                let text = try fleet.cli(["preroll", camera, "--json"]).output
                return (try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[String: Any]])?.first ?? [:]
            }
            let raw = try fleet.cli(["preroll", camera, "10s", "--disk", "64"])
            #expect(raw.status != 0 && raw.error.contains("--codec"), "a disk keeps packets, not raw frames: \(raw.error)")
            let set = try fleet.cli(["preroll", camera, "10s", "--budget", "1", "--codec", "ffv1", "--disk", "64"])
            #expect(set.status == 0 && set.output.contains("64 MiB of disk"), "\(set.output)\(set.error)")
            try await fleet.waitUntil("memory and disk keep ten seconds", seconds: 30) { try kept()["kept_ns"] as? Int ?? 0 >= 9_900_000_000 }
            let figures = try kept()
            print("pre-roll on disk: \(figures)")
            #expect((figures["kept_bytes"] as? Int ?? .max) <= 1 << 20 && (figures["kept_disk_bytes"] as? Int ?? 0) > 1 << 20, "\(figures)")
            let folder = fleet.directory + "/d1/pre-roll/" + camera
            #expect(try FileManager.default.contentsOfDirectory(atPath: folder).contains { $0.hasSuffix(".group") }, "its files in \(folder)")

            // A still from seven seconds back: from the disk.
            let instant = UInt64(Date().timeIntervalSince1970 * 1e9) - 7_000_000_000
            let stills = fleet.directory + "/disk-stills"
            let still = try fleet.cli(["still", camera, "--size", "streaming", "--at", String(instant), "-o", stills, "--json"], timeout: 60)
            #expect(still.status == 0, "\(still.output)\(still.error)")

            let started = try fleet.cli(["record", "start", camera, "--pre-roll", "8s", "--store", "agent", "--json"], timeout: 15)
            let takeID = try #require(
                (try JSONSerialization.jsonObject(with: Data(started.output.utf8)) as? [String: Any])?["id"] as? String, "\(started.error)")
            try await Task.sleep(for: .seconds(2))
            #expect(try fleet.cli(["record", "stop", takeID], timeout: 30).status == 0)
            let shown = try SecondLaneIntegrationTests.RecordingTests.show(takeID, in: fleet)
            let start = try #require((shown["start_fleet_ns"] as? NSNumber)?.uint64Value, "\(shown)")
            let part = try #require((shown["devices"] as? [[String: Any]])?.first)
            let first = try #require((part["first_fleet_ns"] as? NSNumber)?.uint64Value, "\(part)")
            #expect(
                start % 1_000_000_000 == 0 && first >= start && first - start <= 70_000_000, "begins on the second: \(Int64(first) - Int64(start)) ns"
            )
            #expect(try SecondLaneIntegrationTests.RecordingTests.lostByTheFleet(part, in: fleet) == 0, "\(part["drops"] ?? "")")
            let inSpan = SecondLaneIntegrationTests.RecordingTests.framesInSpan(of: shown, fps: 15)
            #expect(
                (part["frames"] as? Int ?? 0) >= 120 && (part["frames"] as? Int ?? 0) >= inSpan,
                "eight seconds kept and the live ones at 15 fps (the span holds \(inSpan)): \(part)")
            // Each decoded frame shows its own number: the disk gave back the frames in order, whole.
            var stamped: [UInt32] = []
            for segment in try #require(shown["segments"] as? [[String: Any]]) {
                let path = try #require(segment["path"] as? String)
                let decoded = try Self.decode(path)
                #expect(decoded.errors.isEmpty && decoded.frames.count == segment["frames"] as? Int, "\(path): \(decoded.errors)")
                for var frame in decoded.frames {
                    let number = frame.withUnsafeMutableBytes { bytes in
                        LumaPlane(base: bytes.baseAddress!, pixelFormat: .yuyv, width: 640, height: 480).flatMap { FrameNumberStamp.read(from: $0) }
                    }
                    stamped.append(number ?? 0)
                }
            }
            let firstSequence = (shown["segments"] as? [[String: Any]])?.first?["first_sequence"] as? Int ?? -1
            #expect(stamped.count == part["frames"] as? Int && stamped.first == UInt32(truncatingIfNeeded: firstSequence), "\(stamped.prefix(3))")
            #expect(zip(stamped, stamped.dropFirst()).allSatisfy { $1 > $0 }, "in capture order, none twice: \(stamped)")
            print(
                "pre-roll on disk: take \(takeID) \(part["frames"] ?? 0) frames from \(Int64(first) - Int64(start)) ns after its start, stamps \(stamped.first ?? 0)…\(stamped.last ?? 0)"
            )

            #expect(try fleet.cli(["preroll", camera, "--off"]).status == 0)
            try await fleet.waitUntil("off: its disk emptied", seconds: 10) {
                !(try FileManager.default.contentsOfDirectory(atPath: folder)).contains { $0.hasSuffix(".group") }
            }
        }

        /// One take, a codec per camera: the take's for most, one of its own for the camera named.
        @Test func aCameraGivenItsOwnCodec_isStoredInIt_andTheOthersInTheTakes() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            let devices = try await SecondLaneIntegrationTests.RecordingTests.devices(in: fleet, agents: ["p1", "p2"], fps: 15)
            let refused = try fleet.cli(["record", "start", devices[0], "--codec", "h264", "--codec-for", "nobody=ffv1"], timeout: 15)
            #expect(refused.status != 0 && refused.error.contains("nobody is not among the devices to record"), "\(refused.error)")
            let started = try fleet.cli(
                ["record", "start"] + devices + ["--codec", "h264", "--codec-for", "\(devices[1])=ffv1", "--json"], timeout: 15)
            let takeID = try #require(
                (try JSONSerialization.jsonObject(with: Data(started.output.utf8)) as? [String: Any])?["id"] as? String,
                "\(started.output)\(started.error)")
            try await Task.sleep(for: .seconds(3))
            #expect(try fleet.cli(["record", "stop", takeID], timeout: 30).status == 0)
            let parts = try #require(try SecondLaneIntegrationTests.RecordingTests.show(takeID, in: fleet)["devices"] as? [[String: Any]])
            let byDevice = Dictionary(uniqueKeysWithValues: parts.map { ($0["device_id"] as? String ?? "", $0) })
            #expect(
                byDevice[devices[0]]?["encoder"] as? String == "libx264" && (byDevice[devices[0]]?["codec"] as? String)?.hasPrefix("h264") == true,
                "\(byDevice[devices[0]] ?? [:])")
            #expect(
                byDevice[devices[1]]?["encoder"] as? String == "ffv1" && byDevice[devices[1]]?["codec"] as? String == "ffv1",
                "\(byDevice[devices[1]] ?? [:])")
        }

        /// Stabilisation (recordings.md, "Stabilisation"): asked of an h264 take, its h264 parts
        /// are steadied and say so (the take's listing, the part's codec, the file's STABILISATION
        /// tag), a camera given ffv1 of its own keeps the camera's pixels; asked of a codec that
        /// keeps them, it is refused saying why.
        @Test func aStabilisedTake_steadiesItsLossyParts_andSaysSo_aLosslessOneIsRefused() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            let devices = try await SecondLaneIntegrationTests.RecordingTests.devices(in: fleet, agents: ["s1", "s2"], fps: 15)
            let refused = try fleet.cli(["record", "start", devices[0], "--codec", "ffv1", "--stabilise"], timeout: 15)
            #expect(refused.status != 0 && refused.error.contains("--stabilise is for h264 and hevc takes"), "\(refused.error)")
            let alone = try fleet.cli(["record", "start", devices[0], "--stabilise"], timeout: 15)
            #expect(alone.status != 0 && alone.error.contains("go with a --codec"), "\(alone.error)")
            let started = try fleet.cli(
                ["record", "start"] + devices + ["--codec", "h264", "--stabilise", "--codec-for", "\(devices[1])=ffv1", "--json"], timeout: 15)
            let take = try #require(try JSONSerialization.jsonObject(with: Data(started.output.utf8)) as? [String: Any], "\(started.error)")
            #expect(take["stabilisation"] as? String == "deshake", "\(take)")
            let takeID = try #require(take["id"] as? String)
            try await Task.sleep(for: .seconds(3))
            #expect(try fleet.cli(["record", "stop", takeID], timeout: 30).status == 0)
            let shown = try SecondLaneIntegrationTests.RecordingTests.show(takeID, in: fleet)
            let parts = try #require(shown["devices"] as? [[String: Any]])
            let byDevice = Dictionary(uniqueKeysWithValues: parts.map { ($0["device_id"] as? String ?? "", $0) })
            #expect(byDevice[devices[0]]?["codec"] as? String == "h264, crf 23, stabilised (deshake)", "\(byDevice[devices[0]] ?? [:])")
            #expect(byDevice[devices[1]]?["codec"] as? String == "ffv1", "\(byDevice[devices[1]] ?? [:])")
            #expect(try fleet.cli(["recordings", "show", takeID]).output.contains("stabilised (deshake)"))
            let segments = try #require(shown["segments"] as? [[String: Any]])
            for segment in segments {
                let path = try #require(segment["path"] as? String)
                let tag = try Self.probe(path, entries: "stream_tags=STABILISATION")
                let steadied = segment["device_id"] as? String == devices[0]
                #expect(tag == (steadied ? "deshake" : ""), "\(path): \(tag)")
                let decoded = try Self.decode(path)
                #expect(decoded.errors.isEmpty && decoded.frames.count == segment["frames"] as? Int, "\(path) decodes whole: \(decoded.errors)")
            }
            #expect(segments.contains { $0["device_id"] as? String == devices[0] } && segments.contains { $0["device_id"] as? String == devices[1] })
        }

        /// A 1080p30 camera whose HEVC encoder has one thread at x265's medium preset cannot keep
        /// up with a picture that changes all over every frame (a large timecode: bars alone,
        /// nearly still, let a fast machine's x265 skip its way to 30 fps): its frames are dropped as encoder_late, counted
        /// in the take and the device's status, while capture and the live path go on at the
        /// camera's rate. Every refusal the device counted is in the part, those after its last
        /// stored frame too (its end says them), none as a discontinuity.
        @Test func anEncoderTooSlowForItsCamera_dropsEncoderLate_andNeverStallsCapture() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            let agent = try fleet.fleet.startAgent(
                "slow",
                arguments: [
                    "--synthetic", "1", "--no-discover", "--fps", "30", "--synthetic-format", "1920x1080:YUYV",
                    "--synthetic-overlay", "timecode@0.2,0.05,0.5",
                ],
                environment: ["CAPFLEET_ENCODER_THREADS": "1", "CAPFLEET_ENCODER_PRESET": "medium"])
            try await fleet.waitUntil("the clock locks", seconds: 30) { agent.log.contains("clock.state=locked") }
            let device = try #require(try fleet.json(["devices"]).first?["device_id"] as? String)
            try fleet.grantConsent(device)
            let started = try fleet.cli(["record", "start", device, "--codec", "hevc", "--json"], timeout: 15)
            let takeID = try #require(
                (try JSONSerialization.jsonObject(with: Data(started.output.utf8)) as? [String: Any])?["id"] as? String,
                "\(started.output)\(started.error)")
            try await fleet.waitUntil("the encoder opens", seconds: 15) { agent.log.contains("encoder opened") }
            let before = try #require(try fleet.deviceStats()[device]?["frames_captured"] as? Int)
            try await Task.sleep(for: .seconds(4))
            let after = try #require(try fleet.deviceStats()[device]?["frames_captured"] as? Int)
            #expect(Double(after - before) / 4 >= 25, "capture keeps the camera's 30 fps while the encoder lags: \(after - before) frames in 4 s")
            let snapshot = fleet.directory + "/live.png"
            let shot = try fleet.cli(["snapshot", device, "-o", snapshot], timeout: 15)
            #expect(shot.status == 0, "the live path still serves the camera: \(shot.output)\(shot.error)")
            #expect(try fleet.cli(["record", "stop", takeID, "--wait", "60"], timeout: 70).status == 0)
            let shown = try SecondLaneIntegrationTests.RecordingTests.show(takeID, in: fleet)
            let part = try #require((shown["devices"] as? [[String: Any]])?.first)
            #expect(part["state"] as? String == "stopped", "the encoder's last packets are stored within the wait: \(part)")
            let drops = try #require(part["drops"] as? [String: Int])
            #expect((drops["encoder_late"] ?? 0) > 0, "the encoder could not keep up: \(drops)")
            let stored = part["frames"] as? Int ?? 0
            #expect(stored > 0, "what it encoded is stored: \(part)")
            // Every frame of the part's span is stored or counted, the encoder's refusals as encoder_late.
            let first = try #require(part["first_sequence"] as? Int), last = try #require(part["last_sequence"] as? Int)
            #expect(stored + SecondLaneIntegrationTests.RecordingTests.dropTotal(part) == last - first + 1, "\(part)")
            let stats = try #require(try fleet.deviceStats()[device])
            // A gap is a discontinuity only where the camera itself skipped (a synthetic camera
            // on a machine this busy may miss a slot): the encoder's refusals never are.
            let cameraSkipped = (stats["drops"] as? [String: Any])?["discontinuity"] as? Int ?? 0
            #expect(
                (drops["discontinuity"] ?? 0) <= cameraSkipped, "no frame of the span goes unexplained: \(drops), the camera skipped \(cameraSkipped)"
            )
            #expect(((stats["drops"] as? [String: Any])?["encoder_late"] as? Int ?? 0) > 0, "the device's status counts them too: \(stats)")
            // The take is the device's only one: the part holds every frame the device counted
            // its encoder late for (its status may be a second behind the part's end).
            var deviceLate = 0
            for _ in 0..<20 {
                deviceLate = (try fleet.deviceStats()[device]?["drops"] as? [String: Any])?["encoder_late"] as? Int ?? 0
                if deviceLate == drops["encoder_late"] { break }
                try await Task.sleep(for: .milliseconds(500))
            }
            #expect(drops["encoder_late"] == deviceLate, "the part's encoder_late is the device's: \(drops), the device counted \(deviceLate)")
            let listed = try fleet.cli(["recordings", "show", takeID])
            #expect(listed.output.contains("ENCODER LATE"), "\(listed.output)")
            let shownDevice = try fleet.cli(["device", device])
            #expect(
                shownDevice.output.contains("hevc: libx265 (software)") && shownDevice.output.contains("ffv1: ffv1 (software)"),
                "the node's encoders, as its HELLO listed them: \(shownDevice.output)")
            let events = try fleet.cli(["events", "--limit", "50"])
            #expect(
                events.output.contains("with libx265 (software, 1 thread); this host has no hardware hevc encoder"),
                "the software encoder is said: \(events.output)")
        }

        /// The same encoder with drop recovery on: encoder_late drops are what a lower frame rate
        /// cures, so the policy steps the camera's rate down and says so.
        @Test func dropRecovery_lowersTheRateOfACameraItsEncoderCannotKeepUpWith() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            let agent = try fleet.fleet.startAgent(
                "slow", arguments: ["--synthetic", "1", "--no-discover", "--fps", "30", "--synthetic-format", "1920x1080:YUYV"],
                environment: ["CAPFLEET_ENCODER_THREADS": "1", "CAPFLEET_ENCODER_PRESET": "veryslow"])
            try await fleet.waitUntil("the clock locks", seconds: 30) { agent.log.contains("clock.state=locked") }
            let device = try #require(try fleet.json(["devices"]).first?["device_id"] as? String)
            try fleet.grantConsent(device)
            _ = try fleet.json(["lock", device])
            _ = try fleet.json(["policy", device, "--drop-recovery", "on", "--min-fps", "10", "--quiet-seconds", "30"])
            let started = try fleet.cli(["record", "start", device, "--codec", "hevc", "--json"], timeout: 15)
            let takeID = try #require(
                (try JSONSerialization.jsonObject(with: Data(started.output.utf8)) as? [String: Any])?["id"] as? String,
                "\(started.output)\(started.error)")
            try await fleet.waitUntil("drop recovery lowers the rate", seconds: 30) {
                try IntegrationTests.SyntheticControlTests.policyActions(fleet).contains { $0.contains("lowered the frame rate") }
            }
            try await fleet.waitUntil("the camera runs slower than the 30 fps asked for", seconds: 10) {
                (try fleet.json(["devices"]).first?["active_frame_rate"] as? Double ?? 30) < 30
            }
            #expect(try fleet.cli(["record", "stop", takeID, "--wait", "60"], timeout: 70).status == 0)
        }

        /// SIGKILL mid-take, in each codec: the agent repairs what it was writing; every segment,
        /// repaired or not, decodes and holds what the index says.
        @Test(arguments: ["ffv1", "h264", "hevc"])
        func anAgentKilledMidTake_leavesSegmentsThatDecode(codec: String) async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            let devices = try await SecondLaneIntegrationTests.RecordingTests.devices(in: fleet, agents: ["k1"], fps: 15)
            let started = try fleet.cli(["record", "start"] + devices + ["--codec", codec, "--json"], timeout: 15)
            let takeID = try #require(
                (try JSONSerialization.jsonObject(with: Data(started.output.utf8)) as? [String: Any])?["id"] as? String,
                "\(started.output)\(started.error)")
            try await Task.sleep(for: .seconds(3))
            let victim = try #require(fleet.processes.first { $0.name.hasPrefix("k1-") })
            victim.kill()
            try await Task.sleep(for: .seconds(1))
            let again = try fleet.startAgent("k1", fps: 15)
            try await fleet.waitUntil("the restarted agent records again", seconds: 30) {
                again.log.contains("encoder opened") && again.log.contains(takeID)
            }
            try await Task.sleep(for: .seconds(2))
            #expect(try fleet.cli(["record", "stop", takeID], timeout: 30).status == 0)
            let shown = try SecondLaneIntegrationTests.RecordingTests.show(takeID, in: fleet)
            let segments = try #require(shown["segments"] as? [[String: Any]])
            #expect(segments.contains { $0["state"] as? String == "repaired" }, "\(segments)")
            for segment in segments {
                let path = try #require(segment["path"] as? String)
                let decoded = try Self.decode(path)
                #expect(decoded.errors.isEmpty, "\(path) decodes without a complaint: \(decoded.errors)")
                #expect(decoded.frames.count == segment["frames"] as? Int, "\(path) holds what the index says")
            }
            #expect(try fleet.cli(["recordings", "verify", takeID], timeout: 60).status == 0)
        }

        /// A camera recorded as H.264, viewed through the take's own packets: a stream a player
        /// reads from its first key frame, while no raw frame of it reaches the coordinator.
        @Test(arguments: ["agent", "coordinator"])
        func theEncodedStream_ofACameraRecordedAsH264_playsFromAKeyFrame_withoutRawFrames(store: String) async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            let device = try #require(try await SecondLaneIntegrationTests.RecordingTests.devices(in: fleet, agents: ["e1"], fps: 15).first)
            let started = try fleet.cli(["record", "start", device, "--codec", "h264", "--gop", "10", "--store", store, "--json"], timeout: 15)
            let takeID = try #require(
                (try JSONSerialization.jsonObject(with: Data(started.output.utf8)) as? [String: Any])?["id"] as? String,
                "\(started.output)\(started.error)")
            try await Task.sleep(for: .seconds(1))
            let rawBefore = try #require(try fleet.deviceStats()[device]?["frames_received"] as? Int)
            let stream = fleet.directory + "/live.h264"
            let viewed = try fleet.cli(["view", device, "--encoded", "-o", stream, "--frames", "30"], timeout: 30)
            #expect(viewed.status == 0, "\(viewed.output)\(viewed.error)")
            #expect(viewed.error.contains("H264"), "\(viewed.error)")
            let rawAfter = try #require(try fleet.deviceStats()[device]?["frames_received"] as? Int)
            #expect(rawAfter == rawBefore, "the encoded stream wakes no raw flow: \(rawAfter - rawBefore) raw frames reached the coordinator")
            #expect(try Self.probe(stream) == "h264")
            let decoded = try Self.decode(stream)
            #expect(decoded.errors.isEmpty, "the stream starts at a key frame with its parameter sets: \(decoded.errors)")
            #expect(decoded.frames.count == 30, "every packet written decodes: \(decoded.frames.count) frames")
            #expect(try fleet.cli(["record", "stop", takeID], timeout: 30).status == 0)
        }

        /// Every frame of a segment as YUYV, and whatever ffmpeg complained of.
        static func decode(_ path: String, width: Int = 640, height: Int = 480) throws -> (frames: [[UInt8]], errors: String) {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/ffmpeg")
            // Every stored frame once: no frames repeated to fill a gap in the timestamps, and in
            // the file's millisecond time base (the frame rate's would put two frames of a
            // jittery camera, 60 and 70 ms apart, in one slot and refuse the second).
            process.arguments = [
                "-v", "error", "-i", path, "-map", "0:v", "-fps_mode", "passthrough", "-enc_time_base", "-1",
                "-f", "rawvideo", "-pix_fmt", "yuyv422", "-",
            ]
            let output = Pipe(), errors = Pipe()
            process.standardOutput = output
            process.standardError = errors
            try process.run()
            let data = output.fileHandleForReading.readDataToEndOfFile()
            let said = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            let size = width * height * 2
            let frames = stride(from: 0, to: data.count - size + 1, by: size).map { Array(data[$0..<($0 + size)]) }
            return (frames, process.terminationStatus == 0 ? said : "exit \(process.terminationStatus): \(said)")
        }

        /// What ffprobe says of a file's video track: its codec, or the `entries` asked for
        /// (`stream_tags=STABILISATION`: the tag, "" when it has none).
        static func probe(_ path: String, entries: String = "stream=codec_name") throws -> String {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/ffprobe")
            process.arguments = ["-v", "error", "-select_streams", "v:0", "-show_entries", entries, "-of", "csv=p=0", path]
            let out = Pipe()
            process.standardOutput = out
            process.standardError = FileHandle.nullDevice
            try process.run()
            let data = out.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        }
    }
}
