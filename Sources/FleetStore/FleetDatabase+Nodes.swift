import FleetCore
import GRDB

/// What a HELLO tells the coordinator about a node.
public struct NodeRegistration: Sendable {
    public struct Device: Sendable {
        public var description: DeviceDescription
        public var activeFormatIndex: Int
        public var activeFrameRate: Double

        public init(description: DeviceDescription, activeFormatIndex: Int, activeFrameRate: Double) {
            self.description = description
            self.activeFormatIndex = activeFormatIndex
            self.activeFrameRate = activeFrameRate
        }
    }

    public var nodeID: String
    public var name: String
    public var hostname: String
    public var softwareVersion: String
    public var address: String
    public var devices: [Device]
    /// The encoders the node records takes with (HELLO's `encoders`).
    public var encoders: [HostEncoder]

    public init(
        nodeID: String, name: String, hostname: String, softwareVersion: String, address: String, devices: [Device],
        encoders: [HostEncoder] = []
    ) {
        self.encoders = encoders
        self.nodeID = nodeID
        self.name = name
        self.hostname = hostname
        self.softwareVersion = softwareVersion
        self.address = address
        self.devices = devices
    }
}

public struct RegistrationOutcome: Sendable, Equatable {
    public var isNewNode: Bool
    public var addedDeviceIDs: [String]

    public init(isNewNode: Bool, addedDeviceIDs: [String]) {
        self.isNewNode = isNewNode
        self.addedDeviceIDs = addedDeviceIDs
    }
}

extension FleetDatabase {
    /// Records a HELLO: upserts the node and its devices, replaces each device's format
    /// list wholesale, and marks devices the node no longer lists as not present. The
    /// same node re-registering (after a restart of either side) changes rows, never adds
    /// duplicates.
    public func registerNode(_ registration: NodeRegistration, at now: UnixMilliseconds) async throws(StoreError) -> RegistrationOutcome {
        try await write("registering node \(registration.nodeID)") { db in
            var node = try NodeRecord.fetchOne(db, key: registration.nodeID)
            let isNew = node == nil
            if node == nil {
                node = NodeRecord(
                    id: registration.nodeID, name: registration.name, hostname: registration.hostname,
                    softwareVersion: registration.softwareVersion, address: registration.address,
                    online: true, firstSeenAt: now, lastSeenAt: now)
            }
            node!.name = registration.name
            node!.hostname = registration.hostname
            node!.softwareVersion = registration.softwareVersion
            node!.address = registration.address
            node!.hostEncoders = registration.encoders
            node!.online = true
            node!.lastSeenAt = now
            try node!.save(db)
            try ConnectionEventRecord(id: nil, nodeId: registration.nodeID, kind: "registered", address: registration.address, at: now).insert(db)

            var added: [String] = []
            try db.execute(sql: "UPDATE device SET present = 0 WHERE nodeId = ?", arguments: [registration.nodeID])
            for entry in registration.devices {
                let description = entry.description
                if var existing = try DeviceRecord.fetchOne(db, key: description.deviceID) {
                    existing.nodeId = registration.nodeID
                    existing.name = description.name
                    existing.driver = description.driver
                    existing.kind = description.kind.rawValue
                    existing.present = true
                    existing.activeFormatPosition = entry.activeFormatIndex
                    existing.activeFrameRate = entry.activeFrameRate
                    try existing.update(db)
                } else {
                    added.append(description.deviceID)
                    try DeviceRecord(
                        id: description.deviceID, nodeId: registration.nodeID, name: description.name,
                        driver: description.driver, kind: description.kind.rawValue, present: true,
                        activeFormatPosition: entry.activeFormatIndex, activeFrameRate: entry.activeFrameRate,
                        framesReceived: 0, bytesReceived: 0, dropsLate: 0, dropsOutOfBuffers: 0,
                        dropsDiscontinuity: 0, lastFrameAt: nil
                    ).insert(db)
                }
                try Self.replaceFormats(db, deviceID: description.deviceID, formats: description.formats)
            }
            return RegistrationOutcome(isNewNode: isNew, addedDeviceIDs: added)
        }
    }

