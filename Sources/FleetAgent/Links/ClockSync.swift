import FleetBus
import FleetCore
import FleetProtocol
import Logging
import Synchronization

/// The agent's side of clock synchronisation: a DEALER of its own to the coordinator's clock
/// endpoint (so probes never queue behind frames or control), on a thread of its own, feeding
/// a `ClockEstimator`. Capture threads read the latest estimate to stamp frames in fleet time.
final class ClockSync: Sendable {
    /// What capture threads and the status report read.
    struct Snapshot: Sendable {
        var estimate: ClockEstimator.Estimate?
        var coordinatorID = ""
    }

    let nodeClock: NodeClock
    private let loop: SocketLoop
    private let socketID: SocketLoop.SocketID
    private let shared = SharedSnapshot()
    private let connected = Mutex<String?>(nil)

    init(context: ZMQContext, coordinatorKey: CurvePublicKey, keys: CurveKeyPair, nodeClock: NodeClock, logger: Logger) throws(ZMQError) {
        self.nodeClock = nodeClock
        let socket = try ZMQSocket(context: context, type: .dealer)
        try socket.makeCurveClient(serverKey: coordinatorKey, keys: keys)
        try socket.use(.control)
        // A probe that cannot leave now is worthless later: never queue one.
        try socket.set([.onlyCompletedConnections, .sendQueue(messages: 4)])
        loop = SocketLoop(name: "clock")
        let driver = ClockDriver(nodeClock: nodeClock, logger: logger)
        let shared = self.shared
        socketID = loop.add(socket) { socket in
            if let changed = driver.drain(socket) { shared.set(changed) }
        }
        let socketID = self.socketID
        // Wakes when the next probe is due, not on a fixed tick: probes are the only thing
        // this thread does unasked.
        loop.timer(after: 0) { sockets in
            let (changed, next) = driver.tick(sockets[socketID])
            if let changed { shared.set(changed) }
            return next
        }
        loop.start()
    }

    /// Points the probes at the coordinator's clock endpoint (from WELCOME); idempotent.
    func connect(to endpoint: String) {
        let previous = connected.withLock { current -> String? in
            defer { current = endpoint }
            return current
        }
        guard previous != endpoint else { return }
        let socketID = self.socketID
        loop.perform { sockets in
            if let previous { try? sockets[socketID].disconnect(previous) }
            try? sockets[socketID].connect(endpoint)
        }
    }

    func stop() { loop.stop() }

    var latest: Snapshot { shared.get() }

    /// A capture time (CLOCK_MONOTONIC) as the header carries it: in this node's clock, and
    /// in fleet time with its error bound once there is an estimate.
    func stamp(captureMonotonic: UInt64) -> (local: UInt64, fleet: UInt64, uncertainty: UInt64, state: ClockEstimator.State)? {
        let local = nodeClock.local(fromMonotonic: captureMonotonic)
        guard let estimate = shared.get().estimate else { return nil }
        let bound = estimate.mapping.uncertainty(atLocal: local)
        return (
            local, estimate.mapping.fleetTime(atLocal: local),
            bound.isFinite ? UInt64(min(max(bound, 0), 1e15).rounded(.up)) : UInt64(1e15), estimate.state
        )
    }

    /// The clock as AgentStatus reports it.
    var wire: Capfleet_V1_ClockState {
        let current = latest
        return .with {
            guard let estimate = current.estimate else {
                $0.sync = .unsynchronised
                return
            }
            let (now, wall) = nodeClock.nowWithWallClock()
            $0.sync = estimate.state.wire
            $0.offsetNs = estimate.mapping.offset(atLocal: now)
            $0.wallClockOffsetNs = Int64(bitPattern: wall &- estimate.mapping.fleetTime(atLocal: now))
            $0.driftPpm = estimate.mapping.driftPPM
            $0.uncertaintyNs = UInt64(min(max(estimate.mapping.uncertainty(atLocal: now), 0), 1e15).rounded(.up))
            $0.roundTripNs = UInt64(max(estimate.bestDelay, 0))
            $0.latestRoundTripNs = UInt64(max(estimate.latestDelay, 0))
            $0.probesUsed = UInt32(estimate.probesUsed)
            $0.coordinatorID = current.coordinatorID
        }
    }
}

/// The latest snapshot, written by the clock thread and read by capture threads.
private final class SharedSnapshot: Sendable {
    private let value = Mutex(ClockSync.Snapshot())
    func get() -> ClockSync.Snapshot { value.withLock { $0 } }
    func set(_ snapshot: ClockSync.Snapshot) { value.withLock { $0 = snapshot } }
}

