import FleetCapture
import FleetCore
import FleetProtocol
import FleetSystem
import Foundation
import Logging
import Synchronization

/// An encoded pre-roll's older seconds on its host's disk (recordings.md, "On disk"): the
/// groups of packets its memory budget lets go, one file per group, kept while the window
/// holds them and the disk budget allows (`PreRollDiskLedger` decides). Files are written and
/// deleted on a thread of the spill's own, so neither the encoder nor capture waits for the
/// disk; a group waiting to be written is read from memory meanwhile. Reading a group back
/// (a take reaching into the disk's part, a still from the past) reads its file on the
/// caller's thread: a few hundred kilobytes a second of packets, just written, from the page
/// cache.
final class PreRollSpill: Sendable {
    /// One group on disk, or still on its way there.
    private final class StoredGroup: Sendable {
        let group: PreRollDiskLedger.Group
        let path: String
        /// Its packets until its file is written; nil after.
        let pending: Mutex<[PreRollFrame]?>
        let deleted = Atomic<Bool>(false)

        init(group: PreRollDiskLedger.Group, path: String, frames: [PreRollFrame]) {
            self.group = group
            self.path = path
            pending = Mutex(frames)
        }
    }

    private enum Job: Sendable {
        case write(StoredGroup)
        case delete([StoredGroup])
    }

    private struct State {
        var ledger = PreRollDiskLedger()
        var stored: [UInt64: StoredGroup] = [:]
        var failureSaid = false
    }

    /// The ledger and its groups, shared with the disk's thread.
    private final class Shared: Sendable {
        let state = Mutex(State())
    }

    let directory: String
    private let deviceID: String
    private let shared = Shared()
    private let worker: OwnedWorker<Job>
    private let logger: Logger

    /// `directory` is the camera's own: anything in it (a run before this one's) is deleted.
    init(directory: String, deviceID: String, logger: Logger) {
        self.directory = directory
        self.deviceID = deviceID
        self.logger = logger
        let failed = Self.emptied(directory)
        if let failed {
            logger.error("pre-roll.disk", metadata: ["device.id": "\(deviceID)", "directory": "\(directory)", "error": "\(failed)"])
        }
        let shared = self.shared
        worker = OwnedWorker(name: "cf-preroll-disk") { job in
            switch job {
            case let .write(stored): Self.write(stored, shared: shared, deviceID: deviceID, logger: logger)
            case let .delete(groups): for stored in groups { Self.remove(stored, deviceID: deviceID, logger: logger) }
            }
        }
    }

    /// What the memory let go, oldest first, in whole groups; `newest` is the newest frame
    /// kept, `window` and `budget` the pre-roll's and the disk's in force.
    func take(_ frames: [PreRollFrame], newest: UInt64, window: UInt64, budget: Int) {
        var groups: [[PreRollFrame]] = []
        for frame in frames {
            if frame.header.isKeyFrame || groups.isEmpty { groups.append([frame]) } else { groups[groups.count - 1].append(frame) }
        }
        var writes: [StoredGroup] = []
        var deletes: [StoredGroup] = []
        shared.state.withLock { state in
            for frames in groups {
                // A group begins with a key frame, or it could not be decoded from the disk.
                guard let first = frames.first, first.header.isKeyFrame, let last = frames.last else { continue }
                let group = PreRollDiskLedger.Group(
                    first: first.header.fleetTimeNs, last: last.header.fleetTimeNs, bytes: frames.reduce(0) { $0 + $1.count })
                let (kept, deleted) = state.ledger.add(group, newest: newest, window: window, budget: budget)
                deletes += deleted.compactMap { state.stored.removeValue(forKey: $0.first) }
                guard kept else { continue }
                let stored = StoredGroup(group: group, path: directory + "/\(group.first).group", frames: frames)
                state.stored[group.first] = stored
                writes.append(stored)
            }
        }
        post(writes: writes, deletes: deletes)
    }

    /// The window moved on, or the host's pressure shrank the disk: what no longer fits goes.
    func trim(newest: UInt64, window: UInt64, budget: Int) {
        let deletes = shared.state.withLock { state in
            state.ledger.trim(newest: newest, window: window, budget: budget).compactMap { state.stored.removeValue(forKey: $0.first) }
        }
        post(writes: [], deletes: deletes)
    }

    /// Deletes everything kept (consent withdrawn, the pre-roll turned off or kept otherwise).
    func clear() {
        let deletes = shared.state.withLock { state in
            state.ledger.clear().compactMap { state.stored.removeValue(forKey: $0.first) }
        }
        post(writes: [], deletes: deletes)
    }

    private func post(writes: [StoredGroup], deletes: [StoredGroup]) {
        for stored in deletes { stored.deleted.store(true, ordering: .relaxed) }
        for stored in writes { _ = worker.post(.write(stored)) }
        if !deletes.isEmpty { _ = worker.post(.delete(deletes)) }
    }

    /// The kept packets captured at or after `fleetTime`, oldest first. Blocking disk reads.
    func frames(from fleetTime: UInt64) -> [PreRollFrame] {
        let groups = shared.state.withLock { state in state.ledger.groups(from: fleetTime).compactMap { state.stored[$0.first] } }
        return groups.flatMap { read($0) }.filter { $0.header.fleetTimeNs >= fleetTime }
    }

