/// A camera's recent phases on the fleet grid — the last minute of frames, at most
/// `capacity` of them — for what the devices view, the metrics and a take's report show:
/// |phase| percentiles, and how fast the phase moves (a free-running camera's drift).
///
/// One record per frame on the capture thread costs a store into a ring; the figures are
/// worked out only when asked (once a second, for the agent's status).
public struct PhaseWindow: Sendable {
    /// Frames further back than this (fleet ns) are not in the figures.
    public let span: UInt64
    public let capacity: Int
    /// The grid's interval the phases were measured on: another interval starts another window.
    public private(set) var interval: UInt64 = 0

    private var times: [UInt64] = []
    private var phases: [Int64] = []
    /// Where the next record goes once the ring is full; also the oldest record then.
    private var cursor = 0

    public init(span: UInt64 = 60_000_000_000, capacity: Int = 4096) {
        self.span = span
        self.capacity = max(capacity, 2)
    }

    public var isEmpty: Bool { times.isEmpty }

    public mutating func removeAll() {
        times.removeAll(keepingCapacity: true)
        phases.removeAll(keepingCapacity: true)
        cursor = 0
    }

    /// A frame that started `phase` ns from its slot of a grid of `interval` ns, at `fleetTime`.
    public mutating func record(phase: Int64, at fleetTime: UInt64, interval: UInt64) {
        if interval != self.interval {
            removeAll()
            self.interval = interval
        }
        if times.count < capacity {
            times.append(fleetTime)
            phases.append(phase)
        } else {
            times[cursor] = fleetTime
            phases[cursor] = phase
            cursor = (cursor + 1) % capacity
        }
    }

    /// The records within `span` of `now`, oldest first.
    private func recent(asOf now: UInt64) -> [(time: UInt64, phase: Int64)] {
        let count = times.count
        let start = count < capacity ? 0 : cursor
        var records: [(time: UInt64, phase: Int64)] = []
        records.reserveCapacity(count)
        for offset in 0..<count {
            let index = (start + offset) % count
            let time = times[index]
            if now < time || now - time < span { records.append((time, phases[index])) }
        }
        return records
    }

    /// |phase| over the frames of the last `span` before `now`.
    public func statistics(asOf now: UInt64) -> PhaseStatistics {
        PhaseStatistics(magnitudes: recent(asOf: now).map(\.phase.magnitude))
    }

    /// How fast the phase moves against the grid, in ns per second of fleet time (positive: the
    /// camera runs slow, its frames start later and later): the least-squares slope of the
    /// phases, unwrapped where they pass half an interval and jump to the other side. Nil with
    /// fewer than two frames a second apart.
    public func drift(asOf now: UInt64) -> Double? {
        let records = recent(asOf: now)
        guard let first = records.first, let last = records.last, last.time > first.time, last.time - first.time >= 1_000_000_000,
            interval > 0
        else { return nil }
        let period = Double(interval)
        var unwrapped = Double(first.phase)
        var previous = Double(first.phase)
        var sumT = 0.0, sumP = 0.0, sumTT = 0.0, sumTP = 0.0
        for record in records {
            let phase = Double(record.phase)
            var step = phase - previous
            if step > period / 2 { step -= period } else if step < -period / 2 { step += period }
            unwrapped += step
            previous = phase
            let t = Double(record.time - first.time) / 1e9
            sumT += t
            sumP += unwrapped
            sumTT += t * t
            sumTP += t * unwrapped
        }
        let n = Double(records.count)
        let denominator = n * sumTT - sumT * sumT
        guard denominator > 0 else { return nil }
        return (n * sumTP - sumT * sumP) / denominator
    }
}
