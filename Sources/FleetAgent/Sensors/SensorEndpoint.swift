import FleetBus
import FleetCore
import FleetProtocol
import FleetSystem
import Foundation
import Logging
import Synchronization

/// The agent's sensor endpoint (sensors.md): a ZeroMQ PULL socket on a Unix socket of this
/// host, mode 0660, where any process of the agent's user or group sends the samples of the
/// streams the agent offers. It runs on a socket loop of its own; `SensorIntake` decides what
/// each message comes to, and this only performs it: reads, sends the batches due on the
/// control channel, logs refusals (at most once per stream and reason every 10 s).
final class SensorEndpoint: Sendable {
    /// A stream the agent offers, as HELLO lists it.
    struct Stream: Sendable {
        let name: String
        let deviceID: String

        var descriptor: Capfleet_V1_DeviceDescriptor {
            .with {
                $0.deviceID = deviceID
                $0.name = "Sensor stream \(name)"
                $0.driver = "capfleet-sensor-endpoint"
                $0.kind = .sensor
                $0.identitySource = "sensor-stream"
            }
        }
    }

    /// What the loop thread and the agent's other threads (status, consent) share.
    private final class Shared: Sendable {
        let intake: Mutex<SensorIntake>
        /// When each (stream, reason) was last logged, and refusals since.
        let warned = Mutex<[String: (at: UInt64, since: Int)]>([:])

        init(_ intake: SensorIntake) { self.intake = Mutex(intake) }
    }

    let path: String
    let streams: [Stream]
    private let shared: Shared
    private let loop: SocketLoop
    private let logger: Logger

    /// Longest path a Unix socket takes (sun_path, less the terminating zero and the
    /// temporary name's suffix).
    static let maxPathBytes = 107 - ".binding".utf8.count

    /// The streams `names` on node `nodeID`, with their device ids.
    static func streams(named names: [String], nodeID: String) -> [Stream] {
        let shortID = String(nodeID.replacingOccurrences(of: "node-", with: "").prefix(8))
        return names.map { Stream(name: $0, deviceID: SensorStreamName.deviceID(nodeShortID: shortID, stream: $0)) }
    }

    /// Binds the socket (nothing is received before `start`). Each stream starts with the
    /// consent `allowed` says; `send` hands a batch to the control channel, false if it
    /// could not take it.
    init(
        path: String, streams: [Stream], nodeID: String, context: ZMQContext, allowed: (String) -> Bool,
        fleetTime: @escaping @Sendable (UInt64) -> UInt64?, send: @escaping @Sendable (Capfleet_V1_SensorData) -> Bool, logger: Logger
    ) throws(SensorEndpointError) {
        self.path = path
        self.streams = streams
        self.logger = logger
        var intake = SensorIntake(nodeID: nodeID, streams: streams.map { ($0.name, $0.deviceID) })
        for stream in streams { intake.setAllowed(allowed(stream.deviceID), deviceID: stream.deviceID) }
        let shared = Shared(intake)
        self.shared = shared
        guard path.utf8.count <= Self.maxPathBytes else {
            throw .unusable(path: path, reason: "the path is \(path.utf8.count) bytes; a Unix socket's is at most \(Self.maxPathBytes)")
        }
        let socket: ZMQSocket
        do {
            socket = try ZMQSocket(context: context, type: .pull)
            try socket.set([.receiveQueue(messages: 10_000), .maxMessageBytes(1 << 20)])
            // Bound under a temporary name and opened to the group before it takes its own:
            // no sender reaches it with the mode libzmq gave it.
            let binding = path + ".binding"
            try socket.bind("ipc://" + binding)
            guard chmod(binding, 0o660) == 0, rename(binding, path) == 0 else {
                let reason = String(cString: strerror(errno))
                socket.close()
                unlink(binding)
                throw SensorEndpointError.unusable(path: path, reason: reason)
            }
        } catch let error as SensorEndpointError {
            throw error
        } catch {
            throw .unusable(path: path, reason: "\(error)")
        }
        loop = SocketLoop(name: "sensors")
        let flushTimer = loop.timer(after: intake.limits.flushIntervalNs) { [shared, logger] _ in
            let now = MonotonicTime.now()
            let (batches, next) = shared.intake.withLock { intake in (intake.due(now: now), intake.nextDue) }
            Self.hand(batches, to: send, shared: shared, logger: logger)
            return next.map { $0 > now ? $0 - now : 0 } ?? 1_000_000_000
        }
        loop.add(socket) { [loop, shared, logger] socket in
            while true {
                let received: (parts: [ZMQMessage], overflowed: Bool)?
                do {
                    received = try socket.receiveMultipart(dontWait: true, maxParts: 1)
                } catch {
                    logger.error("the sensor endpoint cannot receive", metadata: ["error": "\(error)"])
                    return
                }
                guard let received else { return }
                let now = MonotonicTime.now()
                // One part is one SensorSamples; more parts are not a message of this endpoint.
                let bytes = received.overflowed ? [] : received.parts[0].array
                let (outcome, startsWaiting) = shared.intake.withLock { intake in
                    let idle = intake.nextDue == nil
                    return (intake.received(bytes, now: now, fleetTime: fleetTime), idle && intake.nextDue != nil)
                }
                Self.hand(outcome.batches, to: send, shared: shared, logger: logger)
                if let refusal = outcome.refusal { Self.warn(refusal, outcome.detail, now: now, shared: shared, logger: logger) }
                if startsWaiting {
                    let delay = shared.intake.withLock { $0.limits.flushIntervalNs }
                    loop.perform { sockets in sockets.schedule(flushTimer, after: delay) }
                }
            }
        }
        loop.onStop { unlink(path) }
    }

