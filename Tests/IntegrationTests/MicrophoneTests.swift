import FleetTestSupport
import Foundation
import Testing

extension SecondLaneIntegrationTests {
    /// The synthetic microphone (proto-docs/microphones.md): a device of its own kind whose
    /// per-channel levels reach `capfleet watch` once a second, silence until its consent is
    /// granted, then the tone's RMS and the click's peak; `capfleet listen` hears its clicks on
    /// the fleet's seconds; takes record it as FLAC, and a revocation ends its part.
    @Suite struct MicrophoneTests {
        static func levels(_ fleet: FleetHarness, _ device: String) throws -> [[String: Any]]? {
            try fleet.deviceStats()[device]?["audio_levels"] as? [[String: Any]]
        }

        struct Click {
            var frame: Int
            var fleetNs: UInt64
            var uncertaintyNs: UInt64
            /// The same instant on the agent's CLOCK_MONOTONIC.
            var monotonicNs: UInt64
        }

        /// The clicks in a WAV that `capfleet listen` wrote, each placed in fleet time by the block
        /// it fell in (its `--blocks` file): where the samples first reach half of full scale after
        /// a quiet stretch (the tone stays at a tenth).
        static func clickFleetTimes(wav: String, blocks: String) throws -> [Click] {
            let data = try Data(contentsOf: URL(fileURLWithPath: wav))
            #expect(data.count > 44 && String(decoding: data[0..<4], as: UTF8.self) == "RIFF")
            let channels = Int(data[22]) | Int(data[23]) << 8
            let rate = Int(data[24]) | Int(data[25]) << 8 | Int(data[26]) << 16 | Int(data[27]) << 24
            let samples = data.dropFirst(44).withUnsafeBytes { Array($0.bindMemory(to: Int16.self)) }
            let rows = try String(contentsOfFile: blocks, encoding: .utf8).split(separator: "\n").dropFirst().map {
                $0.split(separator: ",", omittingEmptySubsequences: false)
            }
            let firstFrame = try #require(rows.first.flatMap { UInt64($0[0]) })
            var clicks: [Click] = []
            var quiet = 0
            for frame in 0..<(samples.count / channels) {
                let value = abs(Int(samples[frame * channels]))
                if value > 16_000, quiet >= rate / 100 {
                    let streamFrame = firstFrame + UInt64(frame)
                    if let row = rows.last(where: { UInt64($0[0])! <= streamFrame }), let fleet = UInt64(row[3]) {
                        let offset = UInt64((Double(streamFrame - UInt64(row[0])!) * 1e9 / Double(rate)).rounded())
                        clicks.append(
                            Click(frame: frame, fleetNs: fleet + offset, uncertaintyNs: UInt64(row[4])!, monotonicNs: UInt64(row[2])! + offset))
                    }
                }
                quiet = value > 16_000 ? 0 : quiet + 1
            }
            return clicks
        }

        /// What ffprobe says of a segment's first audio stream: codec, sample rate, channels.
        static func audioStream(_ path: String) throws -> [String] {
            let probe = Process()
            probe.executableURL = URL(fileURLWithPath: "/usr/bin/ffprobe")
            probe.arguments = [
                "-v", "error", "-select_streams", "a:0", "-show_entries", "stream=codec_name,sample_rate,channels", "-of", "csv=p=0", path,
            ]
            let out = Pipe()
            probe.standardOutput = out
            try probe.run()
            let data = out.fileHandleForReading.readDataToEndOfFile()
            probe.waitUntilExit()
            return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines).split(separator: ",").map(String.init)
        }

        /// Where a file's clicks are, in ns of the file's time (a take's files: since its start).
        static func clicksInSegment(_ path: String, scratch: String) throws -> [UInt64] {
            try SoundPictureProbe.clicks(in: path).map { UInt64(max($0, 0)) }
        }

