import ArgumentParser

struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench", abstract: "Benchmarks that print their figures.", subcommands: [TransportBench.self, CommandBench.self, TelemetryBench.self])
}
