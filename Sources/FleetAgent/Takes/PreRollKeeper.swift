import FleetCapture
import FleetCore
import FleetProtocol
import Logging
import Synchronization

/// A camera's frame kept for its pre-roll (its header as sent then, and its pixels: a copy, or
/// the shared black frame), or a microphone's block of a take's pre-roll as its path takes it
/// (its header and FLAC packet).
struct PreRollFrame: Sendable {
    var header: Capfleet_V1_FrameHeader
    var pixels: FrameBuffer
    var count: Int
}

/// A device's pre-roll on its agent (recordings.md, "Pre-roll"): copies of its last seconds
/// (a camera's frames, a microphone's 10 ms blocks) exactly as a take would have recorded them
/// (black or silent while its consent is not granted), so that a take whose start lies in the
/// past begins there. Kept on the capture thread; a take that begins hands its start over,
/// and the capture thread, at the take's first live frame or block, records what was kept from
/// that start first (it stays kept, shared: nothing is written after capture). Off, it keeps
/// and spends nothing.
final class PreRollKeeper<Payload: Sendable>: Sendable {
    private let ring = Mutex(PreRollRing<Payload>(settings: .off))
    /// Read on every frame without the lock.
    private let on = Atomic<Bool>(false)
    /// The take whose kept frames are still to be recorded, and from which fleet time.
    private let pending = Mutex<(takeID: String, start: UInt64)?>(nil)
    /// A camera's: where copies out of the capture buffer come from, the buffers of frames the
    /// ring lets go, for frames of one size (a new size, a new pool).
    private let buffers = Mutex<RecyclingBufferPool?>(nil)
    /// Read on every frame without the lock: what is kept is an encoder's packets.
    private let encoded = Atomic<Bool>(false)
    /// The newest capture time handed to the pre-roll, and, once consent was withdrawn, the
    /// newest of then: nothing captured at or before it is kept after (an encoder's packets
    /// come out a few frames after their frames went in).
    private let newestSeen = Atomic<UInt64>(0)
    private let forgottenThrough = Atomic<UInt64>(0)
    /// An encoded camera pre-roll's disk, while it has a disk budget (PreRollSpill.swift).
    let disk = Mutex<PreRollSpill?>(nil)

    init() {}

    var isOn: Bool { on.load(ordering: .relaxed) }

    /// New settings; what no longer fits is freed at once (everything when turned off).
    func change(to settings: PreRollSettings) {
        let (cleared, freed, newest, pressure) = ring.withLock { ring -> ([Payload], [Payload], UInt64, PressureLevel) in
            // Raw frames and packets, or packets of two encoders, never share the ring.
            let cleared = ring.settings.encoding != settings.encoding ? ring.clear() : []
            return (cleared, ring.change(to: settings), ring.newestFleetTime ?? 0, ring.pressure)
        }
        on.store(settings.isOn, ordering: .relaxed)
        encoded.store(settings.isEncoded, ordering: .relaxed)
        if let spill = disk.withLock({ $0 }) {
            if !cleared.isEmpty || !settings.spillsToDisk { spill.clear() }
            spill.take(
                freed as? [PreRollFrame] ?? [], newest: newest, window: settings.windowNanoseconds, budget: settings.diskBudget(under: pressure))
            spill.trim(newest: newest, window: settings.windowNanoseconds, budget: settings.diskBudget(under: pressure))
        }
        _ = freed  // released here, outside the lock
    }

    /// What is kept is an encoder's packets (recordings.md, "Encoded pre-roll").
    var isEncoded: Bool { encoded.load(ordering: .relaxed) }

    /// The settings in force.
    var settings: PreRollSettings { ring.withLock { $0.settings } }

    /// A frame captured at `fleetTime` went to the pre-roll's encoder.
    func saw(fleetTime: UInt64) { _ = newestSeen.max(fleetTime, ordering: .relaxed) }

