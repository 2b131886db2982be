import ArgumentParser

struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench", abstract: "Benchmarks that print their figures.", subcommands: [TransportBench.self, CommandBench.self, TelemetryBench.self, ClockBench.self, RecordBench.self])
}

/// A figure as the benchmarks print it: one decimal.
func fmt(_ value: Double) -> String { String(format: "%.1f", value) }
