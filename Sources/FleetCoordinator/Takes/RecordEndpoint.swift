import FleetBus
import FleetCore
import FleetProtocol
import Synchronization

/// The devices being recorded now, each with the thread that writes its part.
final class TakeWriters: Sendable {
    struct Key: Hashable, Sendable {
        let takeID: String
        let deviceID: String
    }

    private let writers = Mutex<[Key: TakeDeviceWriter]>([:])

    func add(_ writer: TakeDeviceWriter) {
        writers.withLock { $0[Key(takeID: writer.takeID, deviceID: writer.deviceID)] = writer }
    }

    func writer(takeID: String, deviceID: String) -> TakeDeviceWriter? {
        writers.withLock { $0[Key(takeID: takeID, deviceID: deviceID)] }
    }

    func remove(takeID: String, deviceID: String) -> TakeDeviceWriter? {
        writers.withLock { $0.removeValue(forKey: Key(takeID: takeID, deviceID: deviceID)) }
    }

    func all() -> [TakeDeviceWriter] { writers.withLock { Array($0.values) } }

    func of(takeID: String) -> [TakeDeviceWriter] { writers.withLock { $0.values.filter { $0.takeID == takeID } } }

    func of(deviceID: String) -> [TakeDeviceWriter] { writers.withLock { $0.values.filter { $0.deviceID == deviceID } } }

    func of(nodeID: String) -> [TakeDeviceWriter] { writers.withLock { $0.values.filter { $0.nodeID == nodeID } } }
}

/// The coordinator's end of the recording path (frames.md, "The recording path"): a ROUTER of
/// its own on its own thread. Each message is checked like a live frame, its sender must be
/// the node that has the device, and it goes to the thread writing that device's part.
final class RecordEndpoint: Sendable {
    static let endpointName = "record"
    let boundEndpoint: String
    let boundPort: UInt16
    private let loop: SocketLoop
    private let router: SocketLoop.SocketID

    /// - Parameter outlet: where the frames it takes go on to live consumers (a recorded
    ///   device's frames cross the network once, on this path).
    /// - Parameter agentTakes: where what agents say of the takes they record themselves goes;
    ///   `collector` takes the chunks of collected segments.
    init(
        context: ZMQContext, bind endpoint: String, security: CurveServerSecurity, rejections: RejectionCounter,
        gate: AccessGate, writers: TakeWriters, agentTakes: AgentRecordingsDesk? = nil, collector: SegmentCollector? = nil,
        outlet: RecordedFrameOutlet? = nil
    ) throws(ZMQError) {
        let socket = try ZMQSocket(context: context, type: .router)
        try socket.set(SocketSetup.coordinatorRecordEndpoint(maxMessageBytes: WireDefaults.maxMessageBytes))
        try socket.use(.bulk)
        loop = SocketLoop(name: "record")
        try security.apply(to: socket, loop: loop, context: context)
        try socket.bind(endpoint)
        boundEndpoint = try socket.lastEndpoint()
        boundPort = UInt16(boundEndpoint.split(separator: ":").last.flatMap { UInt16($0) } ?? 0)
        router = loop.add(socket) { socket in
            while let received = try? socket.receiveMultipart(dontWait: true, maxParts: 4) {
                Self.accept(
                    received.parts, overflowed: received.overflowed, rejections: rejections, gate: gate, writers: writers,
                    agentTakes: agentTakes, collector: collector, outlet: outlet
                ) { routing, message in
                    guard let bytes: [UInt8] = try? message.serializedBytes() else { return }
                    _ = try? socket.send(parts: [routing, bytes], dontWait: true)
                }
            }
        }
    }

    /// Starts taking messages: after the director has set up the parts in progress, so that
    /// no agent is told its part is unknown while the coordinator is still starting.
    func start() { loop.start() }

    /// Sends a message to the agent connection `routingID`; dropped if it is gone (the
    /// agent asks to resume).
    func send(to routingID: [UInt8], _ message: Capfleet_V1_RecordDown) {
        guard let bytes: [UInt8] = try? message.serializedBytes() else { return }
        let router = self.router
        loop.perform { sockets in
            _ = try? sockets[router].send(parts: [routingID, bytes], dontWait: true)
        }
    }

    func stop() { loop.stop() }