extension ClockEstimator.State {
    var wire: Capfleet_V1_ClockState.Sync {
        switch self {
        case .unsynchronised: .unsynchronised
        case .synchronising: .synchronising
        case .locked: .locked
        }
    }
}

/// Loop-thread state of the clock sync; never leaves that thread.
private final class ClockDriver {
    let nodeClock: NodeClock
    let logger: Logger
    var estimator = ClockEstimator()
    var probes = ClockProbePairs()
    var nextProbeAt: UInt64 = 0
    var timebase: (coordinatorID: String, offset: UInt64)?
    /// The locked pace the coordinator's answers ask for (its probe budget spread over the
    /// fleet, clock.md "Pace"); 0: its own.
    var coordinatorPace: UInt64 = 0

    init(nodeClock: NodeClock, logger: Logger) {
        self.nodeClock = nodeClock
        self.logger = logger
    }

    /// Probes if one is due; returns a changed snapshot, if any, and how long until the next probe.
    func tick(_ socket: ZMQSocket) -> (ClockSync.Snapshot?, UInt64) {
        let now = nodeClock.now()
        var changed: ClockSync.Snapshot?
        if let state = estimator.tick(now: now) {
            logger.notice("clock", metadata: ["clock.state": "\(state.rawValue)"])
            changed = snapshot
        }
        guard now >= nextProbeAt else { return (changed, nextProbeAt - now) }
        // Half to one and a half intervals, at random: probes at a fixed pace lock in phase
        // with periodic traffic (frames every 33 ms, aligned across hosts), and if that phase
        // is a busy one every outbound probe waits and the floor the estimate rests on moves.
        nextProbeAt = now + UInt64(Double(estimator.probeInterval(coordinatorPace: coordinatorPace)) * Double.random(in: 0.5..<1.5))
        probes.expire(now: now)
        send(.wake, on: socket)
        return (changed, nextProbeAt - now)
    }

    /// Sends a probe, t1 read last, right before the send.
    private func send(_ purpose: ClockProbePairs.Purpose, on socket: ZMQSocket) {
        let sequence = probes.nextSequence()
        var request = Capfleet_V1_ClockProbeRequest.with {
            $0.protocolVersion = WireDefaults.protocolMajor
            $0.sequence = sequence
        }
        request.agentSentNs = nodeClock.now()
        guard let bytes: [UInt8] = try? request.serializedBytes(), (try? socket.send(bytes, dontWait: true)) == true else { return }
        probes.sent(sequence, at: request.agentSentNs, purpose: purpose)
    }

    func drain(_ socket: ZMQSocket) -> ClockSync.Snapshot? {
        var changed: ClockSync.Snapshot?
        while let received = try? socket.receiveMultipart(dontWait: true, maxParts: 2) {
            let arrived = nodeClock.now()
            guard received.parts.count == 1, let reply = try? Capfleet_V1_ClockProbeReply(serializedBytes: received.parts[0].array),
                reply.status.isOK,
                let answer = probes.answer(
                    sequence: reply.sequence, echoedSent: reply.agentSentNs, serverReceived: reply.coordinatorReceivedNs,
                    serverSent: reply.coordinatorSentNs, received: arrived)
            else { continue }
            if let timebase, timebase != (reply.coordinatorID, reply.timebase) {
                logger.notice(
                    "fleet time changed (the coordinator restarted or is another one): synchronising again",
                    metadata: ["coordinator": "\(reply.coordinatorID)"])
                estimator.reset()
            }
            timebase = (reply.coordinatorID, reply.timebase)
            coordinatorPace = UInt64(reply.lockedProbeIntervalMs) * 1_000_000
            // A wake probe's answer: every host on the path has just handled a message, so
            // measure now (ClockProbePairs says why).
            guard case .measured(let probe) = answer else {
                send(.measure, on: socket)
                continue
            }
            logger.trace(
                "clock probe", metadata: ["t1": "\(probe.sent)", "t2": "\(probe.serverReceived)", "t3": "\(probe.serverSent)", "t4": "\(arrived)"])
            if let state = estimator.add(probe) {
                var metadata: Logger.Metadata = ["clock.state": "\(state.rawValue)"]
                if let estimate = estimator.estimate {
                    metadata["clock.drift_ppm"] = "\((estimate.mapping.driftPPM * 100).rounded() / 100)"
                    metadata["clock.uncertainty_us"] = "\((estimate.mapping.uncertaintyAtReference / 100).rounded() / 10)"
                }
                logger.notice("clock", metadata: metadata)
            }
            changed = snapshot
        }
        return changed
    }

    var snapshot: ClockSync.Snapshot { ClockSync.Snapshot(estimate: estimator.estimate, coordinatorID: timebase?.coordinatorID ?? "") }
}
