import FleetCore
import FleetStore
import Foundation
import GRDB
import Testing

/// A class, so that each test's database directory goes with the test (deinit).
@Suite final class FleetDatabaseTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("capfleet-store-\(UUID().uuidString.prefix(8))").path

    init() throws { try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true) }

    deinit { try? FileManager.default.removeItem(atPath: directory) }

    var path: String { directory + "/fleet.sqlite" }

    func registration(node: String = "node-1", devices: [(String, [VideoFormat])]) -> NodeRegistration {
        NodeRegistration(
            nodeID: node, name: "host-\(node)", hostname: "host", softwareVersion: "0.1.0", address: "127.0.0.1",
            devices: devices.map { id, formats in
                .init(
                    description: DeviceDescription(deviceID: id, name: "Camera \(id)", driver: "test", kind: .synthetic, formats: formats),
                    activeFormatIndex: 0, activeFrameRate: 30)
            })
    }

    let formats = [
        VideoFormat(pixelFormat: .yuyv, width: 640, height: 480, frameRateRanges: [.init(min: 1, max: 30)], fieldOfViewDegrees: 70, maxZoomFactor: 4),
        VideoFormat(
            pixelFormat: .nv12, width: 1920, height: 1080, frameRateRanges: [.init(min: 1, max: 30), .init(min: 60, max: 60)], isBinned: true),
    ]

    @Test func registerNode_storesTheWholeFormatListInOrder() async throws {
        let store = try FleetDatabase(path: path)
        let outcome = try await store.registerNode(registration(devices: [("cam-1", formats)]), at: 1000)
        #expect(outcome == RegistrationOutcome(isNewNode: true, addedDeviceIDs: ["cam-1"]))
        #expect(try await store.formats(deviceID: "cam-1") == formats)
    }

    /// Agents say HELLO at every reconnect: an unchanged format list is left as stored, a
    /// changed one is replaced whole. A trigger counts the format rows written.
    @Test func reRegistration_rewritesFormatsOnlyWhenTheyChanged() async throws {
        let store = try FleetDatabase(path: path)
        try await DatabaseQueue(path: path).write { db in
            try db.execute(
                sql: """
                    CREATE TABLE formatWrites (n INTEGER);
                    CREATE TRIGGER countFormatWrites AFTER INSERT ON format BEGIN INSERT INTO formatWrites VALUES (1); END;
                    """)
        }
        func writes() throws -> Int {
            try DatabaseQueue(path: path).read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM formatWrites") ?? 0 }
        }
        _ = try await store.registerNode(registration(devices: [("cam-1", formats)]), at: 1000)
        #expect(try writes() == 2)
        _ = try await store.registerNode(registration(devices: [("cam-1", formats)]), at: 2000)
        #expect(try writes() == 2)
        let changed = [formats[1], formats[0]]
        _ = try await store.registerNode(registration(devices: [("cam-1", changed)]), at: 3000)
        #expect(try writes() == 4)
        #expect(try await store.formats(deviceID: "cam-1") == changed)
    }

    @Test func registerNode_keepsBigEndianPixelFormats_andDescriptorsAndPolicies() async throws {
        let store = try FleetDatabase(path: path)
        let bigEndian = VideoFormat(pixelFormat: PixelFormat("AR15-BE"), width: 320, height: 180, frameRateRanges: [.init(min: 5, max: 5)])
        _ = try await store.registerNode(registration(devices: [("cam-1", formats + [bigEndian])]), at: 1000)
        #expect(try await store.formats(deviceID: "cam-1").last == bigEndian)
        try await store.saveDescriptor(deviceID: "cam-1", bytes: Data([1, 2, 3]))
        #expect(try await store.descriptor(deviceID: "cam-1") == Data([1, 2, 3]))
        let policy = DropRecoveryPolicyRecord(deviceId: "cam-1", enabled: true, minimumFps: 5, lateDropShare: 0.05, quietSeconds: 5, updatedAt: 2000)
        try await store.saveDropRecoveryPolicy(
            policy,
            audit: AuditEntry(
                at: 2000, actor: "ana", action: "device.policy", target: "cam-1",
                outcome: "ok", detail: "on"))
        #expect(try await store.dropRecoveryPolicy(deviceID: "cam-1") == policy)
        var invalid = policy
        invalid.lateDropShare = 1.5
        await #expect(throws: StoreError.self) {
            try await store.saveDropRecoveryPolicy(
                invalid,
                audit: AuditEntry(
                    at: 2001, actor: "ana", action: "device.policy", target: "cam-1",
                    outcome: "ok", detail: "bad"))
        }
        let pressure = PressurePolicyRecord(deviceId: "cam-1", enabled: true, level: 2, frameRate: 15, updatedAt: 3000)
        try await store.savePressurePolicy(
            pressure,
            audit: AuditEntry(
                at: 3000, actor: "ana", action: "device.policy", target: "cam-1",
                outcome: "ok", detail: "cap"))
        #expect(try await store.pressurePolicy(deviceID: "cam-1") == pressure)
        var nominal = pressure
        nominal.level = 0
        await #expect(throws: StoreError.self, "a cap at nominal would always be on") {
            try await store.savePressurePolicy(
                nominal,
                audit: AuditEntry(
                    at: 3001, actor: "ana", action: "device.policy", target: "cam-1",
                    outcome: "ok", detail: "bad"))
        }
    }

    @Test func registerNode_again_updatesInsteadOfDuplicating() async throws {
        let store = try FleetDatabase(path: path)
        _ = try await store.registerNode(registration(devices: [("cam-1", formats), ("cam-2", formats)]), at: 1000)
        let again = try await store.registerNode(registration(devices: [("cam-1", Array(formats.prefix(1)))]), at: 2000)
        #expect(again == RegistrationOutcome(isNewNode: false, addedDeviceIDs: []))
        #expect(try await store.nodes().count == 1)
        let devices = try await store.devices()
        #expect(devices.count == 2)
        #expect(devices.first { $0.id == "cam-2" }?.present == false, "a device the node no longer lists is kept, marked absent")
        #expect(try await store.formats(deviceID: "cam-1").count == 1, "the format list is replaced wholesale")
        let node = try #require(try await store.node("node-1"))
        #expect(node.firstSeenAt == 1000 && node.lastSeenAt == 2000)
    }

    @Test func onlineTransitions_areRecordedInTheConnectionHistory() async throws {
        let store = try FleetDatabase(path: path)
        _ = try await store.registerNode(registration(devices: [("cam-1", formats)]), at: 1000)
        try await store.setNodeOnline("node-1", online: false, at: 2000)
        try await store.setNodeOnline("node-1", online: false, at: 2500)
        try await store.setNodeOnline("node-1", online: true, at: 3000)
        #expect(try await store.connectionHistory(nodeID: "node-1").map(\.kind) == ["registered", "offline", "online"])
        #expect(try await store.setNodeOnline("nobody", online: true, at: 1) == false)
    }

    @Test func reopening_keepsEverything() async throws {
        do {
            let store = try FleetDatabase(path: path)
            _ = try await store.registerNode(registration(devices: [("cam-1", formats)]), at: 1000)
            try await store.updateDeviceCounters([
                DeviceCountersUpdate(
                    deviceID: "cam-1", framesReceived: 500, bytesReceived: 5000,
                    drops: DropTally(late: 3), lastFrameAt: 1500)
            ])
        }
        let reopened = try FleetDatabase(path: path)
        let device = try #require(try await reopened.device("cam-1"))
        #expect(device.framesReceived == 500 && device.bytesReceived == 5000 && device.drops == DropTally(late: 3))
        #expect(try await reopened.formats(deviceID: "cam-1") == formats)
    }

    @Test func deviceCounters_neverMoveBackwards() async throws {
        let store = try FleetDatabase(path: path)
        _ = try await store.registerNode(registration(devices: [("cam-1", formats)]), at: 1000)
        try await store.updateDeviceCounters([
            .init(deviceID: "cam-1", framesReceived: 500, bytesReceived: 5000, drops: DropTally(), lastFrameAt: nil)
        ])
        try await store.updateDeviceCounters([
            .init(deviceID: "cam-1", framesReceived: 100, bytesReceived: 1000, drops: DropTally(), lastFrameAt: nil)
        ])
        #expect(try await store.device("cam-1")?.framesReceived == 500)
    }

    @Test func forgetNode_refusesAnOnlineNode_andRemovesAnOfflineOneWithItsDevices() async throws {
        let store = try FleetDatabase(path: path)
        _ = try await store.registerNode(registration(devices: [("cam-1", formats)]), at: 1000)
        await #expect(throws: StoreError.self) { try await store.forgetNode("node-1") }
        try await store.setNodeOnline("node-1", online: false, at: 2000)
        try await store.forgetNode("node-1")
        #expect(try await store.nodes().isEmpty)
        #expect(try await store.devices().isEmpty)
        #expect(try await store.formats(deviceID: "cam-1").isEmpty)
    }

    /// A device's alignment setting outlives the coordinator (reopening) and is written with its
    /// audit entry or not at all; forgetting the node forgets it.
    @Test func frameAlignment_isKeptWithItsAuditEntry_untilItsDeviceIsForgotten() async throws {
        let audit = { (detail: String) in
            AuditEntry(at: 2000, actor: "bo", action: "device.frame_alignment", target: "cam-1", outcome: "ok", detail: detail)
        }
        do {
            let store = try FleetDatabase(path: path)
            _ = try await store.registerNode(registration(devices: [("cam-1", formats), ("cam-2", formats)]), at: 1000)
            #expect(try await store.frameAlignment(deviceID: "cam-1") == nil, "nobody set it: off, and nothing to push")
            try await store.saveFrameAlignment(
                FrameAlignmentRecord(deviceId: "cam-1", enabled: true, changedAt: 2000, changedBy: "bo"),
                audit: audit("aligned"))
            await #expect(throws: StoreError.self, "a device the store does not know") {
                try await store.saveFrameAlignment(
                    FrameAlignmentRecord(deviceId: "cam-9", enabled: true, changedAt: 2001, changedBy: "bo"),
                    audit: audit("nowhere"))
            }
            #expect(try await store.auditLog().map(\.detail) == ["aligned"], "the refused write left no audit entry")
        }
        let reopened = try FleetDatabase(path: path)
        #expect(
            try await reopened.frameAlignment(deviceID: "cam-1")
                == FrameAlignmentRecord(deviceId: "cam-1", enabled: true, changedAt: 2000, changedBy: "bo"))
        try await reopened.saveFrameAlignment(
            FrameAlignmentRecord(deviceId: "cam-1", enabled: false, changedAt: 3000, changedBy: "ana"),
            audit: audit("off"))
        #expect(try await reopened.frameAlignment(deviceID: "cam-1")?.enabled == false, "off is remembered too")
        #expect(try await reopened.frameAlignment(deviceID: "cam-2") == nil)
        try await reopened.setNodeOnline("node-1", online: false, at: 4000)
        try await reopened.forgetNode("node-1")
        #expect(try await reopened.frameAlignment(deviceID: "cam-1") == nil)
    }

    @Test func auditLog_isAppendOnly() async throws {
        let store = try FleetDatabase(path: path)
        try await store.appendAudit(AuditEntry(at: 1, actor: "ana", action: "node.forget", target: "node-1", outcome: "ok"))
        #expect(try await store.auditLog().map(\.actor) == ["ana"])
        #expect(throws: DatabaseError.self) { try Self.execute("UPDATE auditLog SET actor = 'mallory'", on: path) }
        #expect(throws: DatabaseError.self) { try Self.execute("DELETE FROM auditLog", on: path) }
        #expect(try await store.auditLog().map(\.actor) == ["ana"])
    }

    /// Goes around the store, as a careless script would.
    static func execute(_ sql: String, on path: String) throws {
        try DatabaseQueue(path: path).write { try $0.execute(sql: sql) }
    }

    @Test func openingAnUnwritablePath_saysWhatToCheck() {
        #expect {
            _ = try FleetDatabase(path: "/proc/no-such-dir/fleet.sqlite")
        } throws: { error in
            String(describing: error).contains("/proc/no-such-dir/fleet.sqlite") && String(describing: error).contains("writable")
        }
    }

    /// A third party's camera (SourceKind.external) is stored and read back as one.
    @Test func registerNode_keepsAnExternalCamerasKind() async throws {
        let store = try FleetDatabase(path: path)
        let camera = DeviceDescription(
            deviceID: "gige-Basler_a2A1920-40123456", name: "Basler a2A1920", driver: "pylon", kind: .external,
            formats: formats, identitySource: "serial")
        _ = try await store.registerNode(
            NodeRegistration(
                nodeID: "node-1", name: "host-1", hostname: "host", softwareVersion: "0.1.0",
                address: "127.0.0.1",
                devices: [.init(description: camera, activeFormatIndex: 0, activeFrameRate: 30)]),
            at: 1000)
        let stored = try #require(try await store.device("gige-Basler_a2A1920-40123456"))
        #expect(stored.kind == SourceKind.external.rawValue)
    }

    /// A sensor stream (SourceKind.sensor, sensors.md) registers as a device without formats.
    @Test func registerNode_keepsASensorStreamWithoutFormats() async throws {
        let store = try FleetDatabase(path: path)
        let stream = DeviceDescription(
            deviceID: "sen-1a2b3c4d-imu0", name: "Sensor stream imu0", driver: "capfleet-sensor-endpoint", kind: .sensor,
            formats: [], identitySource: "sensor-stream")
        _ = try await store.registerNode(
            NodeRegistration(
                nodeID: "node-1", name: "host-1", hostname: "host", softwareVersion: "0.1.0", address: "127.0.0.1",
                devices: [.init(description: stream, activeFormatIndex: 0, activeFrameRate: 0)]),
            at: 1000)
        #expect(try await store.device("sen-1a2b3c4d-imu0")?.kind == SourceKind.sensor.rawValue)
        #expect(try await store.formats(deviceID: "sen-1a2b3c4d-imu0").isEmpty)
    }

    /// A database from before external cameras (migration v11) keeps its devices and what
    /// hangs off them (formats, consent history) when the device table is rebuilt.
    @Test func upgradeToExternalCameras_keepsEveryDeviceAndItsRows() async throws {
        do {
            let store = try FleetDatabase(path: path)
            _ = try await store.registerNode(registration(devices: [("cam-1", formats), ("cam-2", formats)]), at: 1000)
        }
        // Put the file back to v11: the device table holds the same rows, only its CHECK differs
        // (v12, v23, v25 and v27 each widened it).
        try await DatabaseQueue(path: path).write { db in
            try db.execute(
                sql:
                    "DELETE FROM grdb_migrations WHERE identifier IN ('v12: external cameras', 'v23: sensor streams', 'v25: ALSA microphones', 'v27: GenICam cameras')"
            )
            try db.execute(sql: "PRAGMA writable_schema = ON")
            try db.execute(
                sql: """
                    UPDATE sqlite_master SET sql = replace(sql, 'CHECK (kind IN (''synthetic'', ''v4l2'', ''external'', ''sensor'', ''syntheticMicrophone'', ''alsa'', ''genicam''))',
                                                           'CHECK (kind IN (''synthetic'', ''v4l2''))')
                    WHERE type = 'table' AND name = 'device'
                    """)
        }
        let store = try FleetDatabase(path: path)
        #expect(try await store.devices().map(\.id).sorted() == ["cam-1", "cam-2"])
        #expect(try await store.formats(deviceID: "cam-2") == formats)
        let definition = try await DatabaseQueue(path: path).read { db in
            try String.fetchOne(db, sql: "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'device'")
        }
        #expect(definition?.contains("'external', 'sensor'") == true)
        let violations = try DatabaseQueue(path: path).read { db in try Row.fetchAll(db, sql: "PRAGMA foreign_key_check") }
        #expect(violations.isEmpty)
    }

    /// Refused input is counted across coordinator restarts, like frames; two flushes that
    /// cross never lower a count.
    @Test func rejectionTotals_surviveReopening_andNeverGoDown() async throws {
        do {
            let store = try FleetDatabase(path: path)
            try await store.saveRejectionTotals([
                RejectionTotal(endpoint: "control", reason: "unknown_key", count: 4),
                RejectionTotal(endpoint: "ingest", reason: "undecodable", count: 2),
            ])
            try await store.saveRejectionTotals([RejectionTotal(endpoint: "control", reason: "unknown_key", count: 3)])
        }
        let reopened = try FleetDatabase(path: path)
        #expect(
            try await reopened.rejectionTotals() == [
                RejectionTotal(endpoint: "control", reason: "unknown_key", count: 4),
                RejectionTotal(endpoint: "ingest", reason: "undecodable", count: 2),
            ])
    }

    /// The listing reads every device in one pass and says of each what the per-device reads
    /// say: its active format (with its rates), how many formats, its consent and policies.
    @Test func deviceListing_agreesWithTheReadsOfEachDevice() async throws {
        let store = try FleetDatabase(path: path)
        _ = try await store.registerNode(registration(node: "node-1", devices: [("cam-1", formats), ("cam-2", formats)]), at: 1000)
        _ = try await store.registerNode(registration(node: "node-2", devices: [("cam-3", [formats[1]])]), at: 1000)
        try await store.setActiveFormat(deviceID: "cam-2", position: 1, frameRate: 60)
        let policy = DropRecoveryPolicyRecord(deviceId: "cam-1", enabled: true, minimumFps: 5, lateDropShare: 0.1, quietSeconds: 5, updatedAt: 2000)
        try await store.saveDropRecoveryPolicy(
            policy,
            audit: AuditEntry(
                at: 2000, actor: "ana", action: "device.policy", target: "cam-1",
                outcome: "ok", detail: ""))
        _ = try await store.changeConsent(deviceID: "cam-3", action: .grant, role: .operator, actor: "ana", reason: "booked", at: 3000)

        let rows = try await store.deviceListing()
        #expect(rows.map(\.device.id) == ["cam-1", "cam-2", "cam-3"])
        // A whole listing's formats in one read: each device's as its own read gives them.
        let everyFormat = try await store.formats(deviceIDs: nil)
        #expect(Set(everyFormat.keys) == ["cam-1", "cam-2", "cam-3"])
        #expect(Set(try await store.formats(deviceIDs: ["cam-3"]).keys) == ["cam-3"])
        for row in rows {
            let formats = try await store.formats(deviceID: row.device.id)
            #expect(everyFormat[row.device.id] == formats, "\(row.device.id)")
            #expect(row.formatCount == formats.count)
            #expect(row.activeFormat == formats[row.device.activeFormatPosition], "\(row.device.id)")
            #expect(row.consent == (try await store.consent(deviceID: row.device.id)))
            #expect(row.dropRecovery == (try await store.dropRecoveryPolicy(deviceID: row.device.id)))
        }
        #expect(rows[1].activeFormat?.frameRateRanges.count == 2, "the active format keeps all its rate ranges")
        #expect(try await store.deviceListing(nodeID: "node-2").map(\.device.id) == ["cam-3"])
        #expect(try await store.deviceListing(deviceID: "cam-2").map(\.device.id) == ["cam-2"])
        #expect(try await store.deviceListing(nodeID: "node-2", deviceID: "cam-1").isEmpty)
    }
}
