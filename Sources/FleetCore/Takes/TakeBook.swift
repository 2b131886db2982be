/// The takes the coordinator is recording, as a pure state machine: which device's part of
/// which take is open, interrupted or ended, and what must happen when the fleet moves
/// (a start, a stop, an agent's answer, a node gone silent or back, consent withdrawn, a
/// part's writer reporting, the index refusing a write). Events in, actions out; the take
/// director (the shell) performs the actions and feeds their outcomes back as events. Every
/// decision is taken here, in one step, so two requests served at once can never both find
/// a device free: the first reservation wins, and the second is refused before anything
/// is written.
public struct TakeBook: Sendable {
    public struct Part: Hashable, Sendable, CustomStringConvertible {
        public let takeID: String
        public let deviceID: String
        public init(takeID: String, deviceID: String) {
            self.takeID = takeID
            self.deviceID = deviceID
        }
        public var description: String { "\(takeID)/\(deviceID)" }
    }

    public enum Phase: Sendable, Equatable {
        /// Reserved and being set up: agents are hearing of it.
        case starting
        case recording
        /// A part or the index failed: the take stops with this error.
        case failed(String)
    }

    /// What an agent is told about its part of a take (SetRecording).
    public enum AgentOrder: Sendable, Equatable {
        case record(startFleetNs: UInt64)
        case stop(atFleetNs: UInt64)
        /// Consent withdrawn: what the agent holds stays on its host.
        case withhold(atFleetNs: UInt64)
        /// Another agent refused the start, so the take never started: the agent drops its part.
        case abandon(atFleetNs: UInt64)
    }

    /// A write to the recordings index.
    public enum IndexWrite: Sendable, Equatable {
        case partRecording(Part)
        case partInterrupted(Part)
        case partEnded(Part, reason: String, withheldFrames: UInt64)
        case partFailed(Part, message: String)
        case agentInstance(Part, instance: String)
        case sequenceOffset(Part, offset: Int64)
        /// Every part is stored: the take is stopped at this fleet time.
        case takeStored(takeID: String, stopFleetNs: UInt64)
        case takeFailed(takeID: String, error: String)
        /// An agent refused the start: the take never started.
        case takeAbandoned(takeID: String, error: String)
    }

    public enum Action: Sendable, Equatable {
        case startWriter(Part, nodeID: String)
        /// The part's writer keeps no frame at or after this fleet time.
        case stopWriter(Part, atFleetNs: UInt64)
        /// The part's writer finishes its segment and ends its thread.
        case closeWriter(Part)
        case order(Part, nodeID: String, AgentOrder)
        /// Timed metadata in the part's file and in the index.
        case note(Part, kind: String, fleetNs: UInt64, fields: [String: String])
        /// An entry in the index's timed events only (the part's file is finished).
        case indexEvent(Part, kind: String, fleetNs: UInt64, fields: [String: String])
        case write(IndexWrite)
        /// A `recording` event for the fleet's telemetry.
        case announce(nodeID: String?, deviceID: String?, message: String)
        /// Whoever waits for the take to be stored (stop_recording) may look now.
        case settled(takeID: String)
    }

    public struct Refusal: Error, Sendable, Equatable, CustomStringConvertible {
        public let deviceID: String
        public let busyIn: String
        public init(deviceID: String, busyIn: String) {
            self.deviceID = deviceID
            self.busyIn = busyIn
        }
        public var description: String { "device \(deviceID) is being recorded in take \(busyIn); stop that first" }
    }

    /// Where a take's parts are written.
    public enum Store: String, Sendable, Equatable {
        /// The coordinator writes them from the recording path: each part has a writer there.
        case coordinator
        /// Each agent writes its devices' parts on its own disk and reports the segments: the
        /// coordinator keeps the index, and no writer.
        case agent
    }

    struct Take: Sendable {
        var phase: Phase
        var store: Store = .coordinator
        let startFleetNs: UInt64
        var stopFleetNs: UInt64?
        /// Device → node, for every part not yet ended.
        var open: [String: String]
        var interrupted: Set<String> = []
    }

    private var takes: [String: Take] = [:]

    public init() {}

    // MARK: Questions

    /// The take a device is being recorded in (or is reserved for), if any.
    public func take(recording deviceID: String) -> String? {
        takes.first { $0.value.open[deviceID] != nil }?.key
    }

    public func isOpen(_ part: Part) -> Bool { takes[part.takeID]?.open[part.deviceID] != nil }

    /// Whether a frame captured at `fleetNs` belongs to the take: at or after its start and,
    /// once a stop is set, before it.
    public func covers(_ takeID: String, fleetNs: UInt64) -> Bool {
        guard let take = takes[takeID], fleetNs >= take.startFleetNs else { return false }
        return take.stopFleetNs.map { fleetNs < $0 } ?? true
    }

