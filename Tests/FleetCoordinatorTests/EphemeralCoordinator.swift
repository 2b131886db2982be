import FleetCoordinator
import Foundation

/// A coordinator for a test in this process: its data in a directory of its own, every
/// endpoint (HTTP too) on a port of 127.0.0.1 the kernel picks, so tests run side by side.
enum EphemeralCoordinator {
    static func configuration(named name: String) -> CoordinatorConfiguration {
        let dataDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("capfleet-\(name)-\(UUID().uuidString)").path
        var configuration = CoordinatorConfiguration(
            dataDirectory: dataDirectory, bindHost: "127.0.0.1", controlPort: 0, frameIngestPort: 0,
            operatorPort: 0, telemetryPort: 0, metricsPort: 0)
        configuration.clockPort = 0
        configuration.recordPort = 0
        configuration.livePort = 0
        return configuration
    }
}