    private static func accept(
        _ parts: [ZMQMessage], overflowed: Bool, rejections: RejectionCounter, gate: AccessGate,
        writers: TakeWriters, agentTakes: AgentRecordingsDesk?, collector: SegmentCollector?, outlet: RecordedFrameOutlet?,
        answer: ([UInt8], Capfleet_V1_RecordDown) -> Void
    ) {
        guard let routing = parts.first?.array, parts.count >= 2 else { return }
        let first = parts[1]
        var peer: String { first.peerAddress ?? "unknown peer" }
        guard !overflowed, parts.count <= 3 else {
            rejections.reject(endpoint: endpointName, reason: .wrongPartCount, peer: peer, detail: "a recording message is one or two parts")
            return
        }
        guard let message = try? Capfleet_V1_RecordUp(serializedBytes: first.array) else {
            rejections.reject(endpoint: endpointName, reason: .undecodable, peer: peer, detail: "not a RecordUp (\(first.count) bytes)")
            return
        }
        guard message.protocolVersion == WireDefaults.protocolMajor else {
            rejections.reject(
                endpoint: endpointName, reason: .incompatibleVersion, peer: peer,
                detail: "protocol \(message.protocolVersion.rawValue) on the recording path")
            return
        }
        switch message.body {
        case .attach?, .segment?, .partEnd?, .chunk?, .check?, .stillChunk?, .stillHeld?, .offloaded?, .offloading?:
            acceptFromAgentLink(message, parts: parts, routing: routing, rejections: rejections, agentTakes: agentTakes, collector: collector)
            return
        default:
            break
        }
        guard let writer = writers.writer(takeID: message.takeID, deviceID: message.deviceID) else {
            // Not recorded (the take ended, or never included the device): the agent drops it.
            guard case .node? = Principal(userID: first.userID) else { return }
            answer(
                routing,
                .with {
                    $0.takeID = message.takeID
                    $0.deviceID = message.deviceID
                    $0.refused = .failure(.notFound, "take \(message.takeID) is not recording device \(message.deviceID) on this coordinator")
                })
            return
        }
        guard gate.admitsFrame(userID: first.userID, nodeID: writer.nodeID, fd: first.sourceFD, endpoint: .record, peer: { peer }) else { return }
        switch message.body {
        case let .resume(resume)?:
            guard parts.count == 2 else { return }
            writer.post(.resume(routingID: routing, resume))
        case let .frame(frame)?:
            guard parts.count == 3 else {
                rejections.reject(endpoint: endpointName, reason: .wrongPartCount, peer: peer, detail: "a recorded frame without its payload")
                return
            }
            let header = frame.header
            if let problem = FrameValidation.check(header: header, payloadBytes: parts[2].count, maxPayloadBytes: Int(WireDefaults.maxMessageBytes)) {
                rejections.reject(
                    endpoint: endpointName, reason: problem, peer: peer,
                    detail:
                        "device \(header.deviceID): header says \(header.payloadSize) bytes of \(header.layout.width)x\(header.layout.height) \(header.layout.pixelFormat), payload has \(parts[2].count)"
                )
                return
            }
            guard header.deviceID == message.deviceID, header.nodeID == writer.nodeID,
                header.flags & UInt32(Capfleet_V1_FrameFlag.fleetTimeValid.rawValue) != 0
            else {
                rejections.reject(
                    endpoint: endpointName, reason: .invalidFormat, peer: peer,
                    detail: "a recorded frame of \(header.deviceID) for \(message.deviceID) of node \(writer.nodeID), or without fleet time")
                return
            }
            if !writer.post(frame: frame, payload: parts[2], routingID: routing) {
                rejections.reject(
                    endpoint: endpointName, reason: .overCredit, peer: peer,
                    detail: "device \(header.deviceID): frame \(header.sequence) beyond the credit granted")
                return
            }
            // The device's viewers are served from here: raw frames to its raw viewers, an
            // encoded take's packets to the viewers of its encoded stream (raw viewers of an
            // encoded take get raw frames from the agent on the live path).
            outlet?.handOver(header: header, payload: parts[2])
        case let .end(end)?:
            writer.post(.end(routingID: routing, end))
        case .attach?, .segment?, .partEnd?, .chunk?, .check?, .stillChunk?, .stillHeld?, .offloaded?, .offloading?:
            break  // taken above
        case nil:
            rejections.reject(endpoint: endpointName, reason: .undecodable, peer: peer, detail: "a RecordUp with no body")
        }
    }

    /// What an agent's recordings link sends (takes recorded on the agents): only a node may,
    /// and only of its own devices, which the director checks against the index.
    private static func acceptFromAgentLink(
        _ message: Capfleet_V1_RecordUp, parts: [ZMQMessage], routing: [UInt8], rejections: RejectionCounter,
        agentTakes: AgentRecordingsDesk?, collector: SegmentCollector?
    ) {
        let first = parts[1]
        guard case let .node(nodeID, _)? = Principal(userID: first.userID) else {
            rejections.reject(
                endpoint: endpointName, reason: .wrongIdentity, peer: first.peerAddress ?? "unknown peer",
                detail: "a recordings report from a connection that is not a node's")
            return
        }
        guard let agentTakes else { return }
        switch message.body {
        case .attach?:
            agentTakes.attached(nodeID: nodeID, routingID: routing)
        case let .segment(segment)?:
            agentTakes.reported(
                AgentTakeReport(
                    nodeID: nodeID, routingID: routing, takeID: message.takeID, deviceID: message.deviceID,
                    body: .segment(segment)))
        case let .partEnd(end)?:
            agentTakes.reported(
                AgentTakeReport(
                    nodeID: nodeID, routingID: routing, takeID: message.takeID, deviceID: message.deviceID,
                    body: .partEnded(end)))
        case let .chunk(chunk)?:
            guard parts.count == 3 else {
                rejections.reject(
                    endpoint: endpointName, reason: .wrongPartCount, peer: first.peerAddress ?? "unknown peer",
                    detail: "a segment chunk without its bytes")
                return
            }
            collector?.received(chunk, bytes: parts[2], from: nodeID, takeID: message.takeID, deviceID: message.deviceID)
        case let .check(check)?:
            agentTakes.checked(takeID: message.takeID, deviceID: message.deviceID, check)
        case let .offloaded(result)?:
            agentTakes.offloaded(nodeID: nodeID, takeID: message.takeID, deviceID: message.deviceID, result)
        case let .offloading(progress)?:
            agentTakes.offloading(nodeID: nodeID, takeID: message.takeID, deviceID: message.deviceID, progress)
        case let .stillHeld(captured)?:
            agentTakes.stillHeld(AgentStillReport(nodeID: nodeID, stillID: message.takeID, deviceID: message.deviceID, captured: captured))
        case let .stillChunk(chunk)?:
            guard parts.count == 3 else {
                rejections.reject(
                    endpoint: endpointName, reason: .wrongPartCount, peer: first.peerAddress ?? "unknown peer",
                    detail: "a still's chunk without its bytes")
                return
            }
            collector?.received(chunk, bytes: parts[2], of: .still, from: nodeID, takeID: message.takeID, deviceID: message.deviceID)
        default:
            break
        }
    }
}