    /// Keeps what was captured at `fleetTime` (it must not change after), `bytes` in the budget.
    func keep(fleetTime: UInt64, bytes: Int, startsGroup: Bool = true, payload: Payload) {
        guard isOn, fleetTime > forgottenThrough.load(ordering: .relaxed) else { return }
        saw(fleetTime: fleetTime)
        let (freed, window, diskBudget) = ring.withLock { ring in
            (
                ring.append(fleetTime: fleetTime, bytes: bytes, startsGroup: startsGroup, payload: payload), ring.settings.windowNanoseconds,
                ring.settings.diskBudget(under: ring.pressure)
            )
        }
        // What the memory lets go of an encoded pre-roll goes to its disk while the window holds it.
        if !freed.isEmpty, let spill = disk.withLock({ $0 }) {
            spill.take(freed as? [PreRollFrame] ?? [], newest: fleetTime, window: window, budget: diskBudget)
        }
        _ = freed  // released here, outside the lock
    }

    /// The host's pressure changed: a serious or critical host keeps less (recordings.md, "Pre-roll").
    func pressureChanged(to level: PressureLevel) {
        let (freed, newest, window, diskBudget) = ring.withLock { ring in
            (ring.pressureChanged(to: level), ring.newestFleetTime ?? 0, ring.settings.windowNanoseconds, ring.settings.diskBudget(under: level))
        }
        if let spill = disk.withLock({ $0 }) {
            spill.take(freed as? [PreRollFrame] ?? [], newest: newest, window: window, budget: diskBudget)
            spill.trim(newest: newest, window: window, budget: diskBudget)
        }
        _ = freed
    }

    /// Forgets every frame kept: they must never reach a take (consent withdrawn).
    func forget() {
        forgottenThrough.store(newestSeen.load(ordering: .relaxed), ordering: .relaxed)
        let freed = ring.withLock { $0.clear() }
        disk.withLock { $0 }?.clear()
        _ = freed
    }

    /// A take's part began at `start`: its first live frame or block takes what was kept since
    /// then. An encoded pre-roll's takes tap its encoder instead (PreRollTap).
    func takeBegan(takeID: String, start: UInt64) {
        pending.withLock { $0 = isOn && !isEncoded ? (takeID, start) : nil }
    }

    /// What is kept from `fleetTime` on, oldest first (a tap's start).
    func kept(from fleetTime: UInt64) -> [Payload] { ring.withLock { $0.frames(from: fleetTime) }.map(\.payload) }

    /// The fleet times of the oldest (on disk or in memory) and the newest frame kept.
    var oldestFleetTime: UInt64? { disk.withLock { $0 }?.figures.oldest ?? ring.withLock { $0.oldestFleetTime } }
    var newestFleetTime: UInt64? { ring.withLock { $0.newestFleetTime } }

    /// An encoded pre-roll's packets from the key frame before the kept frame nearest
    /// `instant` through it (within `reach`), oldest first: what decoding that frame takes.
    func group(reaching instant: UInt64, within reach: UInt64) -> [Payload] {
        ring.withLock { $0.group(reaching: instant, within: reach) }.map(\.payload)
    }

    /// On the capture thread, at a take's live frame or block: what was kept from its start,
    /// oldest first, once per take (nil when there is none to hand over).
    func handOver(takeID: String, before fleetTime: UInt64) -> [Payload]? {
        guard
            let start = pending.withLock({ pending -> UInt64? in
                guard let waiting = pending, waiting.takeID == takeID else { return nil }
                pending = nil
                return waiting.start
            })
        else { return nil }
        let kept = ring.withLock { $0.frames(from: start) }.filter { $0.fleetTime < fleetTime }.map(\.payload)
        return kept.isEmpty ? nil : kept
    }

    /// The kept frame captured nearest `instant`, if one lies within `reach` of it (a still
    /// at an instant already past: stills.md, "From the past"); and the oldest kept frame's
    /// fleet time, to say how far back the ring reaches when none does.
    func nearest(to instant: UInt64, within reach: UInt64) -> (frame: Payload?, oldest: UInt64?) {
        ring.withLock { ring in
            let candidates = ring.frames(from: instant > reach ? instant - reach : 0)
            let distance = { (entry: PreRollRing<Payload>.Entry) in entry.fleetTime > instant ? entry.fleetTime - instant : instant - entry.fleetTime
            }
            let best = candidates.prefix { $0.fleetTime <= instant + reach }.min { distance($0) < distance($1) }
            return (best.map(\.payload), ring.oldestFleetTime)
        }
    }

