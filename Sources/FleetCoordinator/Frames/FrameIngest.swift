import FleetBus
import FleetCore
import FleetProtocol
import FleetStore
import Foundation
import Logging
import Synchronization

/// What the coordinator knows of one device's stream, kept by the ingest thread.
public struct DeviceIngestState: Sendable {
    public var nodeID: String
    public var framesReceived: UInt64 = 0
    public var bytesReceived: UInt64 = 0
    public var lastSequence: UInt64 = 0
    public var lastFrameUnixMilliseconds: Int64 = 0
    /// Cumulative drops by reason over every agent process of the device, from what frame
    /// headers and agent status said.
    public var drops: DropTally { runs.total }
    var runs = AgentRunDrops()
    /// The agent's latest status says the device is capturing.
    public var streaming = false
    /// The latest frame's layout and sequence, from a frame or the agent's status.
    public var layout = Capfleet_V1_FrameLayout()
    /// What the device captured, from its agent's status, whether or not frames crossed the
    /// network (frames.md, "Live frames on demand").
    public var captures = AgentRunCaptures()
    /// The agent's latest status says full-rate frames are flowing to the coordinator.
    public var liveFlow = false
}

/// A viewer subscribed to a device's frames on the live endpoint, or the last one left
/// (the XPUB says so once per topic).
public struct LiveSubscriptionChange: Sendable, Equatable {
    public let deviceID: String
    public let wanted: Bool
    /// Viewers of the take's encoded packets rather than of raw frames.
    public var encoded = false
}

/// A frame handed to a snapshot request, as libzmq delivered it (no copy).
public struct IngestedFrame: Sendable {
    public let header: Capfleet_V1_FrameHeader
    public let payload: ZMQMessage
}

/// The coordinator's PULL socket for frames, on its own thread. Every frame is checked
/// against its header and its device before it is counted; bad ones are dropped and
/// counted by reason. The thread never waits on the database or the actor.
public final class FrameIngest: Sendable {
    public static let endpointName = "ingest"
    public let boundEndpoint: String
    /// The live endpoint viewers subscribe at, when there is one.
    public let liveEndpoint: String?
    /// Where the recording path hands over the frames it took (`RecordedFrameOutlet`).
    let recordedEndpoint: String
    /// Viewers coming and going on the live endpoint, in the order the XPUB said so.
    public let liveSubscriptions: AsyncStream<LiveSubscriptionChange>
    private let subscriptionChanges: AsyncStream<LiveSubscriptionChange>.Continuation
    private let loop: SocketLoop
    private let devices = Mutex<[String: DeviceIngestState]>([:])
    /// Every device's latest preview: previews travel this path but are not frames.
    public let previews = PreviewShelf()
    /// Snapshot requests waiting for their device's next frame. Frames are not kept between
    /// requests: holding on to every device's newest multi-megabyte buffer costs the
    /// allocator more than waiting one frame period when someone asks.
    private let snapshotWaiters = Mutex<[UInt64: (deviceID: String, continuation: CheckedContinuation<IngestedFrame?, Never>)]>([:])
    private let waitingSnapshots = Atomic<Int>(0)
    private let nextWaiterID = Atomic<UInt64>(0)
    private let rejections: RejectionCounter
    /// When each device's latest frame came, and its preview, in the audit's time.
    private let wallClock: WallClock
    /// Called on the ingest thread with each accepted frame's header (benchmarks measure latency here).
    private let onFrame: (@Sendable (Capfleet_V1_FrameHeader) -> Void)?

    /// Whether a sender (its ZAP User-Id) may send frames of `nodeID`; nil admits all (benchmarks).
    private let admits: (@Sendable (_ userID: String?, _ nodeID: String, _ fd: Int32, _ peer: () -> String) -> Bool)?

