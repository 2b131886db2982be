import FleetCore

/// What a link does to the bytes crossing it, as `capfleet-relay` applies it: a one-way
/// delay per direction with uniform jitter, "loss", and periodic delay spikes. The relay
/// carries TCP streams, so nothing is ever dropped: a lost segment is what TCP makes of it,
/// a stall until the retransmission, with everything behind it in that direction waiting too.
///
/// Written as `key=value` words separated by commas or spaces, e.g.
/// `delay=1ms,jitter=200us` or `up=1.5ms down=0.5ms loss=5% spike=20ms spike-every=10s`.
public struct LinkImpairment: Sendable, Equatable, CustomStringConvertible {
    /// One-way delay toward the target (`up`) and back toward the listener (`down`), ns.
    public var upDelay: UInt64 = 0
    public var downDelay: UInt64 = 0
    /// Each chunk's delay varies uniformly by up to this much either way, ns.
    public var jitter: UInt64 = 0
    /// Share of chunks lost, 0 ..< 1, and how long TCP takes to get one through again.
    public var loss: Double = 0
    public var stall: UInt64 = 200_000_000
    /// Extra delay for `spikeLength` every `spikePeriod` (the first one a period after the
    /// relay starts), in the directions `spikeDirections` says.
    public var spike: UInt64 = 0
    public var spikePeriod: UInt64 = 10_000_000_000
    public var spikeLength: UInt64 = 1_000_000_000
    public var spikeDirections: Set<RelayDirection> = [.up, .down]
    /// Seeds the jitter and loss draws, so a run can be repeated.
    public var seed: UInt64 = 1

    public static let none = LinkImpairment()

    public init() {}

    public var isNone: Bool { upDelay == 0 && downDelay == 0 && jitter == 0 && loss == 0 && spike == 0 }

    public func delay(_ direction: RelayDirection) -> UInt64 { direction == .up ? upDelay : downDelay }

    /// Whether `elapsed` ns after the relay started falls in a spike.
    public func inSpike(elapsed: UInt64, direction: RelayDirection) -> Bool {
        guard spike > 0, spikePeriod > 0, spikeDirections.contains(direction), elapsed >= spikePeriod else { return false }
        return elapsed % spikePeriod < spikeLength
    }

    public var description: String {
        if isNone { return "none" }
        var words: [String] = []
        if upDelay == downDelay {
            words.append("delay=\(Self.spell(upDelay))")
        } else {
            words.append("up=\(Self.spell(upDelay))")
            words.append("down=\(Self.spell(downDelay))")
        }
        if jitter > 0 { words.append("jitter=\(Self.spell(jitter))") }
        if loss > 0 { words.append("loss=\(loss * 100)%"); words.append("stall=\(Self.spell(stall))") }
        if spike > 0 {
            words.append("spike=\(Self.spell(spike))")
            words.append("spike-every=\(Self.spell(spikePeriod))")
            words.append("spike-for=\(Self.spell(spikeLength))")
            if spikeDirections.count == 1, let only = spikeDirections.first { words.append("spike-dir=\(only.rawValue)") }
        }
        return words.joined(separator: ",")
    }

    static func spell(_ nanoseconds: UInt64) -> String {
        if nanoseconds == 0 { return "0" }
        for (suffix, scale) in [("s", 1_000_000_000), ("ms", 1_000_000), ("us", 1_000)] as [(String, UInt64)] where nanoseconds % scale == 0 {
            return "\(nanoseconds / scale)\(suffix)"
        }
        return "\(nanoseconds)ns"
    }
}

public enum RelayDirection: String, Sendable, Hashable, CaseIterable {
    /// From the side that connected to the relay toward the relay's target.
    case up
    /// Back from the target.
    case down
}

public struct LinkImpairmentError: Error, Equatable, CustomStringConvertible {
    public var description: String
}

extension LinkImpairment {
    public static let keys = ["delay", "up", "down", "jitter", "loss", "stall", "spike", "spike-every", "spike-for", "spike-dir", "seed"]

