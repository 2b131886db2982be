import FleetProtocol

/// An agent's sensor streams (sensors.md), from the messages local processes send to its
/// sensor endpoint to the batches it sends the coordinator: each sample checked, put in
/// fleet time, kept on the host while the stream's consent is not granted, and counted.
/// Events in (a message, a consent change, the time), batches out; the endpoint that owns
/// the socket only performs them.
public struct SensorIntake: Sendable {
    public struct Limits: Sendable {
        public var samplesPerMessage = 1000
        public var channels = 64
        public var channelNameBytes = 32
        public var textBytes = 1024
        /// How far behind and ahead of the agent's clock a sample's time may lie: a sender on
        /// another clock (CLOCK_REALTIME, its own start) is refused, not put at a wrong time.
        public var behindNs: UInt64 = 10_000_000_000
        public var aheadNs: UInt64 = 1_000_000_000
        /// A stream's readings leave at most this long after the first of them arrived…
        public var flushIntervalNs: UInt64 = 50_000_000
        /// …and at once when this many wait.
        public var batchReadings = 500

        public init() {}
    }

    /// Why samples were refused: the counters' and the log's words.
    public enum Refusal: String, Sendable, CaseIterable {
        case undecodable
        case unknownStream = "unknown_stream"
        case tooManySamples = "too_many_samples"
        case badChannels = "bad_channels"
        case valueCount = "value_count"
        case notFinite = "not_finite"
        case outOfTime = "out_of_time"
        case outOfOrder = "out_of_order"
        case textTooLong = "text_too_long"
    }

    public struct Counters: Sendable, Equatable {
        public var received: UInt64 = 0
        public var refused: UInt64 = 0
        public var withheld: UInt64 = 0
        /// Readings the control channel could not take (the coordinator unreachable or slow).
        public var unsent: UInt64 = 0
        /// When the latest sample was accepted (CLOCK_MONOTONIC); 0 = never.
        public var lastArrival: UInt64 = 0

        public init() {}
    }

    /// What one message came to: batches due at once, and what was refused and why.
    public struct Outcome: Sendable {
        public var batches: [Capfleet_V1_SensorData] = []
        public var refused = 0
        public var refusal: Refusal?
        public var detail = ""
    }

    struct Stream: Sendable {
        let name: String
        let deviceID: String
        var channels: [String] = []
        var lastMonotonic: UInt64 = 0
        var allowed = false
        var counters = Counters()
        var pending: [Capfleet_V1_SensorReading] = []
        var firstPendingAt: UInt64?
    }

    public let nodeID: String
    public let limits: Limits
    private var streams: [String: Stream] = [:]
    private var byDevice: [String: String] = [:]
    /// Messages refused before they could be put to a stream.
    public private(set) var messagesRefused: UInt64 = 0

    /// `streams`: each stream's name and device id; every one starts without consent.
    public init(nodeID: String, streams: [(name: String, deviceID: String)], limits: Limits = Limits()) {
        self.nodeID = nodeID
        self.limits = limits
        for stream in streams {
            self.streams[stream.name] = Stream(name: stream.name, deviceID: stream.deviceID)
            byDevice[stream.deviceID] = stream.name
        }
    }

    public func counters(deviceID: String) -> Counters? { byDevice[deviceID].flatMap { streams[$0]?.counters } }

    public func isAllowed(deviceID: String) -> Bool { byDevice[deviceID].flatMap { streams[$0]?.allowed } ?? false }

    /// Consent changed for the stream: without it, what waits is dropped at once (and
    /// counted as withheld) and nothing more leaves.
    public mutating func setAllowed(_ allowed: Bool, deviceID: String) {
        guard let name = byDevice[deviceID], var stream = streams[name] else { return }
        stream.allowed = allowed
        if !allowed {
            stream.counters.withheld += UInt64(stream.pending.count)
            stream.pending.removeAll()
            stream.firstPendingAt = nil
        }
        streams[name] = stream
    }

