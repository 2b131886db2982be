/// Percentiles of non-negative figures (ns) in a fixed amount of memory, however many are
/// added: values below 32 are kept exactly, larger ones in 32 buckets per power of two, so a
/// percentile is within 1/32 of the true value. The largest value is kept exactly.
/// A percentile is given as the top of its bucket: never below the true value, at most 3.2 %
/// above it, so a limit is never passed by rounding down.
/// A take's report adds one phase a second per camera for as long as the take runs; this
/// keeps that from growing with the take's length (at most 1,920 buckets, a few dozen in use).
public struct MagnitudeHistogram: Sendable, Equatable {
    private var counts: [UInt16: UInt64] = [:]
    public private(set) var count: UInt64 = 0
    public private(set) var max: UInt64 = 0

    public init() {}

    public mutating func add(_ value: UInt64) {
        counts[Self.bucket(of: value), default: 0] += 1
        count += 1
        max = Swift.max(max, value)
    }

    /// The value at quantile `q` (0...1): the smallest value with at least q of the samples
    /// at or below it, as the top of its bucket (never above the largest seen). 0 when empty.
    public func quantile(_ q: Double) -> UInt64 {
        guard count > 0 else { return 0 }
        let rank = Swift.max(1, UInt64((Double(count) * Swift.min(Swift.max(q, 0), 1)).rounded(.up)))
        var seen: UInt64 = 0
        for bucket in counts.keys.sorted() {
            seen += counts[bucket] ?? 0
            if seen >= rank { return Swift.min(Self.top(of: bucket), max) }
        }
        return max
    }

    public var median: UInt64 { quantile(0.5) }
    public var p99: UInt64 { quantile(0.99) }

    /// Buckets in use: what the histogram holds in memory.
    public var bucketsInUse: Int { counts.count }

    static func bucket(of value: UInt64) -> UInt16 {
        guard value >= 32 else { return UInt16(value) }
        let exponent = 63 - value.leadingZeroBitCount  // 5...63
        let sub = (value >> UInt64(exponent - 5)) & 31
        return UInt16((exponent - 4) * 32) + UInt16(sub)
    }

    static func top(of bucket: UInt16) -> UInt64 {
        guard bucket >= 32 else { return UInt64(bucket) }
        let exponent = Int(bucket) / 32 + 4
        let sub = UInt64(bucket % 32)
        let width: UInt64 = 1 << UInt64(exponent - 5)
        let lower = (32 + sub) << UInt64(exponent - 5)
        return lower + (width - 1)
    }
}
