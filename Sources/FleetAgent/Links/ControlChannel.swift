import FleetBus
import FleetCore
import FleetProtocol
import Logging
import Synchronization

/// What the control channel asks of the rest of the agent. Called on the control thread.
struct ControlHandlers: Sendable {
    var hello: @Sendable () -> Capfleet_V1_Hello
    var status: @Sendable () -> Capfleet_V1_AgentStatus
    /// nil: the reply comes later, through `ControlChannel.post(reply:)`.
    var command: @Sendable (Capfleet_V1_Command) -> Capfleet_V1_CommandReply?
    var registered: @Sendable (_ frameIngestPort: UInt32, _ clockPort: UInt32, _ recordPort: UInt32) -> Void
    /// An admin revoked this node; the agent must stop.
    var revoked: @Sendable (_ reason: String) -> Void
    /// The coordinator's latest set of devices whose full-rate frames it wants.
    var liveFrames: @Sendable (Capfleet_V1_LiveFrames) -> Void
}

/// The agent's DEALER to the coordinator's control ROUTER, on a thread of its own. The
/// dialog's rules live in `AgentLink`; this performs its directives.
final class ControlChannel: Sendable {
    private let loop: SocketLoop
    private let outbox: DeviceEventOutbox
    private let dealer: SocketLoop.SocketID
    private let logger: Logger

    init(
        context: ZMQContext, endpoint: String, nodeID: String, coordinatorKey: CurvePublicKey, keys: CurveKeyPair,
        handlers: ControlHandlers, logger: Logger
    ) throws(ZMQError) {
        loop = SocketLoop(name: "control")
        outbox = DeviceEventOutbox()
        let driver = try LinkDriver(
            context: context, endpoint: endpoint, nodeID: nodeID, credentials: (coordinatorKey, keys),
            handlers: handlers, outbox: outbox, logger: logger)
        dealer = loop.add(driver.current) { socket in driver.drain(socket) }
        driver.socketID = dealer
        self.logger = logger
        driver.monitorID = loop.add(driver.currentMonitor) { monitor in driver.watch(monitor) }
        // Heartbeats, status and reconnection run on second-long intervals; events and
        // replies wake the loop themselves (`flush`), so a coarse tick keeps an idle agent cheap.
        loop.every(nanoseconds: 100_000_000) { sockets in driver.tick(sockets) }
        loop.start()
    }

    func stop() { loop.stop() }

    /// Sends a device event (from any thread) as soon as the control thread wakes.
    func post(_ event: Capfleet_V1_DeviceEvent) {
        outbox.post(.with { $0.deviceEvent = event })
        flush()
    }

    /// Sends a command's reply that was not ready when the command came (a reconfiguration
    /// done on the device's thread, FindFirstFrame) as soon as the control thread wakes, after
    /// the events queued before it.
    func post(reply: Capfleet_V1_CommandReply) {
        outbox.post(.with { $0.commandReply = reply })
        flush()
    }

    /// Sends a pressure level change, after the device events before it.
    func post(pressureChange report: Capfleet_V1_PressureReport) {
        outbox.post(.with { $0.pressureChange = report })
        flush()
    }

    /// A detection report: dropped rather than queued while the channel is closed or backed
    /// up (it is news only now, and must never push out an event).
    func post(detection report: Capfleet_V1_DetectionReport) {
        guard outbox.offer(.with { $0.detection = report }) else { return }
        flush()
    }

    /// A batch of a sensor stream's readings (sensors.md): like a detection report, refused
    /// (false) rather than queued while the channel is closed or backed up.
    func post(sensorData batch: Capfleet_V1_SensorData) -> Bool {
        guard outbox.offer(.with { $0.sensorData = batch }) else { return false }
        flush()
        return true
    }

    /// Wakes the control thread to send what the outbox holds, in order.
    private func flush() {
        let outbox = self.outbox, dealer = self.dealer, logger = self.logger
        loop.perform { sockets in
            for message in outbox.takeAll() { LinkDriver.send(message, on: sockets[dealer], logger: logger) }
        }
    }
}