    /// The packets of the group that may hold the frame nearest `instant`, key frame first.
    func group(near instant: UInt64, within reach: UInt64) -> [PreRollFrame] {
        guard let stored = shared.state.withLock({ state in state.ledger.group(near: instant, within: reach).flatMap { state.stored[$0.first] } })
        else { return [] }
        return read(stored)
    }

    /// Bytes kept on disk (or on their way), and the oldest packet's capture time.
    var figures: (bytes: Int, oldest: UInt64?) { shared.state.withLock { ($0.ledger.bytes, $0.ledger.oldestFleetTime) } }

    /// Ends the thread once what is queued is written (the pre-roll stops keeping to disk).
    func stop() async {
        clear()
        await worker.stop()
    }

    private func read(_ stored: StoredGroup) -> [PreRollFrame] {
        if let frames = stored.pending.withLock({ $0 }) { return frames }
        do {
            return try Self.frames(in: Data(contentsOf: URL(fileURLWithPath: stored.path)))
        } catch {
            // Deleted meanwhile (the window moved on), or the disk failed: those seconds are gone.
            if !stored.deleted.load(ordering: .relaxed) {
                logger.error("pre-roll.disk", metadata: ["device.id": "\(deviceID)", "file": "\(stored.path)", "error": "\(error)"])
            }
            return []
        }
    }

    // MARK: The disk thread

    private static func write(_ stored: StoredGroup, shared: Shared, deviceID: String, logger: Logger) {
        guard !stored.deleted.load(ordering: .relaxed), let frames = stored.pending.withLock({ $0 }) else { return }
        do {
            try serialized(frames).write(to: URL(fileURLWithPath: stored.path), options: .atomic)
            stored.pending.withLock { $0 = nil }
            // Deleted while it was written: its file goes too.
            if stored.deleted.load(ordering: .relaxed) { remove(stored, deviceID: deviceID, logger: logger) }
        } catch {
            // The group is lost to the pre-roll (a disk full or failing): said once until a write works.
            let first = shared.state.withLock { state -> Bool in
                state.ledger.remove(groupAt: stored.group.first)
                state.stored.removeValue(forKey: stored.group.first)
                defer { state.failureSaid = true }
                return !state.failureSaid
            }
            stored.pending.withLock { $0 = nil }
            if first {
                logger.error(
                    "pre-roll.disk",
                    metadata: ["device.id": "\(deviceID)", "file": "\(stored.path)", "error": "\(error)", "lost": "a group of packets"])
            }
            return
        }
        shared.state.withLock { $0.failureSaid = false }
    }

    private static func remove(_ stored: StoredGroup, deviceID: String, logger: Logger) {
        stored.pending.withLock { $0 = nil }
        guard FileManager.default.fileExists(atPath: stored.path) else { return }
        do {
            try FileManager.default.removeItem(atPath: stored.path)
        } catch {
            logger.error("pre-roll.disk", metadata: ["device.id": "\(deviceID)", "file": "\(stored.path)", "error": "cannot delete it: \(error)"])
        }
    }

    /// Empties (or makes) the directory; the error, if it cannot.
    private static func emptied(_ directory: String) -> Error? {
        do {
            let manager = FileManager.default
            if manager.fileExists(atPath: directory) { try manager.removeItem(atPath: directory) }
            try manager.createDirectory(atPath: directory, withIntermediateDirectories: true)
            return nil
        } catch {
            return error
        }
    }

    /// A group's file: for each packet, its header's length (4 bytes, little-endian), the
    /// header (`FrameHeader`), the packet's length, the packet.
    static func serialized(_ frames: [PreRollFrame]) throws -> Data {
        var data = Data()
        for frame in frames {
            let header = try frame.header.serializedBytes() as [UInt8]
            append(UInt32(header.count), to: &data)
            data.append(contentsOf: header)
            append(UInt32(frame.count), to: &data)
            data.append(UnsafeBufferPointer(start: frame.pixels.storage.assumingMemoryBound(to: UInt8.self), count: frame.count))
        }
        return data
    }

    static func frames(in data: Data) throws -> [PreRollFrame] {
        var frames: [PreRollFrame] = []
        var offset = 0
        func length() throws -> Int {
            guard offset + 4 <= data.count else { throw CocoaError(.fileReadCorruptFile) }
            let value = data[data.startIndex + offset..<data.startIndex + offset + 4].enumerated().reduce(0) {
                $0 | Int($1.element) << (8 * $1.offset)
            }
            offset += 4
            guard offset + value <= data.count else { throw CocoaError(.fileReadCorruptFile) }
            return value
        }
        while offset < data.count {
            let headerLength = try length()
            let header = try Capfleet_V1_FrameHeader(
                serializedBytes: [UInt8](data[data.startIndex + offset..<data.startIndex + offset + headerLength]))
            offset += headerLength
            let count = try length()
            let pixels = FrameBuffer(unpooledCapacity: max(count, 1))
            if count > 0 {
                data[data.startIndex + offset..<data.startIndex + offset + count].withUnsafeBytes {
                    pixels.storage.copyMemory(from: $0.baseAddress!, byteCount: count)
                }
            }
            offset += count
            frames.append(PreRollFrame(header: header, pixels: pixels, count: count))
        }
        return frames
    }

    private static func append(_ value: UInt32, to data: inout Data) {
        withUnsafeBytes(of: value.littleEndian) { data.append(contentsOf: $0) }
    }
}