    /// - Parameter live: where viewers subscribe to full-rate frames (an XPUB on this thread,
    ///   so a frame is handed on without a copy or a hop); nil: nowhere (benchmarks).
    public init(
        context: ZMQContext, bind endpoint: String, rejections: RejectionCounter, security: CurveServerSecurity,
        live: (endpoint: String, security: CurveServerSecurity)? = nil,
        admits: (@Sendable (_ userID: String?, _ nodeID: String, _ fd: Int32, _ peer: () -> String) -> Bool)? = nil,
        onFrame: (@Sendable (Capfleet_V1_FrameHeader) -> Void)? = nil, wallClock: WallClock = .system
    ) throws(ZMQError) {
        self.wallClock = wallClock
        let socket = try ZMQSocket(context: context, type: .pull)
        try socket.set([.maxMessageBytes(WireDefaults.maxMessageBytes), .receiveQueue(messages: 8)])
        try socket.use(.bulk)
        loop = SocketLoop(name: "ingest")
        try security.apply(to: socket, loop: loop, context: context)
        try socket.bind(endpoint)
        boundEndpoint = try socket.lastEndpoint()
        (liveSubscriptions, subscriptionChanges) = AsyncStream.makeStream(of: LiveSubscriptionChange.self)
        let recorded = try ZMQSocket(context: context, type: .pull)
        try recorded.set([.receiveQueue(messages: 4)])
        recordedEndpoint = "inproc://capfleet-recorded-frames-\(UInt64.random(in: 0 ... .max))"
        try recorded.bind(recordedEndpoint)
        var fanOut: ZMQSocket?
        if let live {
            let xpub = try ZMQSocket(context: context, type: .xpub)
            // Each viewer's own queue: two frames, then newer frames are dropped for that
            // viewer alone while it catches up; the camera and other viewers never wait.
            try xpub.set([.sendQueue(messages: 2)])
            try xpub.use(.bulk)
            try live.security.apply(to: xpub, loop: loop, context: context)
            try xpub.bind(live.endpoint)
            liveEndpoint = try xpub.lastEndpoint()
            fanOut = xpub
        } else {
            liveEndpoint = nil
        }
        self.rejections = rejections
        self.admits = admits
        self.onFrame = onFrame
        let changes = subscriptionChanges
        if let fanOut {
            loop.add(fanOut) { socket in Self.drainSubscriptions(socket, into: changes) }
        }
        loop.add(socket) { [self] socket in drain(socket, fanOut: fanOut) }
        loop.add(recorded) { [self] socket in drainRecorded(socket, fanOut: fanOut) }
        loop.onStop { changes.finish() }
        loop.start()
    }

    public func stop() { loop.stop() }

    /// Admits frames of a registered device (and keeps counters across re-registration).
    /// True when `agentInstance` is a new process of an agent already counted: the device's
    /// sequence numbers and drop counts start over, which is a restart, not a gap.
    @discardableResult
    public func admit(
        deviceID: String, nodeID: String, agentInstance: String = "", resumingFrames frames: UInt64 = 0, bytes: UInt64 = 0,
        captures: AgentRunCaptures? = nil
    ) -> Bool {
        devices.withLock { table in
            var state =
                table[deviceID]
                ?? DeviceIngestState(
                    nodeID: nodeID, framesReceived: frames, bytesReceived: bytes,
                    captures: captures ?? AgentRunCaptures())
            state.nodeID = nodeID
            let restarted = state.runs.registered(agentInstance: agentInstance)
            state.captures.registered(agentInstance: agentInstance)
            table[deviceID] = state
            return restarted
        }
    }

    public func forget(deviceIDs: [String]) {
        devices.withLock { table in for id in deviceIDs { table[id] = nil } }
        previews.forget(deviceIDs: deviceIDs)
    }

    /// What the agent's status says of the device: what it captured (whether or not frames
    /// crossed the network), and drops that never reached the wire (late frames were never sent).
    public func noteAgentStatus(_ counters: Capfleet_V1_DeviceCounters) {
        devices.withLock { table in
            guard var state = table[counters.deviceID] else { return }
            state.runs.report(DropTally(wire: counters.drops))
            state.streaming = counters.streaming
            let before = state.captures.currentRun.frames
            state.captures.report(CaptureTally(frames: counters.framesCaptured, bytes: counters.bytesCaptured))
            // Frames need not cross the network to be the device's latest.
            if state.captures.currentRun.frames > before { state.lastFrameUnixMilliseconds = wallClock.unixMilliseconds() }
            state.liveFlow = counters.liveFlow
            if counters.hasLayout, counters.layout.width > 0 {
                state.layout = counters.layout
                state.lastSequence = counters.lastSequence
            }
            table[counters.deviceID] = state
        }
    }

    /// The device's next accepted frame, or nil if none arrives within `timeout`.
    public func nextFrame(of deviceID: String, timeout: Duration) async -> IngestedFrame? {
        let id = nextWaiterID.add(1, ordering: .relaxed).newValue
        let timer = Task { [self] in
            try? await Task.sleep(for: timeout)
            resolveWaiter(id, with: nil)
        }
        defer { timer.cancel() }
        return await withCheckedContinuation { continuation in
            snapshotWaiters.withLock { $0[id] = (deviceID, continuation) }
            waitingSnapshots.add(1, ordering: .releasing)
        }
    }

