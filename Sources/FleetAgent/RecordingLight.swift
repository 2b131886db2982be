import FleetCore
import FleetHost
import Foundation
import Logging
import Synchronization

/// The fleet's "recording light": an optional local command run when a device starts and
/// stops sending real frames (consent granted and streaming), e.g. to switch on a tally
/// lamp or show a notice. Runs on a thread of its own, in order, so a slow command never
/// holds up a capture thread; the device and what happened are in its environment:
/// CAPFLEET_DEVICE, CAPFLEET_NODE and CAPFLEET_REAL_FRAMES (on or off).
final class RecordingLight: Sendable {
    private let command: String
    private let nodeID: String
    private let logger: Logger
    private let queue = Mutex<[(deviceID: String, on: Bool)]>([])
    private let available = DispatchSemaphore(value: 0)
    private let stopped = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)
    static let timeoutMilliseconds: Int64 = 10_000

    init(command: String, nodeID: String, logger: Logger) {
        self.command = command
        self.nodeID = nodeID
        self.logger = logger
        let thread = Thread { [self] in
            ThreadName.set("cf-light")
            run()
        }
        thread.start()
    }

    /// Queues a change; never blocks.
    func set(deviceID: String, on: Bool) {
        queue.withLock { $0.append((deviceID, on)) }
        available.signal()
    }

    /// Runs what is queued (the last "off" matters most), then ends the thread.
    func stop() {
        guard !stopped.exchange(true, ordering: .acquiringAndReleasing) else { return }
        available.signal()
        finished.wait()
    }

    private func run() {
        defer { finished.signal() }
        while true {
            available.wait()
            while let change = queue.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) {
                do {
                    try ShellCommand.run(command, environment: [
                        "CAPFLEET_DEVICE": change.deviceID, "CAPFLEET_NODE": nodeID, "CAPFLEET_REAL_FRAMES": change.on ? "on" : "off",
                    ], timeoutMilliseconds: Self.timeoutMilliseconds)
                } catch {
                    logger.warning("the recording-light command failed", metadata: ["device.id": "\(change.deviceID)", "error": "\(error)"])
                }
            }
            if stopped.load(ordering: .acquiring) { return }
        }
    }
}