        /// A microphone's pre-roll (recordings.md, "Pre-roll"): kept like a camera's, its part of a
        /// take started in the past begins at the same instant as the camera's, its clicks on
        /// their whole seconds of fleet time from the take's first block.
        @Test func aMicrophonesPreRoll_startsItsPartWithTheCamerasInThePast_clicksOnTheirSeconds() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            let agent = try fleet.startAgent("studio", extra: ["--synthetic-microphones", "1"])
            try await fleet.waitUntil("the clock locks", seconds: 30) { agent.log.contains("clock.state=locked") }
            let devices = try fleet.json(["devices"])
            let microphone = try #require(devices.first { $0["kind"] as? String == "syntheticMicrophone" }?["device_id"] as? String)
            let camera = try #require(devices.first { $0["kind"] as? String == "synthetic" }?["device_id"] as? String)
            for device in [microphone, camera] {
                try fleet.grantConsent(device)
                #expect(try fleet.cli(["lock", device]).status == 0)
            }
            func kept() throws -> [String: [String: Any]] {
                let text = try fleet.cli(["preroll", microphone, camera, "--json"]).output
                let entries = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[String: Any]] ?? []
                return entries.reduce(into: [:]) { $0[$1["device"] as? String ?? "?"] = $1 }
            }
            let set = try fleet.cli(["preroll", microphone, camera, "3s"])
            #expect(set.status == 0, "\(set.output)\(set.error)")
            // Full: three seconds behind the newest, less a block (the status is a second behind).
            try await fleet.waitUntil("both keep their three seconds", seconds: 20) {
                try kept().values.filter { ($0["kept_ns"] as? Int ?? 0) >= 2_900_000_000 }.count == 2
            }
            let sound = try #require(try kept()[microphone])
            print("microphone pre-roll: kept \(sound["kept_frames"] ?? "?") blocks, \(sound["kept_bytes"] ?? "?") bytes")
            // Three seconds of 10 ms blocks of 48 kHz stereo 16-bit sound: 300 of 1 920 bytes.
            #expect((280...301).contains(sound["kept_frames"] as? Int ?? 0) && (sound["kept_bytes"] as? Int ?? 0) <= 301 * 1_920, "\(sound)")

            let started = try fleet.cli(["record", "start", camera, microphone, "--pre-roll", "2s", "--json"], timeout: 15)
            let takeID = try #require(
                (try JSONSerialization.jsonObject(with: Data(started.output.utf8)) as? [String: Any])?["id"] as? String,
                "\(started.output)\(started.error)")
            try await Task.sleep(for: .seconds(2.5))
            #expect(try fleet.cli(["record", "stop", takeID], timeout: 60).status == 0)
            let take = try SecondLaneIntegrationTests.RecordingTests.show(takeID, in: fleet)
            #expect(take["pre_roll_ms"] as? Int == 2_000, "\(take)")
            let startNs = try #require((take["start_fleet_ns"] as? NSNumber)?.uint64Value, "\(take)")
            let parts = Dictionary(uniqueKeysWithValues: ((take["devices"] as? [[String: Any]]) ?? []).map { ($0["device_id"] as? String ?? "", $0) })
            for (device, within) in [(microphone, UInt64(10_000_000)), (camera, UInt64(110_000_000))] {
                // The microphone's first block within a block of the start, the camera's first frame within a frame interval.
                let first = try #require((parts[device]?["first_fleet_ns"] as? NSNumber)?.uint64Value, "\(parts[device] ?? [:])")
                #expect(first >= startNs && first - startNs <= within, "\(device) begins \(Int64(first) - Int64(startNs)) ns after the start")
                #expect(SecondLaneIntegrationTests.RecordingTests.dropTotal(parts[device] ?? [:]) == 0, "\(parts[device] ?? [:])")
            }
            // The start lies a second before the command (a 2 s pre-roll before an instant the
            // lead time ahead): every 10 ms block from it to the stop is there, none missing.
            let blocks = parts[microphone]?["frames"] as? Int ?? 0
            let first = try #require((parts[microphone]?["first_fleet_ns"] as? NSNumber)?.uint64Value)
            let last = try #require((parts[microphone]?["last_fleet_ns"] as? NSNumber)?.uint64Value)
            #expect(abs(blocks - (Int((last - first) / 10_000_000) + 1)) <= 1, "\(blocks) blocks from \(first) to \(last)")
            #expect(blocks >= 300, "a second kept and more than two live: \(blocks)")
            let path = try #require(
                ((take["segments"] as? [[String: Any]]) ?? []).first { $0["device_id"] as? String == microphone }?["path"] as? String, "\(take)")
            // A click on every whole second of fleet time the part's blocks span, the kept ones
            // too. The first and last blocks are left out of the count on both sides: a click
            // cut by the part's edge may or may not be heard, and neither says anything.
            let (inner, innerEnd) = (first + 10_000_000, last)
            let clicks = try Self.clicksInSegment(path, scratch: fleet.directory).map { startNs + $0 }.filter { $0 >= inner && $0 < innerEnd }
            let seconds = ((inner + 999_999_999) / 1_000_000_000)...((innerEnd - 1) / 1_000_000_000)
            #expect(clicks.count == seconds.count, "clicks at \(clicks.map { Double($0 - startNs) / 1e9 }) s, seconds \(seconds)")
            for click in clicks {
                let into = Int64(click % 1_000_000_000)
                let fromSecond = into < 500_000_000 ? into : into - 1_000_000_000
                #expect(abs(fromSecond) <= 1_500_000, "a click \(fromSecond) ns from its second")
            }
            print("microphone pre-roll: take from \(startNs), \(blocks) blocks, clicks at \(clicks.map { Double($0 - startNs) / 1e9 }) s")
            #expect(try fleet.cli(["recordings", "verify", takeID], timeout: 120).status == 0)
        }

        @Test func aSyntheticMicrophone_isSilentWithoutConsent_andMetersItsToneAndClickOnceGranted() async throws {
            let fleet = try FleetHarness()
            try fleet.startCoordinator()
            let agent = try fleet.startAgent("studio", extra: ["--synthetic-microphones", "1", "--synthetic-overlay", "flash@0.05,0.05,0.1"])
            try await fleet.waitUntil("the clock locks", seconds: 30) { agent.log.contains("clock.state=locked") }
            let devices = try fleet.json(["devices"])
            let microphone = try #require(
                devices.first { $0["kind"] as? String == "syntheticMicrophone" }?["device_id"] as? String, "\(devices)")
            #expect(microphone.hasPrefix("synmic-"))
            let camera = try #require(devices.first { $0["kind"] as? String == "synthetic" }?["device_id"] as? String)

            // Without consent: silence, metered.
            try await fleet.waitUntil("levels are reported", seconds: 10) { try Self.levels(fleet, microphone)?.count == 2 }
            for level in try #require(try Self.levels(fleet, microphone)) {
                #expect(level["peak_dbfs"] as? Double == -120 && level["rms_dbfs"] as? Double == -120, "silence: \(level)")
            }

            try fleet.grantConsent(microphone)
            var heard: [[String: Any]] = []
            try await fleet.waitUntil("the tone and the click are metered", seconds: 10) {
                heard = try Self.levels(fleet, microphone) ?? []
                // A whole second after consent: the window before it held silence too.
                return heard.count == 2 && heard.allSatisfy { ($0["peak_dbfs"] as? Double ?? -120) > -3 && ($0["rms_dbfs"] as? Double ?? -120) > -24 }
            }
            for level in heard {
                let rms = try #require(level["rms_dbfs"] as? Double)
                let peak = try #require(level["peak_dbfs"] as? Double)
                #expect(abs(peak - -1) < 0.2, "the click's peak: \(level)")
                #expect(rms > -24 && rms < -21, "the tone's RMS (with a click a second): \(level)")
                #expect(level["clipped"] as? Int == 0)
            }
            let frames = try #require(try fleet.deviceStats()[microphone]?["audio_frames_captured"] as? Int)
            #expect(frames > 48_000, "48 kHz for seconds: \(frames)")
            #expect(try fleet.cli(["watch", "--count", "1"]).output.contains("peak/rms dBFS"))
            let clock = try #require(try fleet.deviceStats()[microphone]?["audio_clock"] as? [String: Any])
            #expect(clock["timestamp_source"] as? String == "paced", "\(clock)")

            // Listening (frames.md, "Microphones on the live path"): a WAV of the live sound and
            // each block's times; every click starts on a whole second of fleet time.
            let wav = fleet.directory + "/listen.wav", blocks = fleet.directory + "/listen.csv"
            let listened = try fleet.cli(["listen", microphone, "-o", wav, "--blocks", blocks, "--seconds", "3.5"], timeout: 10)
            #expect(listened.status == 0, "\(listened.error)")
            let clicks = try Self.clickFleetTimes(wav: wav, blocks: blocks)
            #expect(clicks.count >= 2, "\(clicks)")
            for click in clicks {
                let into = Int64(click.fleetNs % 1_000_000_000)
                let fromSecond = into < 500_000_000 ? into : into - 1_000_000_000
                #expect(abs(fromSecond) <= 1_000_000 + Int64(click.uncertaintyNs), "a click \(fromSecond) ns from its second: \(click)")
            }
            print(
                "listen: clicks at \(clicks.map { Double(Int64(bitPattern: $0.fleetNs % 1_000_000_000 &+ 500_000_000) - 500_000_000) / 1e3 }) µs from their seconds"
            )

            // Consent and takes only.
            #expect(try fleet.cli(["lock", microphone]).status == 0)
            let focus = try fleet.cli(["focus", microphone, "--mode", "auto"])
            #expect(focus.status != 0 && focus.error.contains("is a microphone"), "\(focus.error)")

            // Processing (microphones.md, "Processing"): under the lease, shown, remembered. The
            // first take below records with it: its clicks stay on their seconds (the suppressor's
            // 20 ms are taken out of the times) and the file notes what was applied.
            let processed = try fleet.cli(["processing", microphone, "--high-pass", "80", "--noise-suppression", "30"])
            #expect(
                processed.status == 0 && processed.output.contains("high-pass 80 Hz, noise suppression 30 dB"),
                "\(processed.output)\(processed.error)")
            let tooLow = try fleet.cli(["processing", microphone, "--high-pass", "5"])
            #expect(tooLow.status != 0 && tooLow.error.contains("20 to 500 Hz"), "\(tooLow.error)")
            let onCamera = try fleet.cli(["processing", camera, "--gain", "6"])
            #expect(onCamera.status != 0 && onCamera.error.contains("not a microphone"), "\(onCamera.error)")
            let shown = try fleet.cli(["device", microphone])
            #expect(shown.output.contains("processing high-pass 80 Hz, noise suppression 30 dB"), "\(shown.output)")
            let withoutLease = try fleet.cli(["processing", microphone, "--off"], user: "bo")
            #expect(withoutLease.status != 0, "another operator changed processing under ana's lease: \(withoutLease.output)")
            #expect(try fleet.cli(["unlock", microphone]).status == 0)
            try fleet.grantConsent(camera)

            // Takes (microphones.md, "In takes"): the microphone's part is FLAC in Matroska, its
            // clicks on the fleet's whole seconds counted from the take's start, beside the camera.
            var takes: [String] = []
            for store in ["coordinator", "agent"] {
                let takeID = try SecondLaneIntegrationTests.RecordingTests.start([camera, microphone], in: fleet, store: store)
                takes.append(takeID)
                try await Task.sleep(for: .seconds(3.5))
                let stopped = try fleet.cli(["record", "stop", takeID], timeout: 60)
                #expect(stopped.status == 0, "\(stopped.error)")
                if store == "agent" {
                    let collected = try fleet.cli(["recordings", "collect", takeID], timeout: 120)
                    #expect(collected.status == 0, "\(collected.output)\(collected.error)")
                }
                let take = try SecondLaneIntegrationTests.RecordingTests.show(takeID, in: fleet)
                let parts = (take["devices"] as? [[String: Any]]) ?? []
                let sound = try #require(parts.first { $0["device_id"] as? String == microphone }, "\(take)")
                let frames = sound["frames"] as? Int ?? 0
                print("microphone take (\(store)): \(frames) blocks, drops \(sound["drops"] ?? [:]), format \(sound["format"] ?? "?")")
                // 10 ms blocks from the start instant (a moment after the command) to the stop.
                #expect(frames >= 200 && frames <= 400, "\(sound)")
                #expect(SecondLaneIntegrationTests.RecordingTests.dropTotal(sound) == 0, "\(sound)")
                let startNs = try #require((take["start_fleet_ns"] as? NSNumber)?.uint64Value, "\(take)")
                let segments = ((take["segments"] as? [[String: Any]]) ?? []).filter { $0["device_id"] as? String == microphone }
                let path = try #require(segments.first?["path"] as? String, "\(take)")
                #expect(try Self.audioStream(path) == ["flac", "48000", "2"], "\(path)")
                let clicks = try Self.clicksInSegment(path, scratch: fleet.directory)
                #expect(clicks.count >= 2, "\(clicks)")
                for click in clicks {
                    // The file counts in milliseconds: a click sits within one of its fleet second.
                    let fleet = startNs + click
                    let into = Int64(fleet % 1_000_000_000)
                    let fromSecond = into < 500_000_000 ? into : into - 1_000_000_000
                    #expect(abs(fromSecond) <= 1_500_000, "a click \(fromSecond) ns from its second in \(path)")
                }
                let verified = try fleet.cli(["recordings", "verify", takeID], timeout: 120)
                #expect(verified.status == 0, "\(verified.output)\(verified.error)")
                let notes = try SecondLaneIntegrationTests.RecordingTests.metadataEntries(in: [path]).filter { $0.contains("\"audio_processing\"") }
                if store == "coordinator" {
                    #expect(
                        notes.first?.contains("\"noise_suppression_db\":30") == true && notes.first?.contains("\"delay_frames\":960") == true,
                        "\(notes)")
                    // The second take records the sound as captured, and says so.
                    #expect(try fleet.cli(["lock", microphone]).status == 0)
                    #expect(try fleet.cli(["processing", microphone, "--off"]).status == 0)
                    #expect(try fleet.cli(["unlock", microphone]).status == 0)
                } else {
                    #expect(
                        notes.first?.contains("\"noise_suppression_db\":0") == true && notes.first?.contains("\"delay_frames\":0") == true, "\(notes)"
                    )
                }
            }

            // Exported with --mux: the camera's picture and the microphone's sound in one file,
            // each flash (the frame exposed nearest a fleet second) within half a frame of its click.
            let exportDirectory = fleet.directory + "/export"
            let exported = try fleet.cli(["recordings", "export", takes[0], "--to", exportDirectory, "--mux"], timeout: 120)
            #expect(exported.status == 0, "\(exported.output)\(exported.error)")
            let muxed = try #require(
                try FileManager.default.contentsOfDirectory(atPath: exportDirectory + "/muxed").first { $0.hasPrefix(camera) }, "\(exported.output)")
            let muxedPath = exportDirectory + "/muxed/" + muxed
            // The flash patch of a 640x480 frame: 64 px at 32,24; its lower right is read, clear of
            // the frame-number stamp in the corner.
            let offsets = SoundPictureProbe.flashAfterClick(
                clicks: try SoundPictureProbe.clicks(in: muxedPath), flashes: try SoundPictureProbe.flashes(in: muxedPath, crop: (64, 56, 16, 16)))
            print("muxed: flash after click \(offsets.map { Double($0) / 1e6 }) ms")
            #expect(offsets.count >= 2, "\(offsets)")
            for offset in offsets {
                #expect(abs(offset) <= 35_000_000, "a flash \(offset) ns from its click: at 15 fps within half a frame")
            }

            // Revoked mid-take: the microphone's part stops at once, the camera's goes on.
            let takeID = try SecondLaneIntegrationTests.RecordingTests.start([camera, microphone], in: fleet)
            try await Task.sleep(for: .seconds(1.5))
            #expect(try fleet.cli(["consent", "revoke", microphone, "--reason", "the guest left"]).status == 0)
            try await Task.sleep(for: .seconds(1.5))
            #expect(try fleet.cli(["record", "stop", takeID], timeout: 60).status == 0)
            let revokedTake = try SecondLaneIntegrationTests.RecordingTests.show(takeID, in: fleet)
            let revokedParts = (revokedTake["devices"] as? [[String: Any]]) ?? []
            let cut = try #require(revokedParts.first { $0["device_id"] as? String == microphone })
            let whole = try #require(revokedParts.first { $0["device_id"] as? String == camera })
            print("revoked mid-take: microphone \(cut["frames"] ?? 0) blocks (\(cut["state"] ?? "?")), camera \(whole["frames"] ?? 0) frames")
            #expect((cut["frames"] as? Int ?? 0) < 220 && (cut["frames"] as? Int ?? 0) > 50, "\(cut)")
            #expect((whole["frames"] as? Int ?? 0) > 25, "\(whole)")

            // Revoked: silence again from the next second on.
            try await fleet.waitUntil("the microphone is silent again", seconds: 10) {
                try Self.levels(fleet, microphone)?.allSatisfy { $0["peak_dbfs"] as? Double == -120 } == true
            }
        }
    }
}