    private func resolveWaiter(_ id: UInt64, with frame: IngestedFrame?) {
        guard let waiter = snapshotWaiters.withLock({ $0.removeValue(forKey: id) }) else { return }
        waitingSnapshots.subtract(1, ordering: .releasing)
        waiter.continuation.resume(returning: frame)
    }

    /// A copy of every device's counters.
    public func snapshot() -> [String: DeviceIngestState] { devices.withLock { $0 } }

    public func state(of deviceID: String) -> DeviceIngestState? { devices.withLock { $0[deviceID] } }

    private func drain(_ socket: ZMQSocket, fanOut: ZMQSocket?) {
        while true {
            let received: (parts: [ZMQMessage], overflowed: Bool)?
            do {
                received = try socket.receiveMultipart(dontWait: true, maxParts: 2)
            } catch {
                return
            }
            guard let received else { return }
            if let header = accept(received.parts, overflowed: received.overflowed), let fanOut {
                Self.handOn(header: header, parts: received.parts, to: fanOut)
            }
        }
    }

    /// Sends an accepted frame to the viewers of its device: its topic, then the header and
    /// payload as they came (the payload's buffer is shared, not copied). Nobody subscribed,
    /// or a viewer whose queue is full, costs nothing here: libzmq drops it for them.
    private static func handOn(header: Capfleet_V1_FrameHeader, parts: [ZMQMessage], to fanOut: ZMQSocket) {
        do {
            let topic = header.hasEncoded ? LiveTopic.encoded(header.deviceID) : LiveTopic.frames(header.deviceID)
            guard try fanOut.send(Array(topic.utf8), more: true, dontWait: true) else { return }
            try fanOut.send(parts[0], more: true, dontWait: true)
            try fanOut.send(parts[1], dontWait: true)
        } catch {
            // An XPUB never blocks; a failure here is libzmq closing down.
        }
    }

    /// The XPUB's subscription messages: 1 (subscribe) or 0 (unsubscribe), then the topic.
    /// Without ZMQ_XPUB_VERBOSE it says only the first subscription and the last unsubscription
    /// of a topic, whoever they come from, which is what the flow needs.
    private static func drainSubscriptions(_ socket: ZMQSocket, into changes: AsyncStream<LiveSubscriptionChange>.Continuation) {
        while let received = try? socket.receiveMultipart(dontWait: true, maxParts: 1) {
            // A copy: a view of the message's bytes dies with the message, which an optimised
            // build releases as soon as it is last used.
            guard let bytes = received.parts.first?.array, let kind = bytes.first, kind <= 1,
                let subscription = LiveTopic.subscription(bytes.dropFirst())
            else { continue }
            changes.yield(LiveSubscriptionChange(deviceID: subscription.deviceID, wanted: kind == 1, encoded: subscription.encoded))
        }
    }

    /// A preview of a device its sender registered: kept as the device's latest, counted
    /// apart, and never handed to a snapshot waiting for a frame.
    private func keepPreview(_ header: Capfleet_V1_FrameHeader, payload: ZMQMessage, peer: @autoclosure () -> String) {
        let known = devices.withLock { $0[header.deviceID]?.nodeID == header.nodeID }
        guard known else {
            rejections.reject(
                endpoint: Self.endpointName, reason: .unknownDevice, peer: peer(),
                detail: "preview of device \(header.deviceID) of node \(header.nodeID), which is not registered")
            return
        }
        let jpeg = withExtendedLifetime(payload) { Data(payload.bytes) }
        previews.keep(header: header, jpeg: jpeg, atUnixMilliseconds: wallClock.unixMilliseconds(), monotonic: MonotonicTime.now())
    }

