/// The coordinator's side of every node's control session as a pure state machine: which
/// nodes are registered and where to reach them, which are alive, and which commands wait
/// for an answer. The shell (the coordinator's control handler) feeds it what arrives and the
/// time, and performs what it returns; nothing here waits or does I/O.
///
/// A command is answered exactly once: by the node, or by the coordinator when the node can
/// no longer answer it (its deadline passed, it went offline, it restarted, it was revoked).
/// See proto-docs/commands.md.
public struct NodeSessionBook: Sendable {
    /// A registered node: where its latest message came from, and which agent process it is.
    public struct Session: Sendable, Equatable {
        public let nodeID: String
        /// The agent process that registered (HELLO's agent_instance; empty from agents older
        /// than protocol 1.1, which cannot say).
        public let agentInstance: String
        /// What the welcomed HELLO said of the node and its devices (the shell's digest): the
        /// same process repeating it is welcomed again without registering anew.
        public let helloFingerprint: Int
        /// Where commands go: the ROUTER routing id of the node's latest message.
        public private(set) var routingID: [UInt8]
        /// Every connection the node spoke on lately, so that a revocation reaches all of them.
        public private(set) var recentRoutingIDs: [[UInt8]]

        init(nodeID: String, agentInstance: String, helloFingerprint: Int, routingID: [UInt8]) {
            self.nodeID = nodeID
            self.agentInstance = agentInstance
            self.helloFingerprint = helloFingerprint
            self.routingID = routingID
            recentRoutingIDs = [routingID]
        }

        mutating func spoke(on routingID: [UInt8]) {
            self.routingID = routingID
            recentRoutingIDs.removeAll { $0 == routingID }
            recentRoutingIDs.append(routingID)
            if recentRoutingIDs.count > 4 { recentRoutingIDs.removeFirst() }
        }
    }

    /// A command sent and not answered yet.
    public struct PendingCommand: Sendable, Equatable {
        public let commandID: UInt64
        public let nodeID: String
        public let deviceID: String
        /// The agent process it went to.
        public let agentInstance: String
        public let deadline: UInt64
        public let timeoutNanoseconds: UInt64
    }

    /// Why the coordinator answers a command in the node's place. Whether the node applied it
    /// is unknown in every case, and the answer says so.
    public enum Unanswerable: Sendable, Equatable {
        case timedOut(timeoutNanoseconds: UInt64)
        /// Another agent process registered for the node: the one the command went to is gone.
        case agentRestarted
        case wentOffline
        /// An admin revoked or removed the node.
        case forgotten
    }

    public enum Action: Sendable, Equatable {
        /// Record the node online (store, event).
        case cameOnline(nodeID: String)
        /// Record the node offline (store, event, alert, takes).
        case wentOffline(nodeID: String)
        /// Answer the command's waiter with UNAVAILABLE, saying why.
        case answerUnavailable(PendingCommand, Unanswerable)
    }

    /// What to do with a HELLO. A slow WELCOME (a loaded coordinator, a camera with hundreds
    /// of formats) crosses the agent's retries, and a reconnection repeats a HELLO already
    /// welcomed: each would otherwise register the node again, push its consent again and
    /// announce it again.
    public enum HelloVerdict: Sendable, Equatable {
        /// Check and store it, then answer with `endRegistration`'s waiters.
        case register(RegistrationTicket)
        /// An operator is removing the node: answer UNAVAILABLE, ask again later.
        case refuseWhileRemoving
        /// The same agent process said the same HELLO while its registration is under way:
        /// this one gets that registration's answer, nothing more.
        case awaitRegistration
        /// The same agent process, registered and online, repeating the HELLO it was welcomed
        /// with: welcome it again on this connection, and change nothing else.
        case welcomeAgain
    }

    /// One registration under way.
    public struct RegistrationTicket: Sendable, Hashable {
        public let nodeID: String
        let number: UInt64
    }

    private struct RegistrationInFlight: Sendable {
        let agentInstance: String
        let helloFingerprint: Int
        /// Where repeats of the same HELLO came from: they are answered with this one.
        var waiting: [[UInt8]] = []
    }

    /// Whether a command may go out, and where.
    public enum Dispatch: Sendable, Equatable {
        case send(commandID: UInt64, routingID: [UInt8])
        case nodeOffline
    }

    /// What to do with a command reply that arrived.
    public enum ReplyVerdict: Sendable, Equatable {
        /// The answer its waiter expects.
        case deliver(PendingCommand)
        /// Another node answered it: refused, and the command keeps waiting for its own node.
        case wrongNode(PendingCommand)
        /// Already answered (timed out, or the node restarted or went offline meanwhile): dropped.
        case late
    }

