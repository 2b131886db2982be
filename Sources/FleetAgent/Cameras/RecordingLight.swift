import FleetHost
import FleetSystem
import Logging

/// The fleet's "recording light": says in the log when a device starts and stops sending
/// real frames (consent granted and streaming) and, when configured, runs a local command
/// then, e.g. to switch on a tally lamp or show a notice. Runs on a thread of its own, in
/// order, so neither the log nor a slow command holds up a capture thread, and a device's
/// state can queue changes under its lock in the order it makes them. The device and what
/// happened are in the command's environment: CAPFLEET_DEVICE, CAPFLEET_NODE and
/// CAPFLEET_REAL_FRAMES (on or off).
final class RecordingLight: Sendable {
    struct Change: Sendable {
        let deviceID: String
        let on: Bool
    }

    private let worker: OwnedWorker<Change>
    static let timeoutMilliseconds: Int64 = 10_000

    /// `command`: nil to only log.
    init(command: String?, nodeID: String, logger: Logger) {
        worker = OwnedWorker(name: "cf-light", capacity: 256, whenFull: .dropOldest) { change in
            logger.notice(change.on ? "real frames leave this host" : "real frames stopped", metadata: ["device.id": "\(change.deviceID)"])
            guard let command else { return }
            do {
                try ShellCommand.run(
                    command,
                    environment: [
                        "CAPFLEET_DEVICE": change.deviceID, "CAPFLEET_NODE": nodeID, "CAPFLEET_REAL_FRAMES": change.on ? "on" : "off",
                    ], timeoutMilliseconds: Self.timeoutMilliseconds)
            } catch {
                logger.warning("the recording-light command failed", metadata: ["device.id": "\(change.deviceID)", "error": "\(error)"])
            }
        }
    }

    /// Queues a change; never blocks.
    func set(deviceID: String, on: Bool) { worker.offer(Change(deviceID: deviceID, on: on)) }

    /// Runs what is queued (the last "off" matters most), then ends the thread.
    func stop() async { await worker.stop() }
}