    /// The frame's header when it is accepted and counted; nil when refused.
    private func accept(_ parts: [ZMQMessage], overflowed: Bool) -> Capfleet_V1_FrameHeader? {
        // Looked up only when something is wrong: it costs a string per frame.
        var peer: String { parts.first?.peerAddress ?? "unknown peer" }
        guard parts.count == 2, !overflowed else {
            rejections.reject(endpoint: Self.endpointName, reason: .wrongPartCount, peer: peer, detail: "expected 2 parts")
            return nil
        }
        guard let header = try? Capfleet_V1_FrameHeader(serializedBytes: parts[0].array) else {
            rejections.reject(endpoint: Self.endpointName, reason: .undecodable, peer: peer, detail: "\(parts[0].count) header bytes")
            return nil
        }
        if let problem = FrameValidation.check(
            header: header, payloadBytes: parts[1].count,
            maxPayloadBytes: Int(WireDefaults.maxMessageBytes))
        {
            rejections.reject(
                endpoint: Self.endpointName, reason: problem, peer: peer,
                detail:
                    "device \(header.deviceID): header says \(header.payloadSize) bytes of \(header.layout.width)x\(header.layout.height) \(header.layout.pixelFormat), payload has \(parts[1].count)"
            )
            return nil
        }
        if header.isPreview, let problem = PreviewValidation.check(header: header, payloadBytes: parts[1].count) {
            rejections.reject(
                endpoint: Self.endpointName, reason: problem, peer: peer,
                detail:
                    "device \(header.deviceID): a preview must be a JPEG of at most \(PreviewValidation.maximumPayloadBytes) bytes, this is \(parts[1].count) bytes of \(header.layout.width)x\(header.layout.height) \(header.layout.pixelFormat)"
            )
            return nil
        }
        // The sender's key must be the live key of the node the header names.
        if let admits, !admits(parts[0].userID, header.nodeID, parts[0].sourceFD, { peer }) { return nil }
        if header.isPreview {
            keepPreview(header, payload: parts[1], peer: peer)
            return nil
        }
        // A take's encoded packets, sent while someone views the encoded stream: handed on,
        // not counted (the take counts its frames) and never a snapshot's frame.
        if header.hasEncoded {
            guard devices.withLock({ $0[header.deviceID]?.nodeID == header.nodeID }) else {
                rejections.reject(
                    endpoint: Self.endpointName, reason: .unknownDevice, peer: peer,
                    detail: "encoded packet of device \(header.deviceID) of node \(header.nodeID), which is not registered")
                return nil
            }
            return header
        }
        guard count(header, payload: parts[1]) else {
            rejections.reject(
                endpoint: Self.endpointName, reason: .unknownDevice, peer: peer,
                detail: "device \(header.deviceID) of node \(header.nodeID) is not registered")
            return nil
        }
        return header
    }

    /// Counts a frame that reached the coordinator and hands it to snapshots waiting for it;
    /// false for a device its node did not register.
    private func count(_ header: Capfleet_V1_FrameHeader, payload: ZMQMessage) -> Bool {
        let now = wallClock.unixMilliseconds()
        let known: Bool = devices.withLock { table in
            guard var state = table[header.deviceID], state.nodeID == header.nodeID else { return false }
            state.framesReceived += 1
            state.bytesReceived += UInt64(payload.count)
            state.lastSequence = header.sequence
            state.lastFrameUnixMilliseconds = now
            state.runs.report(DropTally(wire: header.drops))
            state.layout = header.layout
            table[header.deviceID] = state
            return true
        }
        guard known else { return false }
        onFrame?(header)
        if waitingSnapshots.load(ordering: .acquiring) > 0 {
            let waiting = snapshotWaiters.withLock { $0.filter { $0.value.deviceID == header.deviceID }.map(\.key) }
            for id in waiting { resolveWaiter(id, with: IngestedFrame(header: header, payload: payload)) }
        }
        return true
    }

    /// Frames the recording path took (checked there, from the node that has the device): a
    /// recorded device's only full-rate flow, so they serve its viewers and snapshots too
    /// (an encoded take's packets serve the viewers of its encoded stream only).
    /// Messages are [FrameHeader][payload], the payload shared with the writer, not copied.
    private func drainRecorded(_ socket: ZMQSocket, fanOut: ZMQSocket?) {
        while let received = try? socket.receiveMultipart(dontWait: true, maxParts: 2), received.parts.count == 2 {
            guard let header = try? Capfleet_V1_FrameHeader(serializedBytes: received.parts[0].array),
                header.hasEncoded || count(header, payload: received.parts[1])
            else { continue }
            if let fanOut { Self.handOn(header: header, parts: received.parts, to: fanOut) }
        }
    }
}

/// The recording path's side of the hand-over to ingest: a PUSH on the record thread to the
/// ingest thread's inproc PULL. Newest wins: a frame ingest cannot take now is left out for
/// live consumers only (the take has it).
final class RecordedFrameOutlet: @unchecked Sendable {
    private let socket: ZMQSocket

    /// Made on the thread that builds the record endpoint, used on its loop thread only.
    init(context: ZMQContext, endpoint: String) throws(ZMQError) {
        socket = try ZMQSocket(context: context, type: .push)
        try socket.set([.sendQueue(messages: 4)])
        try socket.connect(endpoint)
    }

    /// Record thread only.
    func handOver(header: Capfleet_V1_FrameHeader, payload: ZMQMessage) {
        guard let bytes: [UInt8] = try? header.serializedBytes() else { return }
        do {
            guard try socket.send(bytes, more: true, dontWait: true) else { return }
            try socket.send(payload, dontWait: true)
        } catch {
            // inproc never blocks; a failure is libzmq closing down.
        }
    }
}
