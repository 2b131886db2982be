import FleetProtocol
import Foundation
import Logging
import SwiftProtobuf

/// The dashboard's live updates, one WebSocket per browser (operator.md, "The web
/// dashboard"): while at least one browser listens, the fleet is read once a tick, what
/// changed is encoded once, and the same text goes to every listener; a browser that joins,
/// or fell behind, gets the whole fleet once. So the coordinator's cost grows with the fleet
/// and the rate it changes, not with the number of browsers.
///
/// A message is one JSON object: `{"type":"fleet","whole":BOOL,"changed":{TABLE:[…]},
/// "gone":{TABLE:[ids]},"events":[…]}`, the tables being devices, device_stats, nodes,
/// node_stats and pressure, their entries the operator replies' objects in protobuf's JSON
/// mapping (proto-docs/operator.proto) and events FleetEvents in the same mapping.
actor DashboardLiveFeed {
    /// One read of the fleet: devices, nodes, their statuses and pressure.
    typealias FleetReader = @Sendable () async throws -> Capfleet_V1_OperatorReply

    private let read: FleetReader
    private let events: FleetEvents
    private let logger: Logger
    private var ledger = DashboardFeedLedger()
    private var eventCursor: UInt64 = 0
    private var listeners: [UInt64: Listener] = [:]
    private var nextListener: UInt64 = 0
    private var reading = false
    private var closed = false
    /// What was sent since the coordinator started, for the dashboard benchmark and /metrics' readers.
    private(set) var sentBytes: UInt64 = 0

    /// How many messages a browser may have unread before it is sent the whole fleet instead.
    static let backlog = 8
    /// Events a browser that joins is sent.
    static let eventsOnJoin = 200

    private struct Listener {
        let continuation: AsyncStream<String>.Continuation
        var needsWhole = true
    }

    init(read: @escaping FleetReader, events: FleetEvents, logger: Logger) {
        self.read = read
        self.events = events
        self.logger = logger
    }

    /// A new listener: its messages, the first the whole fleet at the next tick (started now).
    func join() -> (id: UInt64, messages: AsyncStream<String>) {
        nextListener += 1
        let id = nextListener
        let (messages, continuation) = AsyncStream<String>.makeStream(bufferingPolicy: .bufferingOldest(Self.backlog))
        guard !closed else {
            continuation.finish()
            return (id, messages)
        }
        listeners[id] = Listener(continuation: continuation)
        Task { await self.tick() }
        return (id, messages)
    }

    func leave(_ id: UInt64) {
        listeners.removeValue(forKey: id)?.continuation.finish()
    }

    var listenerCount: Int { listeners.count }

    /// At shutdown: every listener's stream ends (its connection closes), and no new one starts.
    func close() {
        closed = true
        for listener in listeners.values { listener.continuation.finish() }
        listeners.removeAll()
    }

    /// Reads the fleet and sends each listener what it needs; nothing while nobody listens.
    func tick() async {
        guard !listeners.isEmpty, !reading else { return }
        reading = true
        defer { reading = false }
        let reply: Capfleet_V1_OperatorReply
        do {
            reply = try await read()
        } catch {
            logger.warning("the dashboard's live feed cannot read the fleet", metadata: ["error": "\(error)"])
            return
        }
        let change: DashboardFeedLedger.Change
        do {
            change = ledger.update(to: try Self.entries(of: reply))
        } catch {
            logger.error("the dashboard's live feed cannot encode the fleet", metadata: ["error": "\(error)"])
            return
        }
        let (newEvents, cursor) = events.recent(after: eventCursor, limit: FleetEvents.remembered)
        eventCursor = cursor
        var update: String?
        var whole: String?
        for (id, listener) in listeners {
            let text: String
            do {
                if listener.needsWhole {
                    if whole == nil { whole = try Self.message(ledger.whole, whole: true, events: events.recent(limit: Self.eventsOnJoin)) }
                    text = whole ?? ""
                } else {
                    if change.isEmpty && newEvents.isEmpty { continue }
                    if update == nil { update = try Self.message(change, whole: false, events: newEvents) }
                    text = update ?? ""
                }
            } catch {
                logger.error("the dashboard's live feed cannot encode the fleet's events", metadata: ["error": "\(error)"])
                return
            }
            switch listener.continuation.yield(text) {
            case .enqueued:
                listeners[id]?.needsWhole = false
                sentBytes &+= UInt64(text.utf8.count)
            case .dropped:
                // Behind: what it missed is made up by the whole fleet once it reads again.
                listeners[id]?.needsWhole = true
            case .terminated:
                listeners[id] = nil
            @unknown default:
                listeners[id]?.needsWhole = true
            }
        }
    }

    static func entries(of reply: Capfleet_V1_OperatorReply) throws -> DashboardFeedLedger.Entries {
        func keyed<M: SwiftProtobuf.Message>(_ items: [M], by key: (M) -> String) throws -> [String: String] {
            var entries: [String: String] = [:]
            for item in items { entries[key(item)] = try item.jsonString() }
            return entries
        }
        return [
            .devices: try keyed(reply.devices) { $0.deviceID },
            .deviceStats: try keyed(reply.deviceStats) { $0.deviceID },
            .nodes: try keyed(reply.nodes) { $0.nodeID },
            .nodeStats: try keyed(reply.nodeStats) { $0.nodeID },
            .pressure: try keyed(reply.pressure) { $0.nodeID },
        ]
    }

    static func message(_ change: DashboardFeedLedger.Change, whole: Bool, events: [Capfleet_V1_FleetEvent]) throws -> String {
        func object(_ tables: [DashboardFeedLedger.Table: [String]], quoted: Bool) -> String {
            let members = DashboardFeedLedger.Table.allCases.compactMap { table -> String? in
                guard let items = tables[table], !items.isEmpty else { return nil }
                let values = quoted ? items.map(quote) : items
                return "\"\(table.rawValue)\":[\(values.joined(separator: ","))]"
            }
            return "{\(members.joined(separator: ","))}"
        }
        let eventTexts = try events.map { try $0.jsonString() }
        return
            #"{"type":"fleet","whole":\#(whole),"changed":\#(object(change.changed, quoted: false)),"gone":\#(object(change.gone, quoted: true)),"events":[\#(eventTexts.joined(separator: ","))]}"#
    }

    /// An id as a JSON string (ids are ours, but a node's name for them is not trusted).
    static func quote(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case _ where scalar.value < 0x20: out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
