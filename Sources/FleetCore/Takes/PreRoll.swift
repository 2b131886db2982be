/// How much of a device's recent past its agent keeps, so that a take can start before it
/// was asked for (recordings.md, "Pre-roll"): the last `seconds` of its frames, within
/// `budgetBytes` of memory. Off (nothing kept, nothing spent) when `seconds` is 0. A camera's
/// frames are kept raw, or encoded on the host (`encoding`: "Encoded pre-roll"), which keeps
/// ten to a hundred times as long in the same memory, and then may keep what its memory
/// cannot hold of the window on the host's disk, within `diskBudgetBytes` ("On disk").
public struct PreRollSettings: Hashable, Sendable {
    public var seconds: Double
    public var budgetBytes: Int
    /// nil: raw frames as captured. Else the camera's frames go through one encoder of the
    /// host's that runs as long as the pre-roll does, and what is kept is its packets.
    public var encoding: TakeEncoding?
    /// An encoded pre-roll's disk: the oldest groups of packets the memory budget lets go,
    /// kept in files while the window still holds them; 0: none (what memory lets go is gone).
    public var diskBudgetBytes: Int

    /// The budget when none is given: enough for a few seconds of a 1080p camera's raw frames.
    public static let defaultBudgetBytes = 256 << 20
    /// The longest pre-roll: what is kept beyond it is seldom wanted and always costly.
    public static let maximumSeconds = 60.0

    /// An encoded pre-roll's key frames lie on every whole multiple of this of fleet time, on
    /// every camera of the fleet, so that a take reaching into the past starts on one of them
    /// everywhere at once.
    public static let keyFrameNanoseconds: UInt64 = 1_000_000_000

    public static let off = PreRollSettings(seconds: 0, budgetBytes: 0)

    public init(seconds: Double, budgetBytes: Int = PreRollSettings.defaultBudgetBytes, encoding: TakeEncoding? = nil, diskBudgetBytes: Int = 0) {
        self.seconds = seconds.isFinite ? max(0, seconds) : 0
        self.budgetBytes = max(0, budgetBytes)
        self.encoding = encoding.flatMap { $0.codec == .raw ? nil : $0 }
        self.diskBudgetBytes = max(0, diskBudgetBytes)
    }

    /// Whether what the memory lets go of the window goes to disk.
    public var spillsToDisk: Bool { isEncoded && diskBudgetBytes > 0 }

    public var isOn: Bool { seconds > 0 && budgetBytes > 0 }

    /// Whether what is kept is an encoder's packets.
    public var isEncoded: Bool { isOn && encoding != nil }

    /// The time the ring keeps behind its newest frame: an encoded one a key-frame interval
    /// more, so that a take whose start is put back to a key frame still finds it kept.
    public var windowNanoseconds: UInt64 {
        UInt64(seconds * 1e9) + (encoding == nil ? 0 : Self.keyFrameNanoseconds)
    }

    /// Where a take that reaches `milliseconds` back from `instant` starts: that far back, or
    /// with an encoded pre-roll on any of its cameras, at the key frame at or before it (the
    /// encoded stream can begin nowhere else).
    public static func takeStart(instant: UInt64, milliseconds: Int, encoded: Bool) -> UInt64 {
        let back = instant - min(instant, UInt64(max(milliseconds, 0)) * 1_000_000)
        guard encoded, milliseconds > 0 else { return back }
        return back - back % keyFrameNanoseconds
    }

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

    /// The disk the host's pressure leaves it, by the same rule as the memory.
    public func diskBudget(under level: PressureLevel) -> Int {
        PreRollSettings(seconds: seconds, budgetBytes: diskBudgetBytes).budget(under: level)
    }