    func start() { loop.start() }

    /// Closes the socket (its file goes with it); readings still waiting are not sent.
    func stop() { loop.stop() }

    func setAllowed(_ allowed: Bool, deviceID: String) { shared.intake.withLock { $0.setAllowed(allowed, deviceID: deviceID) } }

    func isAllowed(deviceID: String) -> Bool { shared.intake.withLock { $0.isAllowed(deviceID: deviceID) } }

    func owns(_ deviceID: String) -> Bool { streams.contains { $0.deviceID == deviceID } }

    /// Each stream's counters for the agent's status, and what the endpoint refused before
    /// it could name a stream.
    var status: (devices: [Capfleet_V1_DeviceCounters], messagesRefused: UInt64) {
        let now = MonotonicTime.now()
        return shared.intake.withLock { intake in
            let devices = streams.map { stream in
                let counters = intake.counters(deviceID: stream.deviceID) ?? SensorIntake.Counters()
                let allowed = intake.isAllowed(deviceID: stream.deviceID)
                // Flowing: a sample within the last two seconds.
                let flowing = counters.lastArrival != 0 && now &- counters.lastArrival < 2_000_000_000
                return Capfleet_V1_DeviceCounters.with {
                    $0.deviceID = stream.deviceID
                    $0.streaming = flowing
                    $0.realFrames = flowing && allowed
                    $0.samplesReceived = counters.received
                    $0.samplesRefused = counters.refused
                    $0.samplesWithheld = counters.withheld
                    $0.samplesUnsent = counters.unsent
                }
            }
            return (devices, intake.messagesRefused)
        }
    }

    private static func hand(
        _ batches: [Capfleet_V1_SensorData], to send: @Sendable (Capfleet_V1_SensorData) -> Bool, shared: Shared, logger: Logger
    ) {
        for batch in batches where !send(batch) {
            shared.intake.withLock { $0.unsent(batch) }
            logger.debug("sensor readings not sent: the control channel is closed or backed up", metadata: ["stream": "\(batch.stream)"])
        }
    }

    private static func warn(_ refusal: SensorIntake.Refusal, _ detail: String, now: UInt64, shared: Shared, logger: Logger) {
        let key = "\(refusal.rawValue) \(detail.prefix(while: { $0 != ":" }))"
        let since: Int? = shared.warned.withLock { table in
            var entry = table[key] ?? (at: 0, since: 0)
            entry.since += 1
            defer { table[key] = entry }
            guard entry.at == 0 || now &- entry.at >= 10_000_000_000 else { return nil }
            let count = entry.since
            entry = (at: now, since: 0)
            return count
        }
        guard let since else { return }
        logger.warning(
            "sensor samples refused", metadata: ["reason": "\(refusal.rawValue)", "detail": "\(detail)", "messages_since_last_said": "\(since)"])
    }
}

/// Why the sensor endpoint could not open.
enum SensorEndpointError: Error, CustomStringConvertible {
    case unusable(path: String, reason: String)

    var description: String {
        switch self {
        case let .unusable(path, reason):
            "cannot open the sensor endpoint at \(path): \(reason). Set sensor_socket (--sensor-socket) to a path in a directory the agent may write"
        }
    }
}
