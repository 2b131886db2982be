import ArgumentParser
import FleetProtocol
import Foundation

/// `capfleet-bench`: CaptureFleet's benchmarks, a binary of their own so that the product
/// (`capfleet`, the Debian package, the image) carries none of them. They start real
/// `capfleet` processes, the one built beside this binary (or CAPFLEET_BINARY).
@main
struct CapfleetBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "capfleet-bench",
        abstract: "Benchmarks that print their figures.",
        discussion: "They run the capfleet beside this binary: build it too (swift build -c release --product capfleet).",
        version: "\(WireDefaults.release) (protocol \(WireDefaults.protocolMajor.rawValue).\(WireDefaults.protocolMinor))",
        subcommands: [
            TransportBench.self, CommandBench.self, TelemetryBench.self, ClockBench.self, StillBench.self, RecordBench.self, FleetBench.self,
            PreviewBench.self, ViewBench.self, EncodeBench.self, DashboardBench.self, SyncBench.self, SensorBench.self, SoundBench.self,
            GenICamBench.self,
            GenICamTriggerBench.self, PreRollBench.self, FramingBench.self, OffloadBench.self,
        ])
}

/// A figure as the benchmarks print it: one decimal.
func fmt(_ value: Double) -> String { String(format: "%.1f", value) }

/// The `p` quantile (0 to 1) of figures sorted ascending, by nearest rank.
func quantile(_ sorted: [Double], _ p: Double) -> Double {
    sorted[min(sorted.count - 1, max(0, Int((Double(sorted.count) * p).rounded(.up)) - 1))]
}

/// Prints at once, even into a pipe (the benchmarks run for minutes).
func progress(_ text: String) {
    print(text)
    fflush(nil)
}

/// Why a benchmark could not measure: what failed, in one line.
struct BenchFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