    /// Why these settings cannot be used, or nil.
    public var refusal: String? {
        if diskBudgetBytes > 0, seconds > 0 {
            if encoding == nil {
                return
                    "a disk budget keeps an encoded pre-roll's packets: raw frames would write the camera's whole pixel rate to disk, the bandwidth takes need (add --codec h264, or leave --disk out)"
            }
            if diskBudgetBytes < 1 << 20 { return "a disk budget is at least 1 MiB, not \(diskBudgetBytes) bytes" }
        }
        if seconds > Self.maximumSeconds {
            return "a pre-roll of \(seconds) s is longer than the \(Int(Self.maximumSeconds)) s kept at most"
        }
        if seconds > 0, budgetBytes < 1 << 20 { return "a pre-roll needs a budget of at least 1 MiB, not \(budgetBytes) bytes" }
        if let encoding {
            if let problem = encoding.problem { return problem }
            if encoding.stabilisation != .off {
                return "a pre-roll is kept as the camera saw it: --stabilise is for a take's own encoder (record start --stabilise)"
            }
        }
        return nil
    }
}

/// A device's recent frames, oldest first, as kept for pre-roll: each with its fleet time and
/// size. Appending evicts what is older than the window behind the newest, and the oldest
/// while the total is over the budget in force (the settings' budget as the host's pressure
/// leaves it; a budget too small for the window keeps less time, which `keptNanoseconds`
/// says). Encoded packets go in groups, each begun by a key frame (`startsGroup`): the ring
/// lets a whole group go or none of it, so what it keeps always begins where a decoder can.
/// Pure: the caller owns the payloads' memory.
public struct PreRollRing<Payload> {
    public struct Entry {
        public var fleetTime: UInt64
        public var bytes: Int
        public var startsGroup: Bool
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
    /// The fleet time of the newest kept frame.
    public var newestFleetTime: UInt64? { entries.last.flatMap { $0?.fleetTime } }

    private var oldest: Entry? { entries[safe: head] ?? nil }

    /// The time from the oldest kept frame to the newest.
    public var keptNanoseconds: UInt64 {
        guard let first = oldest, let last = entries.last ?? nil else { return 0 }
        return last.fleetTime &- first.fleetTime
    }

    /// Keeps a frame (in capture order) and returns what no longer fits, oldest first. With
    /// pre-roll off, a frame larger than the whole budget, or a packet that begins no group
    /// with nothing kept before it (it could not be decoded), the frame itself comes back.
    public mutating func append(fleetTime: UInt64, bytes: Int, startsGroup: Bool = true, payload: Payload) -> [Payload] {
        guard settings.isOn, bytes <= budgetInForce, startsGroup || count > 0 else { return [payload] }
        entries.append(Entry(fleetTime: fleetTime, bytes: bytes, startsGroup: startsGroup, payload: payload))
        keptBytes += bytes
        var evicted: [Payload] = []
        let window = settings.windowNanoseconds
        while let oldest, count > 1,
            keptBytes > budgetInForce || (fleetTime > oldest.fleetTime && fleetTime - oldest.fleetTime > window)
        {
            evicted.append(contentsOf: evictGroup())
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

    /// What a decoder needs for the kept frame captured nearest `instant`, if one lies within
    /// `reach` of it: from the entry that begins its group (its key frame) through it, oldest
    /// first; empty when none lies within reach.
    public func group(reaching instant: UInt64, within reach: UInt64) -> [Entry] {
        let kept = entries[head...].compactMap { $0 }
        let distance = { (entry: Entry) in entry.fleetTime > instant ? entry.fleetTime - instant : instant - entry.fleetTime }
        guard let nearest = kept.indices.filter({ distance(kept[$0]) <= reach }).min(by: { distance(kept[$0]) < distance(kept[$1]) }),
            let start = kept[...nearest].lastIndex(where: \.startsGroup)
        else { return [] }
        return Array(kept[start...nearest])
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
        let window = settings.windowNanoseconds
        let newest = (entries.last ?? nil)?.fleetTime ?? 0
        while let oldest, keptBytes > budgetInForce || newest - oldest.fleetTime > window {
            evicted.append(contentsOf: evictGroup())
        }
        compact()
        return evicted
    }

    /// Lets the oldest frame go, and with it the rest of its group (raw frames are groups of
    /// one): their slots are emptied, their payloads handed back.
    private mutating func evictGroup() -> [Payload] {
        var evicted: [Payload] = []
        while let entry = oldest, evicted.isEmpty || !entry.startsGroup {
            keptBytes -= entry.bytes
            entries[head] = nil
            head += 1
            evicted.append(entry.payload)
        }
        return evicted
    }

    /// Drops the evicted slots now and then, so appending stays O(1) amortised.

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