    public private(set) var sessions: [String: Session] = [:]
    private var liveness: NodeLiveness
    private var pending: [UInt64: PendingCommand] = [:]
    private var nextCommandID: UInt64 = 1
    /// Nodes whose HELLO is being checked and stored, and nodes an operator is removing from
    /// the fleet: the two exclude each other, so a removal never deletes a node that is
    /// registering, and a registration never brings back a node half removed.
    private var registering: [RegistrationTicket: RegistrationInFlight] = [:]
    private var nextTicket: UInt64 = 1
    private var removing: Set<String> = []
    /// When each unregistered node was last told to send HELLO.
    private var reregisterAsked: [String: UInt64] = [:]
    private let heartbeatInterval: UInt64

    public init(heartbeatIntervalNanoseconds: UInt64, liveness: UInt64) {
        self.liveness = NodeLiveness(heartbeatIntervalNanoseconds: heartbeatIntervalNanoseconds, liveness: liveness)
        heartbeatInterval = heartbeatIntervalNanoseconds
    }

    /// A node with no session here sent a heartbeat or status. After a coordinator restart an
    /// agent's queue arrives in a burst: one `reregister` per heartbeat interval is enough, the
    /// rest would each draw a HELLO.
    public mutating func shouldAskToRegister(_ nodeID: String, now: UInt64) -> Bool {
        if let asked = reregisterAsked[nodeID], now >= asked, now - asked < heartbeatInterval { return false }
        reregisterAsked[nodeID] = now
        return true
    }

    public func isOnline(_ nodeID: String) -> Bool { liveness.isOnline(nodeID) }
    public func session(_ nodeID: String) -> Session? { sessions[nodeID] }
    public var commandsInFlight: [PendingCommand] { pending.values.sorted { $0.commandID < $1.commandID } }

    /// A HELLO arrived from `routingID`. Agents that cannot name their process (before
    /// protocol 1.1) are registered every time, as before.
    public mutating func hello(nodeID: String, agentInstance: String, helloFingerprint: Int, routingID: [UInt8], now: UInt64) -> HelloVerdict {
        guard !removing.contains(nodeID) else { return .refuseWhileRemoving }
        if !agentInstance.isEmpty {
            if let (ticket, _) = registering.first(where: {
                $0.key.nodeID == nodeID && $0.value.agentInstance == agentInstance
                    && $0.value.helloFingerprint == helloFingerprint
            }) {
                registering[ticket]?.waiting.append(routingID)
                return .awaitRegistration
            }
            if let session = sessions[nodeID], session.agentInstance == agentInstance, session.helloFingerprint == helloFingerprint,
                liveness.isOnline(nodeID)
            {
                sessions[nodeID]?.spoke(on: routingID)
                _ = liveness.heard(from: nodeID, at: now)
                return .welcomeAgain
            }
        }
        let ticket = RegistrationTicket(nodeID: nodeID, number: nextTicket)
        nextTicket += 1
        registering[ticket] = RegistrationInFlight(agentInstance: agentInstance, helloFingerprint: helloFingerprint)
        return .register(ticket)
    }

    /// The registration was welcomed (after `registered`) or refused. Returns where the
    /// repeats of its HELLO came from: they get the same answer.
    public mutating func endRegistration(_ ticket: RegistrationTicket) -> [[UInt8]] {
        registering.removeValue(forKey: ticket)?.waiting ?? []
    }

    /// An operator asks to remove the node from the fleet: allowed only while it is offline
    /// and not registering; until `endRemoval` it cannot register.
    public mutating func beginRemoval(of nodeID: String) -> Bool {
        guard !liveness.isOnline(nodeID), !registering.keys.contains(where: { $0.nodeID == nodeID }), !removing.contains(nodeID) else { return false }
        removing.insert(nodeID)
        return true
    }

    /// The removal is done (`removed`: its session goes too) or failed (the node stays).
    public mutating func endRemoval(of nodeID: String, removed: Bool) -> [Action] {
        removing.remove(nodeID)
        return removed ? forget(nodeID) : []
    }