    public func phase(of takeID: String) -> Phase? { takes[takeID]?.phase }

    /// When the take stops, once a stop is decided.
    public func stopFleetNs(of takeID: String) -> UInt64? { takes[takeID]?.stopFleetNs }

    public func store(of takeID: String) -> Store? { takes[takeID]?.store }

    /// The node recording an open part.
    public func node(of part: Part) -> String? { takes[part.takeID]?.open[part.deviceID] }

    /// Open parts, by take.
    public func openParts(of takeID: String) -> [Part] {
        (takes[takeID]?.open.keys.sorted() ?? []).map { Part(takeID: takeID, deviceID: $0) }
    }

    public var hasTakes: Bool { !takes.isEmpty }

    // MARK: Starting

    /// Reserves every device for a new take, or refuses naming the first busy one. On
    /// success: start each part's writer, then tell each agent (`agentsAnswered` follows).
    public mutating func reserve(
        takeID: String, devices: [(deviceID: String, nodeID: String)],
        startFleetNs: UInt64, store: Store = .coordinator
    ) throws(Refusal) -> [Action] {
        for device in devices {
            if let busy = take(recording: device.deviceID) { throw Refusal(deviceID: device.deviceID, busyIn: busy) }
        }
        var open: [String: String] = [:]
        for device in devices { open[device.deviceID] = device.nodeID }
        takes[takeID] = Take(phase: .starting, store: store, startFleetNs: startFleetNs, open: open)
        let parts = devices.map { (Part(takeID: takeID, deviceID: $0.deviceID), $0.nodeID) }
        return Self.writers(of: store, parts.map { Action.startWriter($0.0, nodeID: $0.1) })
            + parts.map { Action.order($0.0, nodeID: $0.1, .record(startFleetNs: startFleetNs)) }
    }

    /// A take that was never written to the index (its creation failed): forgotten, devices free.
    public mutating func forget(takeID: String) -> [Action] {
        guard let take = takes.removeValue(forKey: takeID) else { return [] }
        return Self.writers(of: take.store, take.open.keys.sorted().map { .closeWriter(Part(takeID: takeID, deviceID: $0)) }) + [
            .settled(takeID: takeID)
        ]
    }

    /// What each agent answered the start with: every one yes, and the take is recording;
    /// any refusal undoes the whole take (it is marked failed, nothing of it is kept).
    public mutating func agentsAnswered(takeID: String, refusals: [(deviceID: String, reason: String)]) -> [Action] {
        guard var take = takes[takeID], take.phase == .starting else { return [] }
        guard !refusals.isEmpty else {
            take.phase = .recording
            takes[takeID] = take
            // An agent that took up its part records from the start on its own: nothing
            // waits for frames to reach the coordinator.
            let recording: [Action] =
                take.store == .agent
                ? take.open.keys.sorted().map { .write(.partRecording(Part(takeID: takeID, deviceID: $0))) } : []
            return recording + [
                .announce(
                    nodeID: nil, deviceID: nil,
                    message: "take \(takeID) of \(take.open.keys.sorted().joined(separator: ", ")) starts at fleet time \(take.startFleetNs)")
            ]
        }
        let reason = refusals.map { "\($0.deviceID): \($0.reason)" }.joined(separator: "; ")
        takes[takeID] = nil
        var actions: [Action] = []
        for (deviceID, nodeID) in take.open.sorted(by: { $0.key < $1.key }) {
            let part = Part(takeID: takeID, deviceID: deviceID)
            actions +=
                Self.writers(of: take.store, [.closeWriter(part)])
                + [.order(part, nodeID: nodeID, .abandon(atFleetNs: take.startFleetNs)), .write(.partFailed(part, message: "not started"))]
        }
        return actions + [.write(.takeAbandoned(takeID: takeID, error: reason)), .settled(takeID: takeID)]
    }

    // MARK: Stopping

    /// The take ends at `atFleetNs` (never before its start). Nil when the take is not
    /// recording here or already stops at or before that time.
    public mutating func stop(takeID: String, atFleetNs: UInt64) -> (stopFleetNs: UInt64, actions: [Action])? {
        guard var take = takes[takeID], take.phase == .recording || take.phase == .starting else { return nil }
        let stop = max(atFleetNs, take.startFleetNs)
        if let already = take.stopFleetNs, already <= stop { return nil }
        take.stopFleetNs = stop
        takes[takeID] = take
        var actions: [Action] = []
        for (deviceID, nodeID) in take.open.sorted(by: { $0.key < $1.key }) {
            let part = Part(takeID: takeID, deviceID: deviceID)
            actions += Self.writers(of: take.store, [.stopWriter(part, atFleetNs: stop)]) + [.order(part, nodeID: nodeID, .stop(atFleetNs: stop))]
        }
        return (stop, actions + [.announce(nodeID: nil, deviceID: nil, message: "take \(takeID) stops at fleet time \(stop)")])
    }

