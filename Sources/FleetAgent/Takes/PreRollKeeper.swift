import FleetCapture
import FleetCore
import FleetProtocol
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

    init() {}

    var isOn: Bool { on.load(ordering: .relaxed) }

    /// New settings; what no longer fits is freed at once (everything when turned off).
    func change(to settings: PreRollSettings) {
        let freed = ring.withLock { $0.change(to: settings) }
        on.store(settings.isOn, ordering: .relaxed)
        _ = freed  // released here, outside the lock
    }

    /// Keeps what was captured at `fleetTime` (it must not change after), `bytes` in the budget.
    func keep(fleetTime: UInt64, bytes: Int, payload: Payload) {
        guard isOn else { return }
        let freed = ring.withLock { $0.append(fleetTime: fleetTime, bytes: bytes, payload: payload) }
        _ = freed  // released here, outside the lock
    }

    /// The host's pressure changed: a serious or critical host keeps less (recordings.md, "Pre-roll").
    func pressureChanged(to level: PressureLevel) {
        let freed = ring.withLock { $0.pressureChanged(to: level) }
        _ = freed
    }

    /// Forgets every frame kept: they must never reach a take (consent withdrawn).
    func forget() {
        let freed = ring.withLock { $0.clear() }
        _ = freed
    }

    /// A take's part began at `start`: its first live frame or block takes what was kept since then.
    func takeBegan(takeID: String, start: UInt64) {
        pending.withLock { $0 = isOn ? (takeID, start) : nil }
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
}
