import FleetBus
import FleetCore
import FleetProtocol
import Synchronization

/// The coordinator's side of clock synchronisation: a ROUTER of its own that answers every
/// probe on its thread, stamping when the probe came off the wire and, last thing before
/// the send, when the answer leaves, both in fleet time. Nothing async in between: a probe
/// answered late is only a slower probe, but one stamped far from the wire is a wrong one.
final class ClockEndpoint: Sendable {
    let boundEndpoint: String
    private let loop: SocketLoop

    /// What the clock costs the coordinator, for its metrics: probes answered, the agents
    /// probing and the pace asked of them.
    final class Statistics: Sendable {
        let answered = Atomic<UInt64>(0)
        let agents = Atomic<Int>(0)
        let paceMilliseconds = Atomic<UInt32>(0)
    }
    let statistics = Statistics()

    init(
        context: ZMQContext, bind endpoint: String, security: CurveServerSecurity, fleetTime: FleetTimeSource,
        coordinatorID: String, probeBudget: Double, rejections: RejectionCounter
    ) throws(ZMQError) {
        let socket = try ZMQSocket(context: context, type: .router)
        try socket.set([.maxMessageBytes(4096), .sendQueue(messages: 1000)])
        try socket.use(.control)
        loop = SocketLoop(name: "clock")
        try security.apply(to: socket, loop: loop, context: context)
        try socket.bind(endpoint)
        boundEndpoint = try socket.lastEndpoint()
        // The pace each answer suggests (clock.md, "Pace"); on the loop's thread only.
        var pacer = ClockProbePacer(budget: probeBudget)
        let statistics = self.statistics
        loop.add(socket) { socket in
            while let received = try? socket.receiveMultipart(dontWait: true, maxParts: 3) {
                let arrived = fleetTime.now()
                guard received.parts.count == 2, !received.overflowed, let routing = received.parts.first else {
                    rejections.reject(
                        endpoint: "clock", reason: .wrongPartCount, peer: received.parts.first?.peerAddress ?? "unknown peer",
                        detail: "a clock probe is exactly one part")
                    continue
                }
                let peer = received.parts[1]
                // ZAP admits only node keys here; anything else never gets this far.
                guard peer.userID(hasPrefix: Principal.nodePrefix) else { continue }
                guard let probe = try? Capfleet_V1_ClockProbeRequest(serializedBytes: peer.array) else {
                    rejections.reject(
                        endpoint: "clock", reason: .undecodable, peer: peer.peerAddress ?? "unknown peer",
                        detail: "not a ClockProbeRequest (\(peer.count) bytes)")
                    continue
                }
                var reply = Capfleet_V1_ClockProbeReply()
                reply.lockedProbeIntervalMs = UInt32(pacer.heard(from: routing.array, at: arrived) / 1_000_000)
                statistics.answered.add(1, ordering: .relaxed)
                statistics.agents.store(pacer.agents, ordering: .relaxed)
                statistics.paceMilliseconds.store(reply.lockedProbeIntervalMs, ordering: .relaxed)
                reply.sequence = probe.sequence
                reply.agentSentNs = probe.agentSentNs
                reply.coordinatorID = coordinatorID
                reply.timebase = fleetTime.epochOffset
                if probe.protocolVersion == WireDefaults.protocolMajor {
                    reply.status = .ok
                    reply.coordinatorReceivedNs = arrived
                    reply.coordinatorSentNs = fleetTime.now()
                } else {
                    reply.status = .failure(.incompatible, "this coordinator speaks protocol version \(WireDefaults.protocolMajor.rawValue)")
                }
                guard let bytes: [UInt8] = try? reply.serializedBytes() else { continue }
                _ = try? socket.send(parts: [routing.array, bytes], dontWait: true)
            }
        }
        loop.start()
    }

    func stop() { loop.stop() }
}