    /// A node was welcomed. Commands that went to another agent process of the node will
    /// never be answered: they are answered now instead of at their deadlines. Commands to
    /// the same process (it only reconnected) keep waiting: its answer comes on the new
    /// connection.
    public mutating func registered(nodeID: String, agentInstance: String, helloFingerprint: Int = 0, routingID: [UInt8], now: UInt64) -> [Action] {
        var actions: [Action] = []
        if let previous = sessions[nodeID], previous.agentInstance != agentInstance || agentInstance.isEmpty {
            actions += answerPending(of: nodeID, because: .agentRestarted)
        }
        sessions[nodeID] = Session(nodeID: nodeID, agentInstance: agentInstance, helloFingerprint: helloFingerprint, routingID: routingID)
        reregisterAsked[nodeID] = nil
        if liveness.heard(from: nodeID, at: now) != nil { actions.append(.cameOnline(nodeID: nodeID)) }
        return actions
    }

    /// A heartbeat or status from a node. Nil: the node has no session here and must send HELLO.
    public mutating func heard(from nodeID: String, routingID: [UInt8], now: UInt64) -> [Action]? {
        guard sessions[nodeID] != nil else { return nil }
        sessions[nodeID]?.spoke(on: routingID)
        return liveness.heard(from: nodeID, at: now) == nil ? [] : [.cameOnline(nodeID: nodeID)]
    }

    /// Traffic from the node that arrived at `time` but waits behind slower messages.
    public mutating func arrived(from nodeID: String, at time: UInt64) {
        liveness.refresh(nodeID, arrivedAt: time)
    }

    /// A command for a device of `nodeID`: sent to where the node last spoke, or refused
    /// because the node is offline.
    public mutating func dispatch(to nodeID: String, deviceID: String, timeoutNanoseconds: UInt64, now: UInt64) -> Dispatch {
        guard let session = sessions[nodeID], liveness.isOnline(nodeID) else { return .nodeOffline }
        let id = nextCommandID
        nextCommandID += 1
        pending[id] = PendingCommand(
            commandID: id, nodeID: nodeID, deviceID: deviceID, agentInstance: session.agentInstance,
            deadline: now &+ timeoutNanoseconds, timeoutNanoseconds: timeoutNanoseconds)
        return .send(commandID: id, routingID: session.routingID)
    }

    /// A command reply from `nodeID`.
    public mutating func replied(commandID: UInt64, from nodeID: String) -> ReplyVerdict {
        guard let command = pending[commandID] else { return .late }
        guard command.nodeID == nodeID else { return .wrongNode(command) }
        pending[commandID] = nil
        return .deliver(command)
    }

    /// Deadlines and liveness at `now`: commands past their deadline are answered, silent
    /// nodes go offline and their commands are answered.
    public mutating func tick(now: UInt64) -> [Action] {
        let expired = pending.values.filter { now >= $0.deadline }.sorted { $0.commandID < $1.commandID }
        var actions: [Action] = expired.map { command in
            pending[command.commandID] = nil
            return .answerUnavailable(command, .timedOut(timeoutNanoseconds: command.timeoutNanoseconds))
        }
        for case let .wentOffline(nodeID) in liveness.expire(at: now) {
            actions.append(.wentOffline(nodeID: nodeID))
            actions += answerPending(of: nodeID, because: .wentOffline)
        }
        return actions
    }

    /// The node was revoked or removed: its session ends and its commands are answered.
    public mutating func forget(_ nodeID: String) -> [Action] {
        sessions[nodeID] = nil
        var actions = answerPending(of: nodeID, because: .forgotten)
        if liveness.remove(nodeID) != nil { actions.insert(.wentOffline(nodeID: nodeID), at: 0) }
        return actions
    }

    private mutating func answerPending(of nodeID: String, because reason: Unanswerable) -> [Action] {
        let waiting = pending.values.filter { $0.nodeID == nodeID }.sorted { $0.commandID < $1.commandID }
        for command in waiting { pending[command.commandID] = nil }
        return waiting.map { .answerUnavailable($0, reason) }
    }
}

extension NodeSessionBook.Unanswerable {
    /// The reason an operator reads in the UNAVAILABLE reply.
    public func message(nodeID: String) -> String {
        switch self {
        case let .timedOut(timeout):
            "node \(nodeID) did not answer within \(Double(timeout) / 1e9) s; the command may or may not have been applied"
        case .agentRestarted:
            "node \(nodeID)'s agent restarted before answering; the command may or may not have been applied (send it again to be sure)"
        case .wentOffline:
            "node \(nodeID) went offline before answering; the command may or may not have been applied"
        case .forgotten:
            "node \(nodeID) was revoked or removed before answering; the command may or may not have been applied"
        }
    }
}