    /// A message as it came off the socket, at `now` (CLOCK_MONOTONIC); `fleetTime` puts a
    /// monotonic instant in fleet time, nil while the node has none.
    public mutating func received(_ bytes: [UInt8], now: UInt64, fleetTime: (UInt64) -> UInt64?) -> Outcome {
        var outcome = Outcome()
        let message: Capfleet_V1_SensorSamples
        do {
            message = try Capfleet_V1_SensorSamples(serializedBytes: bytes)
        } catch {
            messagesRefused += 1
            outcome.refusal = .undecodable
            outcome.detail = "a message of \(bytes.count) bytes is not a SensorSamples (sensors.proto)"
            return outcome
        }
        guard var stream = streams[message.stream] else {
            messagesRefused += 1
            outcome.refusal = .unknownStream
            let offered = streams.keys.sorted().joined(separator: ", ")
            outcome.detail =
                "stream \"\(message.stream.prefix(40))\" is not offered by this agent (offered: \(offered.isEmpty ? "none" : offered); setting sensor_streams)"
            return outcome
        }
        defer { streams[message.stream] = stream }
        func refuse(_ count: Int, _ refusal: Refusal, _ detail: String) {
            stream.counters.refused += UInt64(count)
            outcome.refused += count
            if outcome.refusal == nil {
                outcome.refusal = refusal
                outcome.detail = "stream \(stream.name): " + detail
            }
        }
        guard message.samples.count <= limits.samplesPerMessage else {
            refuse(message.samples.count, .tooManySamples, "\(message.samples.count) samples in one message; at most \(limits.samplesPerMessage)")
            return outcome
        }
        if !message.channels.isEmpty, message.channels != stream.channels {
            if let problem = channelProblem(message.channels) {
                refuse(message.samples.count, .badChannels, problem)
                return outcome
            }
            // One batch holds one set of channel names: what waits goes out under the old ones.
            if let batch = takeBatch(&stream) { outcome.batches.append(batch) }
            stream.channels = message.channels
        }
        for sample in message.samples {
            guard sample.values.count == stream.channels.count else {
                refuse(
                    1, .valueCount,
                    "a sample has \(sample.values.count) values and the stream \(stream.channels.count) channels (name them in `channels`)")
                continue
            }
            guard sample.values.allSatisfy(\.isFinite) else {
                refuse(1, .notFinite, "a sample holds a value that is not finite")
                continue
            }
            guard sample.text.utf8.count <= limits.textBytes else {
                refuse(1, .textTooLong, "a sample's text is \(sample.text.utf8.count) bytes; at most \(limits.textBytes)")
                continue
            }
            let time = sample.monotonicNs
            guard time &+ limits.behindNs >= now, time <= now &+ limits.aheadNs, time > 0 else {
                let lag = Int64(bitPattern: now &- time)
                refuse(
                    1, .outOfTime,
                    "a sample at \(time) ns is \(lag) ns behind the host's CLOCK_MONOTONIC (\(now)); stamp samples with CLOCK_MONOTONIC, within \(limits.behindNs / 1_000_000_000) s before now"
                )
                continue
            }
            guard time > stream.lastMonotonic else {
                refuse(1, .outOfOrder, "a sample at \(time) ns is not later than the one before (\(stream.lastMonotonic) ns)")
                continue
            }
            stream.lastMonotonic = time
            stream.counters.received += 1
            stream.counters.lastArrival = now
            guard stream.allowed else {
                stream.counters.withheld += 1
                continue
            }
            stream.pending.append(
                .with {
                    $0.monotonicNs = time
                    $0.fleetTimeNs = fleetTime(time) ?? 0
                    $0.values = sample.values
                    $0.text = sample.text
                })
            if stream.firstPendingAt == nil { stream.firstPendingAt = now }
            if stream.pending.count >= limits.batchReadings, let batch = takeBatch(&stream) { outcome.batches.append(batch) }
        }
        return outcome
    }

    /// The batches whose first reading has waited the flush interval by `now`.
    public mutating func due(now: UInt64) -> [Capfleet_V1_SensorData] {
        var batches: [Capfleet_V1_SensorData] = []
        for name in streams.keys.sorted() {
            guard var stream = streams[name], let first = stream.firstPendingAt, now &- first >= limits.flushIntervalNs else { continue }
            if let batch = takeBatch(&stream) { batches.append(batch) }
            streams[name] = stream
        }
        return batches
    }

    /// When the next batch falls due, nil while nothing waits.
    public var nextDue: UInt64? { streams.values.compactMap(\.firstPendingAt).min().map { $0 &+ limits.flushIntervalNs } }

    /// A batch the control channel could not take: its readings are lost, and counted.
    public mutating func unsent(_ batch: Capfleet_V1_SensorData) {
        guard var stream = streams[batch.stream] else { return }
        stream.counters.unsent += UInt64(batch.readings.count)
        streams[batch.stream] = stream
    }

    private func takeBatch(_ stream: inout Stream) -> Capfleet_V1_SensorData? {
        defer {
            stream.pending.removeAll(keepingCapacity: true)
            stream.firstPendingAt = nil
        }
        guard !stream.pending.isEmpty else { return nil }
        let (counters, pending, channels, name, deviceID, nodeID) = (
            stream.counters, stream.pending, stream.channels, stream.name, stream.deviceID, nodeID
        )
        return .with {
            $0.nodeID = nodeID
            $0.deviceID = deviceID
            $0.stream = name
            $0.channels = channels
            $0.readings = pending
            $0.received = counters.received
            $0.refused = counters.refused
            $0.withheld = counters.withheld
        }
    }

    private func channelProblem(_ channels: [String]) -> String? {
        guard channels.count <= limits.channels else { return "\(channels.count) channels; at most \(limits.channels)" }
        if let bad = channels.first(where: { $0.isEmpty || $0.utf8.count > limits.channelNameBytes }) {
            return "channel name \"\(bad.prefix(40))\" must be 1 to \(limits.channelNameBytes) bytes"
        }
        guard Set(channels).count == channels.count else { return "channel names repeat: \(channels.joined(separator: " "))" }
        return nil
    }
}