    // MARK: The fleet meanwhile

    /// A node went silent: each of its open parts is interrupted until its frames flow again.
    public mutating func nodeWentSilent(_ nodeID: String, nowFleetNs: UInt64) -> [Action] {
        var actions: [Action] = []
        for takeID in takes.keys.sorted() {
            guard var take = takes[takeID] else { continue }
            for (deviceID, node) in take.open.sorted(by: { $0.key < $1.key }) where node == nodeID {
                guard take.interrupted.insert(deviceID).inserted else { continue }
                if take.store == .agent {
                    // Its agent records on, on its own disk, and reports when it is back.
                    actions += [
                        .indexEvent(
                            Part(takeID: takeID, deviceID: deviceID), kind: "unreachable", fleetNs: nowFleetNs,
                            fields: ["reason": "node \(nodeID) went silent; its agent records on and reports its segments when it is back"]),
                        .announce(
                            nodeID: nodeID, deviceID: deviceID,
                            message: "take \(takeID): \(deviceID)'s node \(nodeID) is unreachable; it records on its own disk meanwhile"),
                    ]
                    continue
                }
                let part = Part(takeID: takeID, deviceID: deviceID)
                actions += [
                    .note(part, kind: "interrupted", fleetNs: nowFleetNs, fields: ["reason": "node \(nodeID) went silent"]),
                    .write(.partInterrupted(part)),
                    .announce(nodeID: nodeID, deviceID: deviceID, message: "take \(takeID): \(deviceID) interrupted (node \(nodeID) went silent)"),
                ]
            }
            takes[takeID] = take
        }
        return actions
    }

    /// Consent was denied, revoked or restricted: the device's part of every take stops now.
    public mutating func consentWithdrawn(deviceID: String, state: String, reason: String, nowFleetNs: UInt64) -> [Action] {
        var actions: [Action] = []
        for takeID in takes.keys.sorted() {
            guard let nodeID = takes[takeID]?.open[deviceID] else { continue }
            let part = Part(takeID: takeID, deviceID: deviceID)
            actions += [
                .stopWriter(part, atFleetNs: nowFleetNs),
                .note(part, kind: "consent", fleetNs: nowFleetNs, fields: ["state": state, "reason": reason]),
                .order(part, nodeID: nodeID, .withhold(atFleetNs: nowFleetNs)),
                .announce(nodeID: nodeID, deviceID: deviceID, message: "take \(takeID): \(deviceID) stopped, consent \(state)"),
            ]
        }
        return actions
    }

    /// Timed metadata for every open part of a device (a change an operator made, an event of the device's own).
    public func noteDevice(_ deviceID: String, kind: String, nowFleetNs: UInt64, fields: [String: String]) -> [Action] {
        takes.keys.sorted().compactMap { takeID in
            guard takes[takeID]?.open[deviceID] != nil else { return nil }
            return .note(Part(takeID: takeID, deviceID: deviceID), kind: kind, fleetNs: nowFleetNs, fields: fields)
        }
    }

    // MARK: A part's writer reports

    public enum PartReport: Sendable, Equatable {
        /// A new agent process sends this part (`restarted`: not its first).
        case agentChanged(instance: String, restarted: Bool)
        case rebased(offset: Int64)
        /// Frames flow (again).
        case flowing
        case ended(reason: String, withheldFrames: UInt64)
        case failed(String)
    }

    public mutating func report(_ report: PartReport, from part: Part, nowFleetNs: UInt64) -> [Action] {
        guard var take = takes[part.takeID], let nodeID = take.open[part.deviceID] else { return [] }
        switch report {
        case let .agentChanged(instance, restarted):
            return [.write(.agentInstance(part, instance: instance))]
                + (restarted
                    ? [
                        .note(
                            part, kind: "interrupted", fleetNs: nowFleetNs,
                            fields: ["reason": "the agent restarted; frames it had not sent are lost"])
                    ] : [])
        case let .rebased(offset):
            return [.write(.sequenceOffset(part, offset: offset))]
        case .flowing:
            var actions: [Action] = [.write(.partRecording(part))]
            if take.interrupted.remove(part.deviceID) != nil {
                takes[part.takeID] = take
                actions += [
                    .note(part, kind: "resumed", fleetNs: nowFleetNs, fields: [:]),
                    .announce(nodeID: nodeID, deviceID: part.deviceID, message: "take \(part.takeID): \(part.deviceID) resumed"),
                ]
            }
            return actions
        case let .ended(reason, withheld):
            return [
                .write(.partEnded(part, reason: reason, withheldFrames: withheld)),
                .indexEvent(part, kind: "ended", fleetNs: nowFleetNs, fields: ["reason": reason, "withheld_frames": "\(withheld)"]),
            ]
                + close(part, nowFleetNs: nowFleetNs)
        case let .failed(message):
            // A full disk fails every part alike: the take stops with the error, what is written stays valid.
            return [
                .write(.partFailed(part, message: message)),
                .indexEvent(part, kind: "failed", fleetNs: nowFleetNs, fields: ["error": message]),
                .announce(nodeID: nodeID, deviceID: part.deviceID, message: "take \(part.takeID): \(part.deviceID) failed: \(message)"),
            ]
                + fail(takeID: part.takeID, error: "\(part.deviceID): \(message)", nowFleetNs: nowFleetNs, sparing: part.deviceID)
                + close(part, nowFleetNs: nowFleetNs)
        }
    }

