import FleetCore
import Foundation

/// A small mutation fuzzer: starts from valid inputs (seeds) and feeds a target bit flips,
/// byte insertions and deletions, truncations, splices of two seeds, "interesting" values
/// written over varints and length prefixes, and plain random bytes, for a bounded time.
/// Seeded, so a failure can be replayed: the failing input is reported in hex with the seed.
/// What it checks is the target's business (decode without crashing, properties that must
/// hold); the fuzzer itself reports any single input that takes longer than `hangLimit`.
public struct Fuzzer {
    public struct Report: CustomStringConvertible, Sendable {
        public var target: String
        public var executions = 0
        public var decoded = 0
        public var slowest: Double = 0
        public var slowestInput: [UInt8] = []
        public var seconds: Double = 0

        public var description: String {
            String(format: "fuzz %@: %d inputs in %.1f s (%d decoded), slowest %.3f ms", target, executions, seconds, decoded, slowest * 1000)
        }
    }

    /// Seconds per target: CAPFLEET_FUZZ_SECONDS, 3 by default (CI sets more).
    public static var secondsPerTarget: Double {
        ProcessInfo.processInfo.environment["CAPFLEET_FUZZ_SECONDS"].flatMap(Double.init) ?? 3
    }

    public static let hangLimit = 1.0
    var random: SplitMix
    let seeds: [[UInt8]]

    public init(seeds: [[UInt8]], seed: UInt64 = UInt64(Date().timeIntervalSince1970)) {
        self.seeds = seeds.isEmpty ? [[]] : seeds
        random = SplitMix(seed: seed)
    }

    /// Runs `body` on generated inputs for `seconds`, and on until `minimum` inputs have run (a
    /// busy machine takes longer rather than trying fewer; at most a minute, so a target that
    /// hangs still ends); `body` returns whether the input decoded.
    public mutating func run(
        _ target: String, seconds: Double = Fuzzer.secondsPerTarget, atLeast minimum: Int = 0, _ body: ([UInt8]) -> Bool
    ) -> Report {
        var report = Report(target: target)
        let start = Date()
        while Date().timeIntervalSince(start) < seconds || (report.executions < minimum && Date().timeIntervalSince(start) < 60) {
            let input = next()
            let began = DispatchTime.now().uptimeNanoseconds
            if body(input) { report.decoded += 1 }
            let took = Double(DispatchTime.now().uptimeNanoseconds - began) / 1e9
            if took > report.slowest {
                report.slowest = took
                report.slowestInput = input
            }
            report.executions += 1
        }
        report.seconds = Date().timeIntervalSince(start)
        return report
    }

    public mutating func next() -> [UInt8] {
        let choice = random.below(20)
        if choice == 0 { return (0..<random.below(256)).map { _ in random.byte() } }
        var input = seeds[random.below(seeds.count)]
        if choice == 1, let other = seeds.randomElement(using: &random), !input.isEmpty, !other.isEmpty {
            // Splice: the head of one valid message and the tail of another.
            input = Array(input.prefix(random.below(input.count))) + Array(other.suffix(random.below(other.count)))
        }
        for _ in 0...random.below(4) { mutate(&input) }
        return input
    }

    private static let interesting: [[UInt8]] = [
        [0x00], [0x7F], [0x80, 0x01], [0xFF, 0xFF, 0xFF, 0xFF, 0x0F], [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01],
        [0xFF], [0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01], [0x01, 0x00, 0x00, 0x00], [0x0A, 0xFF, 0xFF, 0x03],
    ]

    private mutating func mutate(_ input: inout [UInt8]) {
        switch random.below(7) {
        case 0 where !input.isEmpty:  // flip a bit
            let index = random.below(input.count)
            input[index] ^= 1 << UInt8(random.below(8))
        case 1:  // insert random bytes
            let at = random.below(input.count + 1)
            input.insert(contentsOf: (0..<1 + random.below(8)).map { _ in random.byte() }, at: at)
        case 2 where !input.isEmpty:  // delete a run
            let at = random.below(input.count)
            input.removeSubrange(at..<min(input.count, at + 1 + random.below(8)))
        case 3 where !input.isEmpty:  // truncate
            input = Array(input.prefix(random.below(input.count)))
        case 4:  // overwrite with a value that tends to break varint and length handling
            let value = Self.interesting[random.below(Self.interesting.count)]
            let at = random.below(input.count + 1)
            input.replaceSubrange(at..<min(input.count, at + value.count), with: value)
        case 5 where !input.isEmpty:  // duplicate a chunk (repeated fields, long strings)
            let at = random.below(input.count)
            let chunk = input[at..<min(input.count, at + 1 + random.below(32))]
            input.insert(contentsOf: Array(chunk), at: random.below(input.count + 1))
        default:  // set a byte
            if input.isEmpty { input = [random.byte()] } else { input[random.below(input.count)] = random.byte() }
        }
    }
}
