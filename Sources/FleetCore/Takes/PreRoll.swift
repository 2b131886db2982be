/// How much of a device's recent past its agent keeps, so that a take can start before it
/// was asked for (recordings.md, "Pre-roll"): the last `seconds` of its frames, within
/// `budgetBytes` of memory. Off (nothing kept, nothing spent) when `seconds` is 0.
public struct PreRollSettings: Hashable, Sendable {
    public var seconds: Double
    public var budgetBytes: Int

    /// The budget when none is given: enough for a few seconds of a 1080p camera's raw frames.
    public static let defaultBudgetBytes = 256 << 20
    /// The longest pre-roll: what is kept beyond it is seldom wanted and always costly.
    public static let maximumSeconds = 60.0

    public static let off = PreRollSettings(seconds: 0, budgetBytes: 0)

    public init(seconds: Double, budgetBytes: Int = PreRollSettings.defaultBudgetBytes) {
        self.seconds = seconds.isFinite ? max(0, seconds) : 0
        self.budgetBytes = max(0, budgetBytes)
    }

    public var isOn: Bool { seconds > 0 && budgetBytes > 0 }

    /// The budget the host's pressure leaves it: all of it up to fair, half at serious, a
    /// quarter at critical, nothing at shutdown (capture has stopped then anyway).
    public func budget(under level: PressureLevel) -> Int {
        switch level {
        case .nominal, .fair: budgetBytes
        case .serious: budgetBytes / 2
        case .critical: budgetBytes / 4
        case .shutdown: 0
        }
    }

    /// Why these settings cannot be used, or nil.
    public var refusal: String? {
        if seconds > Self.maximumSeconds {
            return "a pre-roll of \(seconds) s is longer than the \(Int(Self.maximumSeconds)) s kept at most"
        }
        if seconds > 0, budgetBytes < 1 << 20 { return "a pre-roll needs a budget of at least 1 MiB, not \(budgetBytes) bytes" }
        return nil
    }
}

/// A device's recent frames, oldest first, as kept for pre-roll: each with its fleet time and
/// size. Appending evicts what is older than the window behind the newest, and the oldest
/// while the total is over the budget in force (the settings' budget as the host's pressure
/// leaves it; a budget too small for the window keeps less time, which `keptNanoseconds`
/// says). Pure: the caller owns the payloads' memory.
public struct PreRollRing<Payload> {
    public struct Entry {
        public var fleetTime: UInt64
        public var bytes: Int
        public var payload: Payload
    }

    public private(set) var settings: PreRollSettings
    /// The host's pressure now, which shrinks the budget.
    public private(set) var pressure: PressureLevel = .nominal
    /// Kept frames from `head` on; the slots before it are emptied as their frames go, so an
    /// evicted frame's memory is let go at once, not when the array is next compacted.
    private var entries: [Entry?] = []
    private var head = 0
    public private(set) var keptBytes = 0

    public init(settings: PreRollSettings) { self.settings = settings }

    /// Frames kept now.
    public var count: Int { entries.count - head }

    /// The memory the frames may take now.
    public var budgetInForce: Int { settings.budget(under: pressure) }

    /// The oldest kept frame's capture time; nil when nothing is kept.
    public var oldestFleetTime: UInt64? { oldest?.fleetTime }

    private var oldest: Entry? { entries[safe: head] ?? nil }

    /// The time from the oldest kept frame to the newest.
    public var keptNanoseconds: UInt64 {
        guard let first = oldest, let last = entries.last ?? nil else { return 0 }
        return last.fleetTime &- first.fleetTime
    }

    /// Keeps a frame (in capture order) and returns what no longer fits, oldest first. With
    /// pre-roll off, or a frame larger than the whole budget, the frame itself comes back.
    public mutating func append(fleetTime: UInt64, bytes: Int, payload: Payload) -> [Payload] {
        guard settings.isOn, bytes <= budgetInForce else { return [payload] }
        entries.append(Entry(fleetTime: fleetTime, bytes: bytes, payload: payload))
        keptBytes += bytes
        var evicted: [Payload] = []
        let window = UInt64(settings.seconds * 1e9)
        while let oldest, count > 1,
            keptBytes > budgetInForce || (fleetTime > oldest.fleetTime && fleetTime - oldest.fleetTime > window)
        {
            evicted.append(evictOldest(oldest))
        }
        compact()
        return evicted
    }

    /// The kept frames captured at or after `fleetTime`, oldest first (a take's pre-roll). They
    /// stay kept: a later take may start before this one did.
    public func frames(from fleetTime: UInt64) -> [Entry] {
        guard let first = entries[head...].firstIndex(where: { ($0?.fleetTime ?? 0) >= fleetTime }) else { return [] }
        return entries[first...].compactMap { $0 }
    }

    /// Empties the ring (consent withdrawn, pre-roll turned off) and returns what it held.
    public mutating func clear() -> [Payload] {
        let all = entries[head...].compactMap { $0?.payload }
        entries.removeAll()
        head = 0
        keptBytes = 0
        return all
    }

    /// New settings; what no longer fits comes back, oldest first (everything when turned off).
    public mutating func change(to settings: PreRollSettings) -> [Payload] {
        self.settings = settings
        return fit()
    }

    /// The host's pressure changed: what no longer fits the budget it leaves comes back.
    public mutating func pressureChanged(to level: PressureLevel) -> [Payload] {
        pressure = level
        return fit()
    }

    /// Evicts, oldest first, what the settings and the budget in force no longer allow.
    private mutating func fit() -> [Payload] {
        guard settings.isOn, budgetInForce > 0 else { return clear() }
        var evicted: [Payload] = []
        let window = UInt64(settings.seconds * 1e9)
        let newest = (entries.last ?? nil)?.fleetTime ?? 0
        while let oldest, keptBytes > budgetInForce || newest - oldest.fleetTime > window {
            evicted.append(evictOldest(oldest))
        }
        compact()
        return evicted
    }

    /// Drops the evicted slots now and then, so appending stays O(1) amortised.
    /// Lets the oldest frame go: its slot is emptied, its payload handed back.
    private mutating func evictOldest(_ entry: Entry) -> Payload {
        keptBytes -= entry.bytes
        entries[head] = nil
        head += 1
        return entry.payload
    }

    private mutating func compact() {
        if head > 64, head * 2 > entries.count {
            entries.removeFirst(head)
            head = 0
        }
        if head == entries.count {
            entries.removeAll(keepingCapacity: true)
            head = 0
        }
    }
}

extension Array {
    fileprivate subscript(safe index: Int) -> Element? { indices.contains(index) ? self[index] : nil }
}