    /// The index refused a write about this take: the take fails, saying so, and its other
    /// parts stop (their files are finished and stay valid). Someone sees it: the take's
    /// state and error, and an event.
    public mutating func indexFailed(takeID: String, writing what: String, error: String, nowFleetNs: UInt64) -> [Action] {
        guard takes[takeID] != nil else { return [] }
        let message = "the recordings index could not record \(what): \(error)"
        return [.announce(nodeID: nil, deviceID: nil, message: "take \(takeID) failed: \(message)")]
            + fail(takeID: takeID, error: message, nowFleetNs: nowFleetNs, sparing: nil)
    }

    private mutating func fail(takeID: String, error: String, nowFleetNs: UInt64, sparing: String?) -> [Action] {
        guard var take = takes[takeID] else { return [] }
        if case .failed = take.phase { return [] }
        take.phase = .failed(error)
        takes[takeID] = take
        var actions: [Action] = [.write(.takeFailed(takeID: takeID, error: error))]
        for (deviceID, nodeID) in take.open.sorted(by: { $0.key < $1.key }) where deviceID != sparing {
            let part = Part(takeID: takeID, deviceID: deviceID)
            actions +=
                Self.writers(of: take.store, [.stopWriter(part, atFleetNs: nowFleetNs)]) + [
                    .order(part, nodeID: nodeID, .stop(atFleetNs: nowFleetNs))
                ]
        }
        return actions
    }

    /// The coordinator's writers exist only for the parts it writes itself.
    private static func writers(of store: Store, _ actions: [Action]) -> [Action] {
        store == .coordinator ? actions : []
    }

    /// A part has ended: its writer closes; when it was the take's last, the take is stored
    /// (unless it failed) and whoever waits for it hears.
    private mutating func close(_ part: Part, nowFleetNs: UInt64) -> [Action] {
        guard var take = takes[part.takeID] else { return [] }
        take.open[part.deviceID] = nil
        take.interrupted.remove(part.deviceID)
        var actions: [Action] = Self.writers(of: take.store, [.closeWriter(part)])
        guard take.open.isEmpty else {
            takes[part.takeID] = take
            return actions
        }
        takes[part.takeID] = nil
        if take.phase == .recording {
            actions.append(.write(.takeStored(takeID: part.takeID, stopFleetNs: take.stopFleetNs ?? nowFleetNs)))
        }
        return actions + [.announce(nodeID: nil, deviceID: nil, message: "take \(part.takeID) is stored"), .settled(takeID: part.takeID)]
    }

    // MARK: Restart

    /// A take the index says is in progress, picked up after the coordinator's restart.
    public mutating func resume(
        takeID: String, startFleetNs: UInt64, stopFleetNs: UInt64?,
        devices: [(deviceID: String, nodeID: String)], store: Store = .coordinator
    ) -> [Action] {
        var open: [String: String] = [:]
        for device in devices { open[device.deviceID] = device.nodeID }
        takes[takeID] = Take(phase: .recording, store: store, startFleetNs: startFleetNs, stopFleetNs: stopFleetNs, open: open)
        return Self.writers(of: store, devices.map { .startWriter(Part(takeID: takeID, deviceID: $0.deviceID), nodeID: $0.nodeID) })
    }

    /// A node registered (it may have restarted and forgotten its takes): what to tell it
    /// again, part by part: record from the start, and the stop if there is one.
    public func registered(_ nodeID: String) -> [(part: Part, orders: [AgentOrder])] {
        takes.keys.sorted().flatMap { takeID -> [(part: Part, orders: [AgentOrder])] in
            guard let take = takes[takeID], take.phase == .recording else { return [] }
            return take.open.keys.sorted().filter { take.open[$0] == nodeID }.map { deviceID in
                (
                    Part(takeID: takeID, deviceID: deviceID),
                    [.record(startFleetNs: take.startFleetNs)] + (take.stopFleetNs.map { [.stop(atFleetNs: $0)] } ?? [])
                )
            }
        }
    }
}