/// The control channel once the agent has opened it. Before that (and after it closes),
/// what is posted goes nowhere: the coordinator has not heard of this node.
final class ControlMailbox: Sendable {
    private let channel = Mutex<ControlChannel?>(nil)

    func attach(_ channel: ControlChannel?) { self.channel.withLock { $0 = channel } }

    func post(_ event: Capfleet_V1_DeviceEvent) { channel.withLock { $0 }?.post(event) }
    func post(reply: Capfleet_V1_CommandReply) { channel.withLock { $0 }?.post(reply: reply) }
    func post(pressureChange report: Capfleet_V1_PressureReport) { channel.withLock { $0 }?.post(pressureChange: report) }
    func post(detection report: Capfleet_V1_DetectionReport) { channel.withLock { $0 }?.post(detection: report) }
    func post(sensorData batch: Capfleet_V1_SensorData) -> Bool { channel.withLock { $0 }?.post(sensorData: batch) ?? false }
}

/// Events (device events, pressure changes) and late replies waiting for the control
/// thread, which alone may use the socket. They wait while the agent is not registered: the
/// coordinator refuses a node's events before its WELCOME (a pressure change at start-up on a
/// loaded host, say), and the same process's replies are awaited on its new connection.
/// Events are bounded: the status report carries the same state, so dropping the oldest
/// loses no truth. Replies are never dropped here: a command without one leaves its caller
/// waiting until it times out.
final class DeviceEventOutbox: Sendable {
    private struct Queue {
        var messages: [Capfleet_V1_AgentMessage] = []
        var open = false
    }
    private let queue = Mutex(Queue())
    static let capacity = 64

    func post(_ message: Capfleet_V1_AgentMessage) {
        queue.withLock { queue in
            if queue.messages.count >= Self.capacity, let oldest = queue.messages.firstIndex(where: { !$0.isCommandReply }) {
                queue.messages.remove(at: oldest)
            }
            queue.messages.append(message)
        }
    }

    /// Queues `message` only if the outbox is open and less than half full; false otherwise.
    func offer(_ message: Capfleet_V1_AgentMessage) -> Bool {
        queue.withLock { queue in
            guard queue.open, queue.messages.count < Self.capacity / 2 else { return false }
            queue.messages.append(message)
            return true
        }
    }

    /// Whether what waits may go: set by the control thread as the dialog registers or
    /// starts registering again.
    func setOpen(_ open: Bool) { queue.withLock { $0.open = open } }

    /// What may be sent now, in order: nothing while closed.
    func takeAll() -> [Capfleet_V1_AgentMessage] {
        queue.withLock { queue in
            guard queue.open else { return [] }
            defer { queue.messages.removeAll() }
            return queue.messages
        }
    }
}

/// Loop-thread state of the control channel; never leaves that thread.
private final class LinkDriver {
    let context: ZMQContext
    let endpoint: String
    let nodeID: String
    let handlers: ControlHandlers
    let outbox: DeviceEventOutbox
    let logger: Logger
    var link: AgentLink
    var socketID: SocketLoop.SocketID?
    var monitorID: SocketLoop.SocketID?
    var current: ZMQSocket
    var currentMonitor: ZMQSocket
    var reportedRefusal: String?
    let credentials: (coordinatorKey: CurvePublicKey, keys: CurveKeyPair)
    var lastHandshakeComplaint: UInt64 = 0
    /// The clock port the latest WELCOME named.
    var clockPort: UInt32 = 0
    var recordPort: UInt32 = 0

    init(
        context: ZMQContext, endpoint: String, nodeID: String, credentials: (coordinatorKey: CurvePublicKey, keys: CurveKeyPair),
        handlers: ControlHandlers, outbox: DeviceEventOutbox, logger: Logger
    ) throws(ZMQError) {
        self.credentials = credentials
        self.outbox = outbox
        self.context = context
        self.endpoint = endpoint
        self.nodeID = nodeID
        self.handlers = handlers
        self.logger = logger
        link = AgentLink(now: MonotonicTime.now())
        (current, currentMonitor) = try Self.makeSocket(context: context, endpoint: endpoint, credentials: credentials)
    }