    /// What is kept now, for the device's status; nil while off.
    var figures: Capfleet_V1_PreRoll? {
        ring.withLock { ring in
            guard ring.settings.isOn else { return nil }
            var figures = ring.settings.wire
            figures.keptNs = ring.keptNanoseconds
            figures.keptBytes = UInt64(ring.keptBytes)
            if let onDisk = disk.withLock({ $0 })?.figures {
                figures.keptDiskBytes = UInt64(onDisk.bytes)
                if let oldest = onDisk.oldest, let newest = ring.newestFleetTime, newest > oldest { figures.keptNs = newest - oldest }
            }
            figures.keptFrames = UInt32(ring.count)
            figures.budgetInForceBytes = UInt64(ring.budgetInForce)
            return figures
        }
    }
}

extension PreRollKeeper where Payload == PreRollFrame {
    /// A copy of `count` bytes at `source`, in a buffer of the ring's own, to keep.
    func copy(_ source: UnsafeRawPointer, count: Int) -> FrameBuffer {
        let pool = buffers.withLock { pool in
            if pool?.bufferSize != count { pool = RecyclingBufferPool(bufferSize: count) }
            return pool!
        }
        let copy = pool.take() ?? FrameBuffer(unpooledCapacity: count)
        copy.storage.copyMemory(from: source, byteCount: count)
        return copy
    }

    /// Keeps a frame as sent (`pixels` must not change after: a copy, or the black frame).
    func keep(header: Capfleet_V1_FrameHeader, pixels: FrameBuffer, count: Int) {
        guard isOn, header.flags & UInt32(Capfleet_V1_FrameFlag.fleetTimeValid.rawValue) != 0 else { return }
        keep(fleetTime: header.fleetTimeNs, bytes: count, payload: PreRollFrame(header: header, pixels: pixels, count: count))
    }

    /// Gives an encoded pre-roll with a disk budget its disk (in `directory`, the camera's own),
    /// or takes it away from one without: before `change(to:)` with the same settings.
    func useDisk(for settings: PreRollSettings, directory: String, deviceID: String, logger: Logger) {
        let retired = disk.withLock { disk -> PreRollSpill? in
            if settings.spillsToDisk {
                if disk == nil { disk = PreRollSpill(directory: directory, deviceID: deviceID, logger: logger) }
                return nil
            }
            defer { disk = nil }
            return disk
        }
        if let retired { Task { await retired.stop() } }
    }

    /// What is kept from `fleetTime` on, on disk and in memory, oldest first (a tap's start).
    /// Reads the disk's files: on the encoder's thread, which the memory's part shares.
    func keptIncludingDisk(from fleetTime: UInt64) -> [PreRollFrame] {
        let memory = kept(from: fleetTime)
        guard let spill = disk.withLock({ $0 }) else { return memory }
        let before = memory.first?.header.fleetTimeNs ?? .max
        return spill.frames(from: fleetTime).filter { $0.header.fleetTimeNs < before } + memory
    }

    /// An encoded pre-roll's packets a decoder needs for the frame nearest `instant`, from
    /// memory or, older, from its disk: its group's key frame through it.
    func decodable(nearest instant: UInt64, within reach: UInt64) -> [PreRollFrame] {
        let memory = group(reaching: instant, within: reach)
        guard memory.isEmpty, let spill = disk.withLock({ $0 }) else { return memory }
        let packets = spill.group(near: instant, within: reach)
        let distance = { (frame: PreRollFrame) in
            frame.header.fleetTimeNs > instant ? frame.header.fleetTimeNs - instant : instant - frame.header.fleetTimeNs
        }
        guard let nearest = packets.indices.filter({ distance(packets[$0]) <= reach }).min(by: { distance(packets[$0]) < distance(packets[$1]) })
        else { return [] }
        return Array(packets[...nearest])
    }

    /// Keeps a packet of the pre-roll's encoder, a key frame beginning a group.
    func keepPacket(header: Capfleet_V1_FrameHeader, pixels: FrameBuffer, count: Int) {
        guard isEncoded else { return }
        keep(
            fleetTime: header.fleetTimeNs, bytes: count, startsGroup: header.isKeyFrame,
            payload: PreRollFrame(header: header, pixels: pixels, count: count))
    }
}