    /// Parses a specification; an empty one is no impairment.
    public init(specification text: String) throws(LinkImpairmentError) {
        self.init()
        let words = text.split(whereSeparator: { $0 == "," || $0 == " " || $0 == "\n" || $0 == "\t" })
        for word in words {
            let parts = word.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, !parts[1].isEmpty else {
                throw LinkImpairmentError(description: "cannot read '\(word)': write key=value, keys \(Self.keys.joined(separator: ", "))")
            }
            let (key, value) = (parts[0], parts[1])
            switch key {
            case "delay":
                upDelay = try Self.duration(value, key)
                downDelay = upDelay
            case "up": upDelay = try Self.duration(value, key)
            case "down": downDelay = try Self.duration(value, key)
            case "jitter": jitter = try Self.duration(value, key)
            case "stall": stall = try Self.duration(value, key)
            case "spike": spike = try Self.duration(value, key)
            case "spike-every": spikePeriod = try Self.duration(value, key)
            case "spike-for": spikeLength = try Self.duration(value, key)
            case "spike-dir":
                switch value {
                case "up": spikeDirections = [.up]
                case "down": spikeDirections = [.down]
                case "both": spikeDirections = [.up, .down]
                default: throw LinkImpairmentError(description: "spike-dir must be up, down or both, not '\(value)'")
                }
            case "loss":
                let share = value.hasSuffix("%") ? Double(value.dropLast()).map { $0 / 100 } : Double(value)
                guard let share, share.isFinite, share >= 0, share < 1 else {
                    throw LinkImpairmentError(description: "loss must be a share below 1 or a percentage below 100%, not '\(value)'")
                }
                loss = share
            case "seed":
                guard let number = UInt64(value) else { throw LinkImpairmentError(description: "seed must be a whole number, not '\(value)'") }
                seed = number
            default:
                throw LinkImpairmentError(description: "unknown impairment '\(key)': keys are \(Self.keys.joined(separator: ", "))")
            }
        }
        guard spikePeriod > 0, spikeLength <= spikePeriod else {
            throw LinkImpairmentError(description: "spike-for (\(Self.spell(spikeLength))) must not exceed spike-every (\(Self.spell(spikePeriod)))")
        }
    }

    /// "1ms", "200us", "1.5ms", "0"; at most a minute.
    static func duration(_ text: String, _ key: String) throws(LinkImpairmentError) -> UInt64 {
        if text == "0" { return 0 }
        for (suffix, scale) in [("ns", 1.0), ("us", 1e3), ("ms", 1e6), ("s", 1e9)] where text.hasSuffix(suffix) {
            if let value = Double(text.dropLast(suffix.count)), value.isFinite, value >= 0, value * scale <= 60e9 {
                return UInt64((value * scale).rounded())
            }
            break
        }
        throw LinkImpairmentError(description: "\(key) must be a duration up to 60s such as 1ms, 200us or 1.5s, not '\(text)'")
    }
}

/// When each chunk crossing one direction of one connection is delivered: arrival plus the
/// link's delay, jitter, spike and loss stall, never before the chunk ahead of it (TCP keeps
/// order). Pure apart from its seeded random draws.
public struct DeliverySchedule: Sendable {
    public let direction: RelayDirection
    /// When the relay started (its spikes count from then), ns.
    public let origin: UInt64
    private var random: SplitMix
    private var lastDue: UInt64 = 0

    public init(direction: RelayDirection, origin: UInt64, seed: UInt64) {
        self.direction = direction
        self.origin = origin
        random = SplitMix(seed: seed &+ (direction == .up ? 0 : 0x9E37_79B9))
    }

    /// The delivery time of a chunk that arrived at `arrival` (monotonic ns).
    public mutating func due(arrival: UInt64, impairment: LinkImpairment) -> UInt64 {
        var delay = Int64(impairment.delay(direction))
        if impairment.jitter > 0 {
            let span = Int64(impairment.jitter)
            delay += Int64(random.next() % UInt64(2 * span + 1)) - span
        }
        if impairment.inSpike(elapsed: arrival &- origin, direction: direction) { delay += Int64(impairment.spike) }
        if impairment.loss > 0, Double(random.next() >> 11) / Double(1 << 53) < impairment.loss { delay += Int64(impairment.stall) }
        let due = max(arrival &+ UInt64(max(delay, 0)), lastDue)
        lastDue = due
        return due
    }
}