    /// A fresh DEALER and the PAIR that watches its handshakes.
    static func makeSocket(
        context: ZMQContext, endpoint: String,
        credentials: (coordinatorKey: CurvePublicKey, keys: CurveKeyPair)
    ) throws(ZMQError) -> (ZMQSocket, ZMQSocket) {
        let socket = try ZMQSocket(context: context, type: .dealer)
        try socket.makeCurveClient(serverKey: credentials.coordinatorKey, keys: credentials.keys)
        try socket.use(.control)
        let monitor = try socket.openMonitor(context: context, events: SocketEvent.handshakeEvents)
        try socket.set([.onlyCompletedConnections, .sendQueue(messages: 64), .reconnect(firstMilliseconds: 250, maxMilliseconds: 8000)])
        try socket.connect(endpoint)
        return (socket, monitor)
    }

    /// A refused handshake never reaches the dialog: say why here, at most every 30 s.
    func watch(_ monitor: ZMQSocket) {
        for event in SocketEvent.drain(monitor) where event.isHandshakeFailure {
            let now = MonotonicTime.now()
            guard now - lastHandshakeComplaint > 30_000_000_000 || lastHandshakeComplaint == 0 else { continue }
            lastHandshakeComplaint = now
            let why =
                event.event == SocketEvent.authFailure
                ? "the coordinator refused this node's key: it was revoked, or the coordinator's database no longer knows it; enroll again with a new token"
                : "secure handshake with the coordinator failed (\(event.handshakeFailure ?? "unknown")): is the coordinator's key the one this agent enrolled with?"
            logger.error("cannot connect to the coordinator", metadata: ["endpoint": "\(endpoint)", "reason": "\(why)"])
        }
    }

    func tick(_ sockets: SocketLoop.Sockets) {
        perform(link.tick(now: MonotonicTime.now()), sockets: sockets, on: current)
        sendWaiting()
    }

    /// Opens or closes the outbox with the dialog's phase and sends what may go.
    private func sendWaiting() {
        outbox.setOpen(link.phase == .registered)
        for message in outbox.takeAll() { Self.send(message, on: current, logger: logger) }
    }

    func drain(_ socket: ZMQSocket) {
        while let received = try? socket.receiveMultipart(dontWait: true), !received.overflowed {
            guard received.parts.count == 1,
                let message = try? Capfleet_V1_CoordinatorMessage(serializedBytes: received.parts[0].array)
            else {
                logger.warning("ignoring a malformed message from the coordinator", metadata: ["endpoint": "\(endpoint)"])
                continue
            }
            handle(message, socket: socket)
        }
    }

    private func handle(_ message: Capfleet_V1_CoordinatorMessage, socket: ZMQSocket) {
        let now = MonotonicTime.now()
        let inbound: AgentLink.Inbound
        switch message.body {
        case let .welcome(welcome)?:
            if welcome.status.isOK {
                clockPort = welcome.clockPort
                recordPort = welcome.recordPort
                inbound = .welcome(
                    frameIngestPort: welcome.frameIngestPort,
                    heartbeatIntervalNanoseconds: UInt64(max(welcome.heartbeatIntervalMs, 100)) * 1_000_000,
                    liveness: UInt64(max(welcome.heartbeatLiveness, 1)), statusHeartbeats: welcome.statusHeartbeats)
            } else {
                inbound = .refused(reason: welcome.status.reason)
                if reportedRefusal != welcome.status.reason {
                    reportedRefusal = welcome.status.reason
                    logger.error("the coordinator refused this agent", metadata: ["reason": "\(welcome.status.reason)"])
                }
            }
        case .reregister?:
            logger.info("the coordinator does not know this node (did it restart?): registering again")
            inbound = .reregister
        case let .command(command)?:
            if let reply = handlers.command(command) { send(.with { $0.commandReply = reply }, on: socket) }
            inbound = .other
        case let .error(status)?:
            logger.warning("the coordinator refused a message", metadata: ["reason": "\(status.reason)"])
            inbound = .other
        case let .revoked(status)?:
            logger.critical("an admin revoked this node", metadata: ["reason": "\(status.reason)"])
            handlers.revoked(status.reason)
            inbound = .other
        case let .liveFrames(wanted)?:
            handlers.liveFrames(wanted)
            inbound = .other
        case .enrolled?:
            inbound = .other
        case .heartbeatAck?, nil:
            inbound = .other
        }
        perform(link.received(inbound, now: now), sockets: nil, on: socket)
        sendWaiting()
    }

