/// The text of a timecode a camera films (proto-docs/clock.md, "Auditing exposures"): the true
/// time of the picture it is drawn into, in one of two clocks, as ASCII tokens separated by
/// single spaces:
///
///     CFTC1 M <boot-id> <ns>          CLOCK_MONOTONIC of the machine whose
///                                     /proc/sys/kernel/random/boot_id is <boot-id>
///     CFTC1 F <ns> <refresh-mHz>      fleet time, shown by a display refreshing at
///                                     <refresh-mHz> millihertz (0: unknown)
///
/// Numbers are decimal without sign or leading zeros; a boot id is a lowercase UUID. Parsing
/// is strict: any other text, however close, is not a timecode (a QR code that merely looks
/// like one must not become a figure).
public enum ExposureTimecode: Sendable, Equatable, Hashable {
    /// CLOCK_MONOTONIC ns of the machine `bootID` names (the synthetic scene).
    case hostMonotonic(bootID: String, nanoseconds: UInt64)
    /// Fleet ns, drawn by a display refreshing `refreshMillihertz` times a kilosecond (0: unknown).
    case fleet(nanoseconds: UInt64, refreshMillihertz: UInt32)

    /// The first token of every timecode; the digit is the format's version.
    public static let prefix = "CFTC1"

    public var nanoseconds: UInt64 {
        switch self {
        case let .hostMonotonic(_, nanoseconds), let .fleet(nanoseconds, _): nanoseconds
        }
    }

    /// What the QR code says.
    public var text: String {
        switch self {
        case let .hostMonotonic(bootID, nanoseconds): "\(Self.prefix) M \(bootID) \(nanoseconds)"
        case let .fleet(nanoseconds, refresh): "\(Self.prefix) F \(nanoseconds) \(refresh)"
        }
    }

    /// The timecode `text` says, or nil: it is not a timecode.
    public init?(text: String) {
        let tokens = text.utf8.split(separator: UInt8(ascii: " "), omittingEmptySubsequences: false)
        guard tokens.count == 4, tokens[0].elementsEqual(Self.prefix.utf8), tokens[1].count == 1 else { return nil }
        switch tokens[1].first {
        case UInt8(ascii: "M"):
            guard Self.isBootID(tokens[2]), let nanoseconds = Self.number(tokens[3], as: UInt64.self) else { return nil }
            self = .hostMonotonic(bootID: String(decoding: tokens[2], as: UTF8.self), nanoseconds: nanoseconds)
        case UInt8(ascii: "F"):
            guard let nanoseconds = Self.number(tokens[2], as: UInt64.self), let refresh = Self.number(tokens[3], as: UInt32.self) else {
                return nil
            }
            self = .fleet(nanoseconds: nanoseconds, refreshMillihertz: refresh)
        default:
            return nil
        }
    }

    /// Decimal digits only, no leading zero (but "0" itself), within `T`.
    static func number<T: FixedWidthInteger & UnsignedInteger>(_ digits: some Collection<UInt8>, as: T.Type) -> T? {
        guard let first = digits.first, digits.count <= 20, first != UInt8(ascii: "0") || digits.count == 1 else { return nil }
        var value: T = 0
        for digit in digits {
            guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(digit) else { return nil }
            let (times, overflowA) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflowB) = times.addingReportingOverflow(T(digit - UInt8(ascii: "0")))
            guard !overflowA, !overflowB else { return nil }
            value = sum
        }
        return value
    }

    /// 8-4-4-4-12 lowercase hexadecimal digits, as the kernel writes a boot id.
    public static func isBootID(_ text: some Collection<UInt8>) -> Bool {
        guard text.count == 36 else { return false }
        for (index, byte) in text.enumerated() {
            if [8, 13, 18, 23].contains(index) {
                guard byte == UInt8(ascii: "-") else { return false }
            } else {
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte) else {
                    return false
                }
            }
        }
        return true
    }
}
