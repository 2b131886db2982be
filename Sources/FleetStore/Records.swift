import FleetCore
import Foundation
import GRDB

/// A node as the coordinator remembers it.
public struct NodeRecord: Codable, Sendable, Hashable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "node"
    public var id: String
    public var name: String
    public var hostname: String
    public var softwareVersion: String
    public var address: String
    public var online: Bool
    public var firstSeenAt: UnixMilliseconds
    public var lastSeenAt: UnixMilliseconds
    /// The encoders its last HELLO listed (JSON of `HostEncoder`s); empty before 1.4.
    public var encoders = ""

    public var hostEncoders: [HostEncoder] {
        get { (try? JSONDecoder().decode([HostEncoder].self, from: Data(encoders.utf8))) ?? [] }
        set { encoders = (try? String(decoding: JSONEncoder().encode(newValue), as: UTF8.self)) ?? "" }
    }
}

/// A device and the counters the coordinator keeps for it.
public struct DeviceRecord: Codable, Sendable, Hashable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "device"
    public var id: String
    public var nodeId: String
    public var name: String
    public var driver: String
    public var kind: String
    /// Whether the node's latest HELLO listed this device.
    public var present: Bool
    public var activeFormatPosition: Int
    public var activeFrameRate: Double
    public var framesReceived: Int64
    public var bytesReceived: Int64
    public var dropsLate: Int64
    public var dropsOutOfBuffers: Int64
    public var dropsDiscontinuity: Int64
    public var dropsEncoderLate: Int64 = 0
    public var lastFrameAt: UnixMilliseconds?

    public var drops: DropTally {
        DropTally(
            late: UInt64(dropsLate), outOfBuffers: UInt64(dropsOutOfBuffers), discontinuity: UInt64(dropsDiscontinuity),
            encoderLate: UInt64(max(dropsEncoderLate, 0)))
    }
}

public struct ConnectionEventRecord: Codable, Sendable, Hashable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "connectionEvent"
    public var id: Int64?
    public var nodeId: String
    public var kind: String
    public var address: String
    public var at: UnixMilliseconds
}

public struct AuditEntry: Codable, Sendable, Hashable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "auditLog"
    public var id: Int64?
    public var at: UnixMilliseconds
    public var actor: String
    public var action: String
    public var target: String
    public var outcome: String
    public var detail: String

    public init(at: UnixMilliseconds, actor: String, action: String, target: String, outcome: String, detail: String = "") {
        self.at = at
        self.actor = actor
        self.action = action
        self.target = target
        self.outcome = outcome
        self.detail = detail
    }
}