    private func perform(_ directives: [AgentLink.Directive], sockets: SocketLoop.Sockets?, on socket: ZMQSocket) {
        var socket = socket
        for directive in directives {
            switch directive {
            case .reconnect:
                guard let sockets, let socketID else { continue }
                do {
                    let (fresh, monitor) = try Self.makeSocket(context: context, endpoint: endpoint, credentials: credentials)
                    sockets.replace(socketID, with: fresh)
                    if let monitorID { sockets.replace(monitorID, with: monitor) }
                    current = fresh
                    currentMonitor = monitor
                    socket = fresh
                } catch {
                    logger.error("cannot open a new control socket", metadata: ["error": "\(error)"])
                }
            case .sendHello:
                link.helloSent(accepted: send(.with { $0.hello = handlers.hello() }, on: socket), now: MonotonicTime.now())
            case let .sendHeartbeat(sequence):
                send(
                    .with {
                        $0.heartbeat = .with {
                            $0.nodeID = nodeID
                            $0.sequence = sequence
                            $0.monotonicNs = MonotonicTime.now()
                        }
                    }, on: socket)
            case .sendStatus:
                send(.with { $0.status = handlers.status() }, on: socket)
            case let .sendStatusAsHeartbeat(sequence):
                var status = handlers.status()
                status.heartbeatSequence = sequence
                send(.with { $0.status = status }, on: socket)
            case let .registered(port):
                reportedRefusal = nil
                logger.info("registered with the coordinator", metadata: ["endpoint": "\(endpoint)", "frame.ingest.port": "\(port)"])
                handlers.registered(port, clockPort, recordPort)
            case .lostCoordinator:
                // Frames keep being captured; with no coordinator they wait in the outbox,
                // where newer ones replace them (counted late), until it is back.
                logger.warning("the coordinator went silent; reconnecting", metadata: ["endpoint": "\(endpoint)"])
            }
        }
    }

    /// True when the socket took the message.
    @discardableResult
    private func send(_ message: Capfleet_V1_AgentMessage, on socket: ZMQSocket) -> Bool {
        guard let bytes: [UInt8] = try? message.serializedBytes() else { return false }
        // Never block the control thread: a message the socket cannot take now is resent
        // by the dialog (HELLO on back-off, heartbeats every interval).
        return (try? socket.send(bytes, dontWait: true)) ?? false
    }

    /// Sends a queued event or reply; one the socket cannot take now (no coordinator, a full
    /// queue) is logged, not retried: the status report carries the same state, and the
    /// coordinator times out a command whose reply never comes.
    static func send(_ message: Capfleet_V1_AgentMessage, on socket: ZMQSocket, logger: Logger) {
        do {
            let bytes: [UInt8] = try message.serializedBytes()
            guard try socket.send(bytes, dontWait: true) else {
                logger.warning("the control socket cannot take a message now; it is dropped", metadata: ["message": "\(message.kindName)"])
                return
            }
        } catch {
            logger.warning("cannot send a message to the coordinator", metadata: ["message": "\(message.kindName)", "error": "\(error)"])
        }
    }
}

extension Capfleet_V1_AgentMessage {
    var isCommandReply: Bool {
        if case .commandReply? = body { return true }
        return false
    }

    /// What the message is, for logs.
    var kindName: String {
        switch body {
        case .commandReply?: "command reply"
        case .deviceEvent?: "device event"
        case .pressureChange?: "pressure change"
        default: "message"
        }
    }
}
