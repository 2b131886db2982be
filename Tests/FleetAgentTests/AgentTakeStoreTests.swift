import FleetCapture
import FleetCore
import FleetProtocol
import FleetTestSupport
import Foundation
import Logging
import Testing

@testable import FleetAgent

#if canImport(Glibc)
    import Glibc
#endif

/// Takes written on the agent's own disk: real Matroska files and a real manifest in a
/// temporary folder, fed frames the way a capture thread does.
@Suite struct AgentTakeStoreTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("capfleet-agent-takes-\(UUID().uuidString)").path
    let start: UInt64 = 1_000_000_000_000
    let key = TakeDeviceKey(takeID: "take-1", deviceID: "cam-1")

    func store() -> AgentTakeStore {
        var settings = AgentRecordingSettings(directory: directory)
        settings.reserveBytes = 0
        return AgentTakeStore(settings: settings, logger: Logger(label: "test"))
    }

    /// 320x240 YUYV frames at 30 fps from the take's start, sequence 100 on.
    func feed(_ store: AgentTakeStore, frames: Range<Int>, sequenceBase: UInt64 = 100, at firstFleet: UInt64? = nil) {
        for index in frames {
            var header = Capfleet_V1_FrameHeader()
            header.deviceID = "cam-1"
            header.sequence = sequenceBase + UInt64(index)
            header.fleetTimeNs = (firstFleet ?? start) + UInt64(index) * 33_333_333
            header.layout.pixelFormat = "YUYV"
            header.layout.width = 320
            header.layout.height = 240
            let count = 320 * 240 * 2
            let pixels = FrameBuffer(unpooledCapacity: count)
            memset(pixels.storage, Int32(index % 200), count)
            // The writer takes 64 frames ahead: the test waits rather than lose one.
            while !store.submit(takeID: key.takeID, deviceID: key.deviceID, header: header, takeDrops: DropTally(), pixels: pixels, count: count) {
                usleep(1_000)
            }
        }
    }

    func waitUntil(_ condition: () -> Bool) async throws {
        for _ in 0..<500 where !condition() { try await Task.sleep(for: .milliseconds(20)) }
        #expect(condition())
    }

    @Test func aPartWritten_hasItsSegmentsChecksummedInItsManifest_andItsEndNoted() async throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let takes = store()
        #expect(
            try takes.prepare(
                takeID: key.takeID, deviceID: key.deviceID, start: start, segmentSeconds: 1, title: "t — cam-1",
                frameRate: 30, agentInstance: "run-1") == .ready)
        takes.begin(takeID: key.takeID, deviceID: key.deviceID)
        feed(takes, frames: 0..<45)
        takes.end(takeID: key.takeID, deviceID: key.deviceID, takeDrops: DropTally(), reason: "stopped", withholding: false)
        let file = try #require(takes.part(key))
        try await waitUntil { file.current.end != nil && !takes.isWriting(key) }
        let manifest = file.current
        #expect(manifest.end?.reason == "stopped" && manifest.end?.failed == false)
        #expect(manifest.segments.count == 2, "1 s segments over 1.5 s: \(manifest.segments.map(\.number))")
        #expect(manifest.segments.allSatisfy { $0.state == .finished && $0.sha256.count == 64 && !$0.indexed })
        #expect(manifest.segments.map(\.frames).reduce(0, +) == 45)
        #expect(manifest.lastTally?.frames == 45 && manifest.lastTally?.firstSequence == 100 && manifest.lastTally?.lastSequence == 144)
        // The manifest on disk says the same: what a restarted agent reads.
        let saved = try AgentPartManifest.load(path: file.path)
        #expect(saved == manifest)
        await takes.shutdown()
    }

    /// Retention (recordings.md, "Where takes are written"; "Offloading a take"): past
    /// `keepDays`, a segment collected or proved on a storage destination is removed, one
    /// that is only here never is; the manifest on disk says which remain.
    @Test func retention_removesOnlySegmentsSafeElsewhere() async throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let takes = store()
        #expect(
            try takes.prepare(
                takeID: key.takeID, deviceID: key.deviceID, start: start, segmentSeconds: 1, title: "t — cam-1",
                frameRate: 30, agentInstance: "run-1") == .ready)
        takes.begin(takeID: key.takeID, deviceID: key.deviceID)
        feed(takes, frames: 0..<75)
        takes.end(takeID: key.takeID, deviceID: key.deviceID, takeDrops: DropTally(), reason: "stopped", withholding: false)
        let file = try #require(takes.part(key))
        try await waitUntil { file.current.end != nil && !takes.isWriting(key) && file.current.segments.allSatisfy { !$0.sha256.isEmpty } }
        #expect(file.current.segments.count == 3, "\(file.current.segments.map(\.number))")
        let paths = file.current.segments.map(\.path)
        try file.update { manifest in
            manifest.end?.acknowledged = true
            manifest.segments[0].collected = true
            manifest.segments[1].offloadedTo = ["studio"]
        }
        #expect(takes.applyRetention(nowUnixMs: Int64(Date().timeIntervalSince1970 * 1000)).isEmpty, "nothing is older than 30 days")
        let removed = takes.applyRetention(nowUnixMs: Int64(Date().timeIntervalSince1970 * 1000) + 31 * 86_400_000)
        #expect(Set(removed) == Set(paths[0...1]), "the collected and the offloaded segment go: \(removed)")
        #expect(!FileManager.default.fileExists(atPath: paths[0]) && !FileManager.default.fileExists(atPath: paths[1]))
        #expect(FileManager.default.fileExists(atPath: paths[2]), "the segment only this host holds stays")
        #expect(try AgentPartManifest.load(path: file.path).segments.map(\.number) == [3])
        await takes.shutdown()
    }

    /// Disk pressure (free space below twice the reserve): the oldest segments safe elsewhere
    /// go first, whatever their age, only as many as bring it back; one only here never goes.
    @Test func diskPressure_removesTheOldestSafeSegmentsFirst_neverOneOnlyHere() async throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var settings = AgentRecordingSettings(directory: directory)
        settings.reserveBytes = 1 << 20
        let takes = AgentTakeStore(settings: settings, logger: Logger(label: "test"))
        #expect(
            try takes.prepare(
                takeID: key.takeID, deviceID: key.deviceID, start: start, segmentSeconds: 1, title: "t — cam-1",
                frameRate: 30, agentInstance: "run-1") == .ready)
        takes.begin(takeID: key.takeID, deviceID: key.deviceID)
        feed(takes, frames: 0..<75)
        takes.end(takeID: key.takeID, deviceID: key.deviceID, takeDrops: DropTally(), reason: "stopped", withholding: false)
        let file = try #require(takes.part(key))
        try await waitUntil { file.current.end != nil && !takes.isWriting(key) && file.current.segments.allSatisfy { !$0.sha256.isEmpty } }
        let paths = file.current.segments.map(\.path)
        try file.update { manifest in
            manifest.end?.acknowledged = true
            manifest.segments[0].offloadedTo = ["studio"]
            manifest.segments[1].collected = true
        }
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        #expect(takes.applyRetention(nowUnixMs: now, freeBytes: 4 << 20).isEmpty, "no pressure, nothing old: nothing goes")
        #expect(takes.applyRetention(nowUnixMs: now, freeBytes: (2 << 20) - 1) == [paths[0]], "one segment brings it back: the oldest")
        #expect(takes.applyRetention(nowUnixMs: now, freeBytes: 0) == [paths[1]], "then the next safe one")
        #expect(takes.applyRetention(nowUnixMs: now, freeBytes: 0).isEmpty, "the segment only this host holds stays")
        #expect(FileManager.default.fileExists(atPath: paths[2]))
        await takes.shutdown()
    }

    /// A long pre-roll (recordings.md, "Pre-roll") goes to the writer as one message: the live
    /// frame after 150 kept ones is taken at once, not refused while the writer takes them up.
    @Test func aLongPreRoll_leavesRoomForTheLiveFrameAfterIt_everyFrameWritten() async throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let takes = store()
        _ = try takes.prepare(
            takeID: key.takeID, deviceID: key.deviceID, start: start, segmentSeconds: 60, title: "t", frameRate: 30, agentInstance: "run-1")
        takes.begin(takeID: key.takeID, deviceID: key.deviceID)
        func frame(_ index: Int) -> PreRollFrame {
            var header = Capfleet_V1_FrameHeader()
            header.deviceID = "cam-1"
            header.sequence = 100 + UInt64(index)
            header.fleetTimeNs = start + UInt64(index) * 33_333_333
            header.layout.pixelFormat = "YUYV"
            header.layout.width = 32
            header.layout.height = 24
            let pixels = FrameBuffer(unpooledCapacity: 32 * 24 * 2)
            memset(pixels.storage, Int32(index % 200), 32 * 24 * 2)
            return PreRollFrame(header: header, pixels: pixels, count: 32 * 24 * 2)
        }
        #expect(takes.submitPreRoll(takeID: key.takeID, deviceID: key.deviceID, frames: (0..<150).map(frame), takeDrops: DropTally()) == 0)
        let live = frame(150)
        #expect(
            takes.submit(
                takeID: key.takeID, deviceID: key.deviceID, header: live.header, takeDrops: DropTally(), pixels: live.pixels, count: live.count),
            "the writer's 64 frames of room are the live frames'")
        takes.end(takeID: key.takeID, deviceID: key.deviceID, takeDrops: DropTally(), reason: "stopped", withholding: false)
        let file = try #require(takes.part(key))
        try await waitUntil { file.current.end != nil && !takes.isWriting(key) }
        #expect(file.current.lastTally?.frames == 151 && file.current.lastTally?.lastSequence == 250)
        await takes.shutdown()
    }

    @Test func anAgentKilledMidSegment_repairsItAtStart_andGoesOnCountingTheGapAsDropped() async throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let first = store()
        _ = try first.prepare(
            takeID: key.takeID, deviceID: key.deviceID, start: start, segmentSeconds: 300, title: "t — cam-1",
            frameRate: 30, agentInstance: "run-1")
        first.begin(takeID: key.takeID, deviceID: key.deviceID)
        feed(first, frames: 0..<30)
        // Written out (the writer flushes every half second) but never finished: what a SIGKILL leaves.
        try await Task.sleep(for: .seconds(1.5))
        let path = try #require(first.part(key)?.current.segments.first?.path)
        #expect(first.part(key)?.current.segments.first?.state == .open)
        let copy = directory + "/left-by-the-kill.mkv"
        try FileManager.default.copyItem(atPath: path, toPath: copy)
        let manifestCopy = try #require(first.part(key)?.path)
        let manifestData = try Data(contentsOf: URL(fileURLWithPath: manifestCopy))
        await first.shutdown()
        // Put back the state of the moment of the kill: the open segment and its manifest.
        try FileManager.default.removeItem(atPath: path)
        try FileManager.default.moveItem(atPath: copy, toPath: path)
        try manifestData.write(to: URL(fileURLWithPath: manifestCopy))

        let again = store()
        let notes = again.recoverParts()
        #expect(notes.contains { $0.contains("repaired") }, "\(notes)")
        let file = try #require(again.part(key))
        let repaired = try #require(file.current.segments.first)
        #expect(repaired.state == .repaired && repaired.frames == 30 && repaired.sha256.count == 64, "\(repaired)")
        // The coordinator asks again: the part goes on in a new segment, its numbering rising.
        _ = try again.prepare(
            takeID: key.takeID, deviceID: key.deviceID, start: start, segmentSeconds: 300, title: "t — cam-1",
            frameRate: 30, agentInstance: "run-2")
        again.begin(takeID: key.takeID, deviceID: key.deviceID)
        // The new process numbers from 1, and captures again at the take's 2 s mark.
        feed(again, frames: 0..<15, sequenceBase: 1, at: start + 2_000_000_000)
        again.end(takeID: key.takeID, deviceID: key.deviceID, takeDrops: DropTally(), reason: "stopped", withholding: false)
        try await waitUntil { file.current.end != nil && !again.isWriting(key) }
        let manifest = file.current
        #expect(manifest.segments.count == 2)
        let tally = try #require(manifest.lastTally)
        #expect(tally.frames == 45)
        let first_ = try #require(tally.firstSequence), last = try #require(tally.lastSequence)
        #expect(tally.frames + tally.drops.tally.total == last - first_ + 1, "every frame of the span accounted for: \(tally)")
        // The last frame written was at 0.967 s, the next captured at 2.000 s: the 30 frame times between are the gap.
        #expect(tally.drops.discontinuity == 30, "\(tally)")
        await again.shutdown()
    }

    /// A sensor batch (or a note) for a part can come before the part's first frame has begun
    /// its writer: it waits, and goes into the file at its own time.
    @Test func timedMetadataBeforeTheFirstFrame_waitsForTheWriter_andLandsAtItsTime() async throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let takes = store()
        _ = try takes.prepare(
            takeID: key.takeID, deviceID: key.deviceID, start: start, segmentSeconds: 300, title: "t — cam-1",
            frameRate: 30, agentInstance: "run-1")
        takes.note(key, json: #"{"kind":"sensor","n":1}"#, at: start + 5_000_000, track: .sensors)
        takes.note(key, json: #"{"kind":"sensor","n":2}"#, at: start + 55_000_000, track: .sensors)
        // Not a part of this host's: said once in the log, never written anywhere.
        takes.note(TakeDeviceKey(takeID: "take-9", deviceID: "cam-1"), json: #"{"kind":"sensor","n":0}"#, at: start, track: .sensors)
        takes.begin(takeID: key.takeID, deviceID: key.deviceID)
        takes.note(key, json: #"{"kind":"sensor","n":3}"#, at: start + 105_000_000, track: .sensors)
        feed(takes, frames: 0..<15)
        takes.end(takeID: key.takeID, deviceID: key.deviceID, takeDrops: DropTally(), reason: "stopped", withholding: false)
        let file = try #require(takes.part(key))
        try await waitUntil { file.current.end != nil && !takes.isWriting(key) }
        let path = try #require(file.current.segments.first?.path)
        let entries = try SubtitleTrackReader.entries(in: [path], track: 2)
        #expect(entries.map(\.json) == [#"{"kind":"sensor","n":1}"#, #"{"kind":"sensor","n":2}"#, #"{"kind":"sensor","n":3}"#])
        #expect(entries.map(\.milliseconds) == [5, 55, 105], "each at its own time since the take's start")
        #expect(takes.part(TakeDeviceKey(takeID: "take-9", deviceID: "cam-1")) == nil)
        await takes.shutdown()
    }

    @Test func aDiskBelowItsReserve_refusesAPart() throws {
        var settings = AgentRecordingSettings(directory: directory)
        settings.reserveBytes = Int64.max / 2
        let takes = AgentTakeStore(settings: settings, logger: Logger(label: "test"))
        #expect(throws: AgentTakeRefusal.self) {
            try takes.prepare(takeID: "t", deviceID: "cam-1", start: start, segmentSeconds: 300, title: "", frameRate: 30, agentInstance: "x")
        }
    }
}
