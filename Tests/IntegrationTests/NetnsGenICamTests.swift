import FleetTestSupport
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

extension SecondLaneIntegrationTests {
    /// GenICam cameras on namespace hosts (issue "industrial GenICam cameras"): each agent host
    /// has Aravis's fake GigE Vision camera on a link of its own, speaking the real GVCP/GVSP
    /// protocol. The agents find them on the interface they were told to use, register them
    /// under ids from vendor, model and serial, list their formats, send black frames until
    /// consent and real ones after, and a take records both on the agents, collected and verified;
    /// another encodes them to H.264 there; previews and detection work as for any camera; a
    /// region of interest moves the window of the sensor the frames show.
    @Suite struct NetnsGenICamTests {
        @Test func fakeGigEVisionCamerasOnTwoHosts_registerStreamAndRecord() async throws {
            guard getuid() == 0 else {
                print("netns GenICam: not run, network namespaces need root (CI runs as root)")
                return
            }
            let fleet = NetnsTestFleet(prefix: "cfg\(getpid() % 10_000)")
            defer { fleet.down() }
            try fleet.run([
                "up", "--agents", "2", "--bin", FleetHarness.binary, "--genicam-sensor-pattern", "--agent-args",
                "--synthetic 0 --fps 10 --no-pressure",
            ])
            var devices: [[String: Any]] = []
            _ = try await NetnsTestFleet.waitUntil("both cameras register", seconds: 30) {
                devices = try fleet.json(["devices"]).filter { $0["kind"] as? String == "genicam" }
                return devices.count == 2
            }
            let ids = devices.compactMap { $0["device_id"] as? String }.sorted()
            #expect(ids == ["genicam-Aravis-Fake-CF_a1", "genicam-Aravis-Fake-CF_a2"], "\(devices)")
            let formats = try fleet.json(["formats", ids[0]])
            let labels = formats.map { "\($0["pixel_format"] ?? "?") \($0["width"] ?? 0)x\($0["height"] ?? 0)" }
            print("netns GenICam: \(ids[0]) offers \(labels)")
            #expect(labels.first == "GREY 512x512", "the size the camera boots with comes first: \(labels)")
            #expect(labels.contains("GREY 2048x2048") && labels.contains("Y16 512x512"), "\(labels)")
            // Centred windows of the sensor (its region of interest), after its own sizes.
            #expect(
                Array(labels.prefix(6)) == ["GREY 512x512", "GREY 2048x2048", "GREY 1024x1024", "GREY 1920x1080", "GREY 1280x720", "GREY 640x480"])
            // Its gain and automatic gain, under V4L2's ids for them (Aravis's fake camera has GainRaw).
            let described = try #require(
                try JSONSerialization.jsonObject(with: Data(try fleet.run(["cli", "device", ids[0], "--json"]).utf8)) as? [String: Any])
            let controls = described["controls"] as? [[String: Any]] ?? []
            print("netns GenICam: \(ids[0]) controls \(controls.map { "\($0["key"] ?? "?")=\($0["value"] ?? "-")" })")
            let gain = controls.first { $0["id"] as? Int == 0x0098_0913 }
            #expect(gain?["name"] as? String == "Gain (raw)" && gain?["maximum"] as? Int == 10, "\(controls)")
            let automaticGain = controls.first { $0["id"] as? Int == 0x0098_0912 }
            #expect(automaticGain?["type"] as? String == "menu" && (automaticGain?["menu"] as? [String: Any])?["Continuous"] != nil, "\(controls)")
            // Set under the lease, on the camera itself (GVCP register writes), read back and shown.
            #expect(throws: (any Error).self) { try fleet.run(["cli", "control", ids[0], "gain_raw", "5"]) }
            try fleet.run(["cli", "lock", ids[0]])
            let set = try #require(
                try JSONSerialization.jsonObject(with: Data(try fleet.run(["cli", "control", ids[0], "gain_raw", "5", "--json"]).utf8))
                    as? [String: Any])
            #expect(set["value"] as? Int == 5, "\(set)")
            let menu = try fleet.run(["cli", "control", ids[0], "gain_automatic", "continuous"])
            #expect(menu.contains("Gain, Automatic = 2 (Continuous)"), "\(menu)")
            let redescribed = try #require(
                try JSONSerialization.jsonObject(with: Data(try fleet.run(["cli", "device", ids[0], "--json"]).utf8)) as? [String: Any])
            let values = (redescribed["controls"] as? [[String: Any]] ?? []).map { "\($0["key"] ?? "?")=\($0["value"] ?? "-")" }
            #expect(values == ["gain_raw=5", "gain_automatic=2"], "\(values)")
            try fleet.run(["cli", "unlock", ids[0]])
            _ = try await NetnsTestFleet.waitUntil("both clocks lock", seconds: 30) {
                let clocks = try fleet.json(["clock"])
                return clocks.count == 2 && clocks.allSatisfy { $0["sync"] as? String == "locked" }
            }
            // Black until consent is granted, the camera's pixels after.
            let before = try #require(
                try JSONSerialization.jsonObject(with: Data(try fleet.run(["cli", "snapshot", ids[0], "--json"]).utf8)) as? [String: Any])
            #expect(before["black"] as? Bool == true && before["pixel_format"] as? String == "GREY", "\(before)")
            for device in ids { try fleet.run(["cli", "consent", "grant", device, "--reason", "genicam test"]) }
            var after: [String: Any] = [:]
            _ = try await NetnsTestFleet.waitUntil("real frames after consent", seconds: 10) {
                after =
                    try JSONSerialization.jsonObject(with: Data(try fleet.run(["cli", "snapshot", ids[0], "--json"]).utf8)) as? [String: Any] ?? [:]
                return after["black"] as? Bool == false
            }
            #expect(after["width"] as? Int == 512 && after["fleet_time_ns"] is Int, "\(after)")

            let started = try fleet.run(["cli", "record", "start"] + ids + ["--name", "genicam", "--json", "--timeout", "15"])
            let take = try #require(try JSONSerialization.jsonObject(with: Data(started.utf8)) as? [String: Any], "\(started)")
            let takeID = try #require(take["id"] as? String)
            try await Task.sleep(for: .seconds(4))
            try fleet.run(["cli", "record", "stop", takeID, "--wait", "60", "--timeout", "70"])
            let collected = try fleet.run(["cli", "recordings", "collect", takeID, "--timeout", "120"])
            print("netns GenICam: \(collected.trimmingCharacters(in: .whitespacesAndNewlines))")
            let shownText = try fleet.run(["cli", "recordings", "show", takeID, "--json"])
            let shown = try #require(try JSONSerialization.jsonObject(with: Data(shownText.utf8)) as? [String: Any], "\(shownText)")
            for part in try #require(shown["devices"] as? [[String: Any]]) {
                let frames = part["frames"] as? Int ?? 0
                print("netns GenICam: \(part["device_id"] ?? "?") recorded \(frames) frames, \(part["format"] ?? "?"), drops \(part["drops"] ?? [:])")
                #expect(frames >= 25, "about 4 s at 10 fps: \(part)")
                #expect(part["format"] as? String == "512x512 GREY", "\(part)")
            }
            let verified = try fleet.run(["cli", "recordings", "verify", takeID, "--timeout", "120"])
            #expect(verified.contains("verified"), "\(verified)")
            // Encoded on the agents, as any camera's; previews; detection examines its frames.
            try fleet.run(["cli", "lock", ids[1]])
            try fleet.run(["cli", "detect", ids[1], "--codes", "qr", "--faces"])
            let encodedStart = try fleet.run(
                ["cli", "record", "start"] + ids + ["--name", "genicam h264", "--codec", "h264", "--json", "--timeout", "15"])
            let encodedID = try #require((try JSONSerialization.jsonObject(with: Data(encodedStart.utf8)) as? [String: Any])?["id"] as? String)
            try await Task.sleep(for: .seconds(3))
            try fleet.run(["cli", "record", "stop", encodedID, "--wait", "60", "--timeout", "70"])
            let encoded = try #require(
                try JSONSerialization.jsonObject(with: Data(try fleet.run(["cli", "recordings", "show", encodedID, "--json"]).utf8)) as? [String: Any]
            )
            for part in encoded["devices"] as? [[String: Any]] ?? [] {
                #expect(part["format"] as? String == "512x512 H264" && (part["frames"] as? Int ?? 0) >= 20, "\(part)")
            }
            let preview = try #require(
                try JSONSerialization.jsonObject(with: Data(try fleet.run(["cli", "snapshot", ids[1], "--preview", "--json"]).utf8)) as? [String: Any]
            )
            #expect(preview["preview"] as? Bool == true && (preview["width"] as? Int ?? 0) > 0, "\(preview)")
            let examined =
                try fleet.json(["watch", "--count", "1"]).first { $0["device_id"] as? String == ids[1] }?["detection_examined"] as? Int ?? 0
            #expect(examined > 0, "detection examined none of \(ids[1])'s frames")
            try fleet.run(["cli", "detect", ids[1], "--off"])
            try fleet.run(["cli", "unlock", ids[1]])

            // Its region of interest: a 640x480 window, centred, then moved; the frames show
            // which part of the sensor it read (the rig paints a grey ramp across the sensor, a
            // black row every 256 rows down).
            func region() throws -> [Int] {
                let text = try fleet.run(["cli", "region", ids[0], "--json"])
                let shown = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] ?? [:]
                return ["left", "top", "width", "height"].map { shown[$0] as? Int ?? -1 }
            }
            /// The next frame's grey level at the left edge, and its black rows.
            func picture() throws -> (left: UInt8, blackRows: [Int]) {
                let path = fleet.data + "/region.raw"
                try fleet.run(["cli", "snapshot", ids[0], "-o", path])
                let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
                guard bytes.count == 640 * 480 else { return (0, []) }
                let black = (0..<480).filter { bytes[$0 * 640 + 5] == 0 }
                let lit = (0..<480).first { !black.contains($0) } ?? 0
                return (bytes[lit * 640], black)
            }
            #expect(try region() == [0, 0, 512, 512], "the boot region, where the camera had it")
            try fleet.run(["cli", "lock", ids[0]])
            try fleet.run(["cli", "format", ids[0], "--size", "640x480", "--pixel-format", "GREY"])
            _ = try await NetnsTestFleet.waitUntil("the 640x480 window is reported", seconds: 15) { try region() == [704, 784, 640, 480] }
            let centred = try picture()
            // Sensor column 704 is grey 48 + 704 × 160 / 2047; sensor row 1024 is the window's 240th.
            #expect(centred.left == 103 && centred.blackRows == [240], "\(centred)")
            let moved = try fleet.run(["cli", "region", ids[0], "--at", "100,200"])
            #expect(moved.contains("640x480 at 100,200 of the 2048x2048 sensor"), "\(moved)")
            let atCorner = try picture()
            #expect(atCorner.left == 55 && atCorner.blackRows == [56, 312], "\(atCorner)")
            do {
                _ = try fleet.run(["cli", "region", ids[0], "--at", "1500,0"])
                Issue.record("a window past the sensor's edge was placed")
            } catch {
                #expect("\(error)".contains("its corner can go from 0,0 to 1408,1568"), "\(error)")
            }
            print("netns GenICam: region moved: \(moved.trimmingCharacters(in: .whitespacesAndNewlines))")

            // Unplugged: host 1's camera link goes down. The agent reports the camera gone, and
            // once the link is back it opens the camera again and streams by itself.
            func interruption() throws -> String? {
                let text = try fleet.run(["cli", "device", ids[0], "--json"])
                let info = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]
                return ((info?["device"] as? [String: Any])?["interruption"] as? [String: Any])?["reason"] as? String
            }
            func frames() throws -> Int {
                try fleet.json(["watch", "--count", "1"]).first { $0["device_id"] as? String == ids[0] }?["frames_captured"] as? Int ?? 0
            }
            try Self.link(of: "\(fleet.prefix)-g1", up: false)
            let gone = try await NetnsTestFleet.waitUntil("the unplugged camera is reported gone", seconds: 30) {
                try interruption() == "device_disconnected"
            }
            print("netns GenICam: \(ids[0]) reported gone \(String(format: "%.1f", gone)) s after its link went down")
            try Self.link(of: "\(fleet.prefix)-g1", up: true)
            let counted = try frames()
            let back = try await NetnsTestFleet.waitUntil("the camera streams again", seconds: 40) {
                try interruption() == nil && frames() > counted + 10
            }
            print("netns GenICam: \(ids[0]) streams again \(String(format: "%.1f", back)) s after its link came back")
            // Opened again where it was: the same window of the sensor.
            #expect(try region() == [100, 200, 640, 480])
            let returned = try picture()
            #expect(returned.left == 55 && returned.blackRows == [56, 312], "\(returned)")
            try fleet.run(["cli", "unlock", ids[0]])
        }

        /// Three agent hosts, each with a fake GigE Vision camera (`rig`: the test bed's camera
        /// options), their clocks locked, the cameras' consent granted and their leases taken:
        /// the cameras' ids in order.
        static func threeCameras(_ fleet: NetnsTestFleet, _ rig: [String], reason: String) async throws -> [String] {
            try fleet.run(["up", "--agents", "3", "--bin", FleetHarness.binary] + rig + ["--agent-args", "--synthetic 0 --fps 10 --no-pressure"])
            var ids: [String] = []
            _ = try await NetnsTestFleet.waitUntil("three cameras register and three clocks lock", seconds: 40) {
                ids = try fleet.json(["devices"]).filter { $0["kind"] as? String == "genicam" }.compactMap { $0["device_id"] as? String }.sorted()
                let clocks = try fleet.json(["clock"])
                return ids.count == 3 && clocks.count == 3 && clocks.allSatisfy { $0["sync"] as? String == "locked" }
            }
            for device in ids {
                try fleet.run(["cli", "consent", "grant", device, "--reason", reason])
                try fleet.run(["cli", "lock", device])
            }
            return ids
        }

        /// The cameras' statuses now (`capfleet watch --json`), by id.
        static func statuses(_ fleet: NetnsTestFleet, _ ids: [String]) throws -> [String: [String: Any]] {
            var byID: [String: [String: Any]] = [:]
            for status in try fleet.json(["watch", "--count", "1"]) {
                if let id = status["device_id"] as? String, ids.contains(id) { byID[id] = status }
            }
            return byID
        }

        /// At most one slot in fifty missed (a trigger thread woken too late), counted.
        static func fewMissed(_ triggers: [String: Any]) -> Bool {
            guard let missed = triggers["missed"] as? Int, let fired = triggers["fired"] as? Int else { return false }
            return missed * 50 <= fired
        }

        /// A status's trigger figures (`alignment.triggers`), empty when it has none.
        static func triggers(_ status: [String: Any]?) -> [String: Any] {
            (status?["alignment"] as? [String: Any])?["triggers"] as? [String: Any] ?? [:]
        }

        /// The camera end of a namespace host's camera link (`eth0` in namespace `namespace`), down or up.
        static func link(of namespace: String, up: Bool) throws {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["ip", "-n", namespace, "link", "set", "eth0", up ? "up" : "down"]
            try process.run()
            process.waitUntilExit()
            #expect(process.terminationStatus == 0, "ip -n \(namespace) link set eth0 \(up ? "up" : "down")")
        }

        /// Exposures on the grid (clock.md, "Triggered cameras"): three hosts' GigE Vision
        /// cameras put in software-trigger mode by `capfleet align`, each agent firing a
        /// trigger at every slot; every trigger gives exactly one frame, the three cameras'
        /// frames fall in the same slots, and `align --off` lets them run free again. Each camera
        /// draws its frames' timecodes, and exposure audits measure what the cameras saw: the
        /// triggered cameras' stamps, placed by the triggers sent, within the triggers' latency.
        @Test func threeHostsCameras_triggeredOnTheGrid_exposeOncePerTrigger_andRunFreeAgainWhenAskedOff() async throws {
            guard getuid() == 0 else {
                print("netns GenICam trigger: not run, network namespaces need root (CI runs as root)")
                return
            }
            let fleet = NetnsTestFleet(prefix: "cft\(getpid() % 10_000)")
            defer { fleet.down() }
            let ids = try await Self.threeCameras(fleet, ["--genicam-timecode"], reason: "trigger test")
            func cameras() throws -> [String: [String: Any]] { try Self.statuses(fleet, ids) }
            let triggers = Self.triggers
            /// Each camera's first frame at or after an instant halfway between two slots of the
            /// 10 fps grid (whole seconds on): a camera exposing a slot some milliseconds late, as a
            /// loaded host's fake camera does, is still first after it with that slot, not the next.
            /// Fleet time is this machine's clock (the namespaces share its kernel).
            func spread() throws -> (spread: Int, entries: [[String: Any]]) {
                let now = UInt64(Date().timeIntervalSince1970 * 1e9)
                let instant = (now / 1_000_000_000 + 2) * 1_000_000_000 + 50_000_000
                let checked = try #require(
                    try JSONSerialization.jsonObject(
                        with: Data(try fleet.run(["cli", "sync-check"] + ids + ["--at", String(instant), "--json"]).utf8)) as? [String: Any])
                return (checked["spread_ns"] as? Int ?? -1, checked["entries"] as? [[String: Any]] ?? [])
            }
            _ = try await NetnsTestFleet.waitUntil("frames flow from all three", seconds: 20) {
                try cameras().values.filter { ($0["frames_captured"] as? Int ?? 0) > 10 }.count == 3
            }
            let free = try spread()
            print("netns GenICam trigger: free-running, the first frames after an instant spread over \(Double(free.spread) / 1e6) ms")
            func audit(_ label: String) throws -> [String: Int] {
                let text = try fleet.run(["cli", "sync-audit"] + ids + ["--seconds", "3", "--json"])
                let result = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "\(text)")
                var offsets: [String: Int] = [:]
                for camera in result["cameras"] as? [[String: Any]] ?? [] {
                    let id = camera["device_id"] as? String ?? "?"
                    let offset = camera["stamp_offset"] as? [String: Any] ?? [:]
                    print(
                        "netns GenICam audit, \(label): \(id) read \(camera["frames_read"] ?? "?")/\(camera["frames_seen"] ?? "?"), stamp offset median \(offset["median_ns"] ?? "?") ns (±\(camera["stamp_uncertainty_ns"] ?? "?")), |phase| \(camera["true_phase"] ?? "?")"
                    )
                    #expect((camera["frames_read"] as? Int ?? 0) >= 10, "\(label): \(camera)")
                    offsets[id] = offset["median_ns"] as? Int
                }
                print("netns GenICam audit, \(label): exposure spread \(result["exposure_spread"] ?? "?")")
                #expect(offsets.count == 3, "\(label): \(text)")
                return offsets
            }
            // Free-running, a frame is placed by its arrival: the exposure, the readout and the
            // transfer before it are in its stamp, give or take what the arrivals' line misses
            // on this starved host (printed: milliseconds either way).
            _ = try audit("free-running")

            let aligned = try fleet.run(["cli", "align"] + ids)
            print("netns GenICam trigger: \(aligned.trimmingCharacters(in: .whitespacesAndNewlines))")
            var statuses: [String: [String: Any]] = [:]
            _ = try await NetnsTestFleet.waitUntil("each agent triggers its camera", seconds: 30) {
                statuses = try cameras()
                return statuses.count == 3
                    && statuses.values.allSatisfy {
                        ($0["alignment"] as? [String: Any])?["triggered"] as? Bool == true && (triggers($0)["fired"] as? Int ?? 0) >= 20
                    }
            }
            // One frame per trigger: over a few seconds, as many frames as triggers, give or
            // take the one in flight at each end.
            try await Task.sleep(for: .seconds(3))
            let later = try cameras()
            for id in ids {
                let frames = (later[id]?["frames_captured"] as? Int ?? 0) - (statuses[id]?["frames_captured"] as? Int ?? 0)
                let fired = (triggers(later[id])["fired"] as? Int ?? 0) - (triggers(statuses[id])["fired"] as? Int ?? 0)
                let alignment = later[id]?["alignment"] as? [String: Any] ?? [:]
                print(
                    "netns GenICam trigger: \(id): \(fired) triggers, \(frames) frames; \(alignment["state"] ?? "?"), triggers \(triggers(later[id]))"
                )
                #expect(fired >= 20 && abs(frames - fired) <= 2, "\(id): \(frames) frames for \(fired) triggers")
                #expect(Self.fewMissed(triggers(later[id])) && triggers(later[id])["error"] == nil, "\(triggers(later[id]))")
                #expect(alignment["steered"] as? Bool == false)
            }
            // The three cameras' first frames after an instant are of one slot (10 fps: 100 ms apart):
            // the median of three instants, as a loaded host's fake camera now and then exposes a
            // slot more than half an interval late (its sync-audit below judges every frame).
            let triggered = try [spread(), spread(), spread()].sorted { $0.spread < $1.spread }[1]
            print("netns GenICam trigger: triggered, the first frames after an instant spread over \(Double(triggered.spread) / 1e6) ms")
            #expect(triggered.entries.count == 3 && triggered.entries.allSatisfy { $0["ok"] as? Bool == true }, "\(triggered.entries)")
            #expect(triggered.spread >= 0 && triggered.spread < 25_000_000, "within a quarter of an interval: \(triggered.spread) ns")
            // Triggered, a frame is placed by the trigger sent before it: what it saw is within
            // the trigger's shortest latency of its stamp (tens of µs here), not milliseconds.
            for (id, offset) in try audit("triggered") { #expect(abs(offset) < 500_000, "\(id): stamped \(offset) ns from what it saw") }

            // A bracketed still of the three triggered cameras: one picture per exposure, each
            // at its ExposureTime (the camera's 10 ms, halved and doubled), stored at the coordinator.
            let stillText = try fleet.run(
                ["cli", "still"] + ids + ["--size", "512x512", "--bracket=-1,0,1", "--json", "--timeout", "60", "-o", fleet.data + "/stills"])
            let still = try #require(
                (try JSONSerialization.jsonObject(with: Data(stillText.utf8)) as? [String: Any])?["still"] as? [String: Any], "\(stillText)")
            let stillCameras = still["cameras"] as? [[String: Any]] ?? []
            #expect(stillCameras.count == 3, "\(stillText)")
            for camera in stillCameras {
                let pictures = camera["pictures"] as? [[String: Any]] ?? []
                #expect(camera["state"] as? String == "stored" && pictures.count == 3, "\(camera)")
                #expect(pictures.map { $0["ev"] as? Int } == [-1, 0, 1] && pictures.allSatisfy { $0["stored"] as? Bool == true }, "\(pictures)")
            }

            // Off: free-running again, frames still flowing, nothing triggered.
            try fleet.run(["cli", "align", "--off"] + ids)
            let off = try cameras()
            try await Task.sleep(for: .seconds(2))
            let afterOff = try cameras()
            for id in ids {
                #expect((afterOff[id]?["alignment"] as? [String: Any])?["triggered"] as? Bool != true, "\(afterOff[id] ?? [:])")
                let frames = (afterOff[id]?["frames_captured"] as? Int ?? 0) - (off[id]?["frames_captured"] as? Int ?? 0)
                #expect(frames >= 10, "\(id) runs free at 10 fps again: \(frames) frames in 2 s")
            }
        }

        /// Scheduled action commands (clock.md, "Scheduled action commands"): three hosts'
        /// cameras are locked PTP slaves that take GigE Vision action commands, and the hosts'
        /// clocks keep their PTP time (one kernel clock, as PTP does for real). Their frames are
        /// placed by the host's clock even free-running; `capfleet align` has each agent send a
        /// command ahead of every slot with the slot's time on the camera's clock, and each
        /// camera exposes at that time: one frame per command, the three cameras' stamps on the
        /// same instants, and what the cameras saw (their timecodes) where they were stamped.
        @Test func threePTPCameras_scheduledActionCommands_exposeAtTheirSlotsTime() async throws {
            guard getuid() == 0 else {
                print("netns GenICam actions: not run, network namespaces need root (CI runs as root)")
                return
            }
            let fleet = NetnsTestFleet(prefix: "cfa\(getpid() % 10_000)")
            defer { fleet.down() }
            let ids = try await Self.threeCameras(fleet, ["--genicam-ptp", "--genicam-timecode"], reason: "action command test")
            func cameras() throws -> [String: [String: Any]] { try Self.statuses(fleet, ids) }
            func transport(_ status: [String: Any]?) -> [String: Any] { status?["stream_transport"] as? [String: Any] ?? [:] }
            let triggers = Self.triggers
            // Free-running, placed by the host's clock once two seconds of frames show it keeps the cameras' time.
            var statuses: [String: [String: Any]] = [:]
            _ = try await NetnsTestFleet.waitUntil("the host's clock places each camera's frames", seconds: 30) {
                statuses = try cameras()
                return statuses.count == 3 && statuses.values.allSatisfy { transport($0)["clock_placement"] as? String == "ptp" }
            }
            for id in ids {
                let ptp = transport(statuses[id])["ptp"] as? [String: Any] ?? [:]
                print("netns GenICam actions: \(id) free-running, PTP \(ptp)")
                #expect(ptp["status"] as? String == "Slave" && ptp["timescale_offset_ns"] as? Int == 0, "\(ptp)")
                let residual = ptp["residual_ns"] as? Int ?? -1
                #expect(residual >= 0 && residual < 1_000_000_000, "frames arrive after their exposure: \(ptp)")
            }
            func audit(_ label: String) throws {
                let text = try fleet.run(["cli", "sync-audit"] + ids + ["--seconds", "3", "--json"])
                let result = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "\(text)")
                let audited = result["cameras"] as? [[String: Any]] ?? []
                #expect(audited.count == 3, "\(label): \(text)")
                for camera in audited {
                    let offset = (camera["stamp_offset"] as? [String: Any])?["median_ns"] as? Int
                    print(
                        "netns GenICam actions audit, \(label): \(camera["device_id"] ?? "?") read \(camera["frames_read"] ?? "?")/\(camera["frames_seen"] ?? "?"), stamp offset median \(offset.map(String.init) ?? "?") ns, |phase| \(camera["true_phase"] ?? "?")"
                    )
                    #expect((camera["frames_read"] as? Int ?? 0) >= 10, "\(label): \(camera)")
                    // Placed by its own exposure time rather than its arrival: no transfer in the stamp.
                    #expect(offset.map { abs($0) < 500_000 } == true, "\(label): \(camera)")
                }
                print("netns GenICam actions audit, \(label): exposure spread \(result["exposure_spread"] ?? "?")")
            }
            try audit("free-running")

            let aligned = try fleet.run(["cli", "align"] + ids)
            print("netns GenICam actions: \(aligned.trimmingCharacters(in: .whitespacesAndNewlines))")
            _ = try await NetnsTestFleet.waitUntil("each agent sends its camera scheduled action commands", seconds: 30) {
                statuses = try cameras()
                return statuses.count == 3
                    && statuses.values.allSatisfy {
                        triggers($0)["delivery"] as? String == "scheduled_action" && (triggers($0)["fired"] as? Int ?? 0) >= 20
                    }
            }
            try await Task.sleep(for: .seconds(3))
            let later = try cameras()
            for id in ids {
                let frames = (later[id]?["frames_captured"] as? Int ?? 0) - (statuses[id]?["frames_captured"] as? Int ?? 0)
                let sent = (triggers(later[id])["fired"] as? Int ?? 0) - (triggers(statuses[id])["fired"] as? Int ?? 0)
                let alignment = later[id]?["alignment"] as? [String: Any] ?? [:]
                print("netns GenICam actions: \(id): \(sent) commands, \(frames) frames; \(alignment["state"] ?? "?"), \(triggers(later[id]))")
                #expect(sent >= 20 && abs(frames - sent) <= 2, "\(id): \(frames) frames for \(sent) commands")
                // A loaded two-core host's trigger thread may wake too late for a slot now and then:
                // it is counted, and must stay rare.
                #expect(
                    Self.fewMissed(triggers(later[id])) && triggers(later[id])["action_unavailable_reason"] == nil, "\(triggers(later[id]))")
                #expect(alignment["state"] as? String == "aligned", "\(alignment)")
                // The camera's stamps are the slots' own instants: the phase is the clocks' error alone.
                let phase = alignment["phase"] as? [String: Any] ?? [:]
                #expect((phase["median_ns"] as? Int ?? .max) < 200_000, "\(alignment)")
            }
            let checked = try #require(
                try JSONSerialization.jsonObject(with: Data(try fleet.run(["cli", "sync-check"] + ids + ["--json"]).utf8)) as? [String: Any])
            let spread = checked["spread_ns"] as? Int ?? -1
            print("netns GenICam actions: the first frames after an instant spread over \(Double(spread) / 1e6) ms")
            #expect(spread >= 0 && spread < 1_000_000, "the same instants on all three: \(checked)")
            try audit("scheduled actions")

            try fleet.run(["cli", "align", "--off"] + ids)
            let off = try cameras()
            try await Task.sleep(for: .seconds(2))
            let afterOff = try cameras()
            for id in ids {
                let frames = (afterOff[id]?["frames_captured"] as? Int ?? 0) - (off[id]?["frames_captured"] as? Int ?? 0)
                #expect(frames >= 10, "\(id) runs free at 10 fps again: \(frames) frames in 2 s")
            }
        }

        /// Hardware-line triggers (clock.md, "Hardware-line triggers"): three hosts' cameras on
        /// one trigger wire. `align --trigger-line Line0 --line-source` camera 1: camera 1 is
        /// aligned as usual (scheduled action commands: the rig's cameras are PTP-locked) and
        /// drives Line1 with its exposure signal; cameras 2 and 3 expose on their Line0's edges,
        /// one frame per edge, with nothing sent by their agents, and what they saw is camera
        /// 1's instants, and a take says how each camera's exposures were timed. Then an external
        /// generator on the wire (`--line-source external`): every camera follows its pulses, at
        /// 10 Hz, at 5 Hz, and exposes nothing once it is off. `align --off` lets every camera run
        /// free again.
        @Test func wiredCameras_exposeOnTheSourceCamerasEdges() async throws {
            guard getuid() == 0 else {
                print("netns GenICam lines: not run, network namespaces need root (CI runs as root)")
                return
            }
            let fleet = NetnsTestFleet(prefix: "cfw\(getpid() % 10_000)")
            defer { fleet.down() }
            let ids = try await Self.threeCameras(fleet, ["--genicam-line", "--genicam-ptp", "--genicam-timecode"], reason: "trigger line test")
            func cameras() throws -> [String: [String: Any]] { try Self.statuses(fleet, ids) }
            func alignment(_ status: [String: Any]?) -> [String: Any] { status?["alignment"] as? [String: Any] ?? [:] }
            let triggers = Self.triggers
            /// Each camera's frame rate over three seconds: frames captured between two statuses,
            /// over the time between the frames each status last saw. A one-second count swings
            /// by a frame or two when a busy host delivers a camera's frames in bursts.
            func rates() async throws -> [String: Double] {
                func counts() throws -> [String: (frames: Double, ms: Double)] {
                    try cameras().mapValues {
                        (Double($0["frames_captured"] as? Int ?? 0), Double($0["last_frame_unix_ms"] as? Int ?? 0))
                    }
                }
                let first = try counts()
                try await Task.sleep(for: .seconds(3))
                let second = try counts()
                var rates: [String: Double] = [:]
                for (id, end) in second {
                    guard let start = first[id], end.ms > start.ms else { rates[id] = 0; continue }
                    rates[id] = (end.frames - start.frames) / ((end.ms - start.ms) / 1000)
                }
                return rates
            }
            // Refused before anything is sent: a source camera not among those named.
            #expect(throws: (any Error).self) { try fleet.run(["cli", "align", ids[1], ids[2], "--trigger-line", "Line0", "--line-source", ids[0]]) }

            let source = ids[0]
            print("netns GenICam lines: " + (try fleet.run(["cli", "align"] + ids + ["--trigger-line", "Line0", "--line-source", source])))
            var statuses: [String: [String: Any]] = [:]
            _ = try await NetnsTestFleet.waitUntil("the source is triggered and the wired cameras expose on its edges", seconds: 30) {
                statuses = try cameras()
                return statuses.count == 3 && (triggers(statuses[source])["fired"] as? Int ?? 0) >= 20
                    && ids.dropFirst().allSatisfy { triggers(statuses[$0])["delivery"] as? String == "hardware_line" }
            }
            try await Task.sleep(for: .seconds(1))
            let rated = try await rates()
            let later = try cameras()
            #expect(alignment(later[source])["output_line"] as? String == "Line1", "\(alignment(later[source]))")
            #expect(abs((rated[source] ?? 0) - 10) <= 1.5, "the source at 10 fps: \(rated)")
            for id in ids.dropFirst() {
                let wired = alignment(later[id])
                print(
                    "netns GenICam lines: \(id): \(rated[id] ?? 0) fps for the source's \(rated[source] ?? 0); \(wired["state"] ?? "?"), \(triggers(later[id]))"
                )
                // One exposure per edge, at the source's rate (the take below counts them).
                #expect(abs((rated[id] ?? 0) - (rated[source] ?? 0)) <= 1.5, "one exposure per edge: \(rated)")
                #expect(triggers(later[id])["trigger_line"] as? String == "Line0" && triggers(later[id])["line_source"] as? String == source)
                #expect(triggers(later[id])["fired"] as? Int == 0, "the agent sends nothing: \(triggers(later[id]))")
                #expect(wired["state"] as? String == "aligned", "\(wired)")
            }
            // What the wired cameras saw is the source's instants.
            let text = try fleet.run(["cli", "sync-audit"] + ids + ["--seconds", "3", "--json"])
            let audit = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "\(text)")
            let spread = (audit["exposure_spread"] as? [String: Any])?["median_ns"] as? Int ?? -1
            print("netns GenICam lines: exposure spread by what the cameras saw \(audit["exposure_spread"] ?? "?")")
            #expect((audit["cameras"] as? [[String: Any]] ?? []).count == 3 && spread >= 0 && spread < 500_000, "\(text)")
            // A take says how each camera's exposures were timed.
            let started = try fleet.run(["cli", "record", "start"] + ids + ["--name", "wired", "--json", "--timeout", "15"])
            let takeID = try #require((try JSONSerialization.jsonObject(with: Data(started.utf8)) as? [String: Any])?["id"] as? String, "\(started)")
            try await Task.sleep(for: .seconds(3))
            try fleet.run(["cli", "record", "stop", takeID, "--wait", "60", "--timeout", "70"])
            let shown = try #require(
                try JSONSerialization.jsonObject(with: Data(try fleet.run(["cli", "recordings", "show", takeID, "--json"]).utf8)) as? [String: Any])
            let reported = ((shown["sync_report"] as? [String: Any])?["cameras"] as? [[String: Any]] ?? []).reduce(into: [String: String]()) {
                $0[$1["device_id"] as? String ?? "?"] = $1["exposure_timing"] as? String
            }
            print("netns GenICam lines: the take's exposures timed by \(reported)")
            // One exposure per edge: the same frames in the take from each camera, give or take the one at each end.
            let recorded = (shown["devices"] as? [[String: Any]] ?? []).reduce(into: [String: Int]()) {
                $0[$1["device_id"] as? String ?? "?"] = $1["frames"] as? Int
            }
            print("netns GenICam lines: the take's frames \(recorded)")
            let sourceRecorded = recorded[source] ?? 0
            #expect(sourceRecorded >= 15, "\(recorded)")
            // Never an exposure without an edge (one at each end aside), and the edges followed.
            // How many the rig's fake cameras miss is the test bed's speed, not the fleet's: a
            // wired camera busy painting its last frame in Python merges the next edge into it
            // (as a camera exposing ignores a second trigger), 10 % of them on a loaded CI
            // machine before a take and up to 37 % in one (17 and 22 frames for the source's 27).
            for id in ids.dropFirst() {
                let frames = recorded[id] ?? 0
                #expect(frames <= sourceRecorded + 1 && frames * 2 >= sourceRecorded, "\(id) against the source's edges: \(recorded)")
            }
            #expect(reported[source] == "scheduled action commands", "\(reported)")
            for id in ids.dropFirst() { #expect(reported[id] == "Line0 from \(source)", "\(reported)") }

            // An external generator on the wire (`--line-source external`): every camera exposes on
            // its pulses, at its rate, reported unaligned (the generator keeps a time of its own),
            // and nothing without them.
            try fleet.run(["generator", "10"])
            print("netns GenICam lines: " + (try fleet.run(["cli", "align"] + ids + ["--trigger-line", "Line0", "--line-source", "external"])))
            func frames(over seconds: Int) async throws -> [String: Int] {
                let before = try cameras()
                try await Task.sleep(for: .seconds(seconds))
                let after = try cameras()
                return ids.reduce(into: [:]) {
                    $0[$1] = (after[$1]?["frames_captured"] as? Int ?? 0) - (before[$1]?["frames_captured"] as? Int ?? 0)
                }
            }
            _ = try await NetnsTestFleet.waitUntil("every camera exposes on the generator's pulses", seconds: 20) {
                let now = try cameras()
                return ids.allSatisfy {
                    triggers(now[$0])["line_source"] as? String == "external" && triggers(now[$0])["delivery"] as? String == "hardware_line"
                }
            }
            try await Task.sleep(for: .seconds(1.5))
            let pulsed = try await rates()
            let external = try cameras()
            for (index, id) in ids.enumerated() where (pulsed[id] ?? 0) == 0 || external[id]?["alignment"] == nil {
                // A camera that stopped here once on a loaded CI machine: what its host said.
                for name in ["agent-a\(index + 1)", "genicam-a\(index + 1)"] {
                    let tail = ((try? fleet.log(name)) ?? "").split(separator: "\n").suffix(40).joined(separator: "\n")
                    print("netns GenICam lines: \(id) stopped on the generator; \(name) logged last:\n\(tail)")
                }
            }
            print("netns GenICam lines: on a 10 Hz generator: \(pulsed) fps; \(alignment(external[ids[0]]))")
            for id in ids {
                #expect(abs((pulsed[id] ?? 0) - 10) <= 2, "\(id) at the generator's 10 Hz: \(pulsed)")
                #expect(alignment(external[id])["state"] as? String == "unaligned", "\(alignment(external[id]))")
                #expect("\(alignment(external[id])["not_aligned_reason"] ?? "")".contains("external generator"), "\(alignment(external[id]))")
            }
            // Each agent reports its counts once a second: the old rate has left them after 2.5 s.
            try fleet.run(["generator", "5"])
            try await Task.sleep(for: .seconds(2.5))
            let slower = try await rates()
            // A reading is whole frames over about a second, and a fake camera misses an edge now and then.
            for id in ids { #expect(abs((slower[id] ?? 0) - 5) <= 1.5, "\(id) follows the generator to 5 Hz: \(slower)") }
            try fleet.run(["generator", "off"])
            try await Task.sleep(for: .seconds(2.5))
            let unpulsed = try await frames(over: 2)
            print("netns GenICam lines: at 5 Hz: \(slower) fps; generator off, 2 s: \(unpulsed) frames")
            for id in ids { #expect(unpulsed[id] == 0, "no pulse, no exposure: \(unpulsed)") }
            try fleet.run(["cli", "align", "--off"] + ids)
            // Idle cameras: their counts move once trigger mode is off and a status has said so.
            try await Task.sleep(for: .seconds(1.5))
            let off = try cameras()
            try await Task.sleep(for: .seconds(2))
            let afterOff = try cameras()
            for id in ids {
                let frames = (afterOff[id]?["frames_captured"] as? Int ?? 0) - (off[id]?["frames_captured"] as? Int ?? 0)
                #expect(frames >= 10, "\(id) runs free at 10 fps again: \(frames) frames in 2 s")
            }
        }

        /// A GigE Vision link that loses packets (the fake camera drops 3 in a thousand and
        /// resends none): frames it could not complete are counted by the stream, never
        /// delivered, and show as discontinuity drops; the rest flow.
        @Test func aLossyGigEVisionLink_countsIncompleteFramesAndMissingPackets() async throws {
            guard getuid() == 0 else {
                print("netns GenICam loss: not run, network namespaces need root (CI runs as root)")
                return
            }
            let fleet = NetnsTestFleet(prefix: "cfl\(getpid() % 10_000)")
            defer { fleet.down() }
            try fleet.run([
                "up", "--agents", "1", "--bin", FleetHarness.binary, "--genicam-loss", "3", "--agent-args", "--synthetic 0 --fps 10 --no-pressure",
            ])
            var camera: [String: Any] = [:]
            _ = try await NetnsTestFleet.waitUntil("the stream counts lost packets", seconds: 30) {
                camera = try fleet.json(["watch", "--count", "1"]).first { ($0["device_id"] as? String)?.hasPrefix("genicam-") == true } ?? [:]
                let transport = camera["stream_transport"] as? [String: Any] ?? [:]
                return (transport["frames_incomplete"] as? Int ?? 0) >= 3 && (transport["frames_completed"] as? Int ?? 0) >= 10
            }
            let transport = try #require(camera["stream_transport"] as? [String: Any], "\(camera)")
            print("netns GenICam loss: \(transport), drops \(camera["drops"] ?? [:])")
            #expect((transport["packets_missing"] as? Int ?? 0) >= (transport["frames_incomplete"] as? Int ?? 0), "\(transport)")
            // The packet size negotiated on a veth link of MTU 1500, and what that costs, said.
            let packetSize = transport["packet_size"] as? Int ?? 0
            #expect(packetSize > 500 && packetSize <= 1500, "\(transport)")
            #expect((transport["rate_limit"] as? String ?? "").contains("no jumbo frames"), "\(transport)")
            let drops = camera["drops"] as? [String: Any] ?? [:]
            #expect((drops["discontinuity"] as? Int ?? 0) >= 1, "frames the stream gave up on are gaps in sequence: \(camera)")
        }
    }
}