    /// Stores the device's format list, unless it is the one stored already: an agent says
    /// HELLO at every reconnect, and a camera with hundreds of formats on a slow host must
    /// not make each of them a long write. Prepared statements, no per-row encoding.
    private static func replaceFormats(_ db: Database, deviceID: String, formats: [VideoFormat]) throws {
        let stored = formats.map { format -> VideoFormat in
            var format = format
            format.maxZoomFactor = max(format.maxZoomFactor, 1)
            return format
        }
        guard try readFormats(db, deviceID: deviceID) != stored else { return }
        try db.execute(sql: "DELETE FROM format WHERE deviceId = ?", arguments: [deviceID])
        let insertFormat = try db.cachedStatement(
            sql: """
                INSERT INTO format (deviceId, position, pixelFormat, width, height, fieldOfViewDegrees, maxZoomFactor,
                                    upscaleThresholdZoomFactor, binned, bitDepth, colour, depthUnitMetres)
                                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """)
        let insertRange = try db.cachedStatement(
            sql: """
                INSERT INTO frameRateRange (deviceId, formatPosition, position, minFps, maxFps) VALUES (?, ?, ?, ?, ?)
                """)
        for (position, format) in stored.enumerated() {
            try insertFormat.execute(arguments: [
                deviceID, position, format.pixelFormat.fourCC, format.width, format.height,
                format.fieldOfViewDegrees, format.maxZoomFactor, format.upscaleThresholdZoomFactor,
                format.isBinned, format.bitDepth, format.colour?.description ?? "", format.depthUnitMetres,
            ])
            for (rangePosition, range) in format.frameRateRanges.enumerated() {
                try insertRange.execute(arguments: [deviceID, position, rangePosition, range.minFramesPerSecond, range.maxFramesPerSecond])
            }
        }
    }

    /// A known node was heard from again, or fell silent. Records the change in the
    /// connection history; returns false when the node is unknown.
    @discardableResult
    public func setNodeOnline(_ nodeID: String, online: Bool, at now: UnixMilliseconds) async throws(StoreError) -> Bool {
        try await write("marking node \(nodeID) \(online ? "online" : "offline")") { db in
            guard var node = try NodeRecord.fetchOne(db, key: nodeID) else { return false }
            guard node.online != online else { return true }
            node.online = online
            if online { node.lastSeenAt = now }
            try node.update(db)
            try ConnectionEventRecord(id: nil, nodeId: nodeID, kind: online ? "online" : "offline", address: node.address, at: now).insert(db)
            return true
        }
    }

    /// After a coordinator restart nobody's liveness is known: everyone starts offline and
    /// comes back online when heard from.
    public func markAllNodesOffline(at now: UnixMilliseconds) async throws(StoreError) {
        try await write("marking all nodes offline") { db in
            for var node in try NodeRecord.filter(Column("online") == true).fetchAll(db) {
                node.online = false
                try node.update(db)
                try ConnectionEventRecord(id: nil, nodeId: node.id, kind: "offline", address: node.address, at: now).insert(db)
            }
        }
    }

    public func touchNodes(_ nodeIDs: [String], at now: UnixMilliseconds) async throws(StoreError) {
        guard !nodeIDs.isEmpty else { return }
        try await write("updating last-seen times") { db in
            let touch = try db.cachedStatement(sql: "UPDATE node SET lastSeenAt = ? WHERE id = ?")
            for id in nodeIDs { try touch.execute(arguments: [now, id]) }
        }
    }

    /// Removes an offline node and everything about its devices; refuses an online one.
    public func forgetNode(_ nodeID: String) async throws(StoreError) {
        try await write("forgetting node \(nodeID)") { db in
            guard let node = try NodeRecord.fetchOne(db, key: nodeID) else { throw StoreError.notFound(what: "node \(nodeID)") }
            guard !node.online else { throw StoreError.refused(reason: "node \(nodeID) is online; stop its agent before forgetting it") }
            _ = try node.delete(db)
        }
    }

    public func nodes() async throws(StoreError) -> [NodeRecord] {
        try await read("listing nodes") { db in try NodeRecord.order(Column("name"), Column("id")).fetchAll(db) }
    }

    public func node(_ nodeID: String) async throws(StoreError) -> NodeRecord? {
        try await read("reading node \(nodeID)") { db in try NodeRecord.fetchOne(db, key: nodeID) }
    }

    public func connectionHistory(nodeID: String) async throws(StoreError) -> [ConnectionEventRecord] {
        try await read("reading connection history") { db in
            try ConnectionEventRecord.filter(Column("nodeId") == nodeID).order(Column("id")).fetchAll(db)
        }
    }
}
