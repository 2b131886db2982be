import FleetBus
import FleetCore
import FleetProtocol
import Foundation
import GRDB
import Logging
import Synchronization
import Testing

@testable import FleetCoordinator
@testable import FleetStore

/// The lease keeper (the lease book's shell) against a real in-memory fleet database, at a
/// wall time the test sets; the replies checked are those the operator handler sends.
@Suite struct LeaseKeeperTests {
    @Test func operatorsLockingTheSameDeviceAtOnce_exactlyOneHoldsIt_andTheOthersHearWho() async throws {
        let bed = try await LeaseBed()
        let names = ["ana", "bo", "cy", "di", "ed", "flo"]
        let answers = await withTaskGroup(of: (String, LeaseKeeper.Answer).self) { group in
            for name in names { group.addTask { (name, await bed.keeper.lock("cam-1", by: name, seconds: 60)) } }
            var answers: [(String, LeaseKeeper.Answer)] = []
            for await answer in group { answers.append(answer) }
            return answers
        }
        let winners = answers.compactMap { name, answer in if case .granted = answer { name } else { nil } }
        let winner = try #require(winners.first)
        #expect(winners.count == 1)
        for (name, answer) in answers where name != winner {
            #expect(answer.status.code == .permissionDenied)
            #expect(answer.status.reason.contains("locked for configuration by \(winner)"))
        }
        // The store holds what the keeper decided, and the log has every answer.
        #expect(try await bed.store.leases().map(\.holder) == [winner])
        let audit = try await bed.store.auditLog(actionPrefix: "lease.lock")
        #expect(audit.filter { $0.outcome == "ok" }.map(\.actor) == [winner])
        #expect(audit.filter { $0.outcome == "refused" }.count == names.count - 1)
    }

    @Test func aLeaseTheStoreCannotRecord_isAnErrorReply_andNobodyHoldsIt() async throws {
        let bed = try await LeaseBed()
        // The fleet database starts refusing leases, as a full or broken disk would.
        try await bed.store.writer.write { db in
            try db.execute(sql: "CREATE TRIGGER refuse BEFORE INSERT ON configurationLease BEGIN SELECT RAISE(FAIL, 'disk I/O error'); END")
        }
        let answer = await bed.keeper.lock("cam-1", by: "ana", seconds: 60)
        #expect(answer.status.code == .internal)
        #expect(answer.status.reason.hasPrefix("the lease was not changed: storing the lease on cam-1 failed"))
        #expect(answer.status.reason.contains("disk I/O error"))
        #expect(await bed.keeper.lease(of: "cam-1") == nil)
        // Once the database writes again, the device is free for anyone.
        try await bed.store.writer.write { db in try db.execute(sql: "DROP TRIGGER refuse") }
        guard case .granted = await bed.keeper.lock("cam-1", by: "bo", seconds: 60) else {
            Issue.record("bo must get the lease nobody holds")
            return
        }
        #expect(try await bed.store.leases().map(\.holder) == ["bo"])
    }

    @Test func locksAndUnlocksAnsweredAtOnce_leaveTheStoreHoldingWhatTheKeeperHolds() async throws {
        let bed = try await LeaseBed()
        for round in 0..<20 {
            let device = "cam-\(round % 3)"
            async let lock = bed.keeper.lock(device, by: "ana", seconds: 60)
            async let unlock = bed.keeper.unlock(device, by: "ana")
            async let other = bed.keeper.lock(device, by: "bo", seconds: 60)
            _ = await (lock, unlock, other)
            let held = await bed.keeper.lease(of: device)
            let stored = try await bed.store.leases().first { $0.deviceId == device }
            #expect(stored?.holder == held?.holder, "round \(round)")
            #expect(stored.map { UInt64($0.expiresAt) } == held?.expiresAt, "round \(round)")
        }
    }

    @Test func aReleaseTheStoreCannotRecord_isLoggedAndAnnounced_andTheLeaseStillGoes() async throws {
        let bed = try await LeaseBed()
        guard case .granted = await bed.keeper.lock("cam-1", by: "ana", seconds: 1) else {
            Issue.record("ana locks a free device")
            return
        }
        try await bed.store.writer.write { db in
            try db.execute(sql: "CREATE TRIGGER refuse BEFORE DELETE ON configurationLease BEGIN SELECT RAISE(FAIL, 'disk I/O error'); END")
        }
        bed.wall.set(bed.start + 1_000)
        await bed.keeper.expire()
        #expect(await bed.keeper.lease(of: "cam-1") == nil)
        let messages = bed.events.recent(limit: 10).map(\.message)
        #expect(
            messages.contains { $0.hasPrefix("lease of ana released, but the fleet database could not record it") && $0.contains("disk I/O error") })
    }

    @Test func aLeaseRunningOutUnderAChange_isNotTakenByAnotherUntilTheChangeIsAnswered() async throws {
        let bed = try await LeaseBed()
        guard case .granted = await bed.keeper.lock("cam-1", by: "ana", seconds: 1) else {
            Issue.record("ana locks a free device")
            return
        }
        #expect(await bed.keeper.beginChange("cam-1", by: "ana").map(\.holder) == .success("ana"))
        bed.wall.set(bed.start + 5_000)
        await bed.keeper.expire()
        guard case let .refused(refusal) = await bed.keeper.lock("cam-1", by: "bo", seconds: 60) else {
            Issue.record("bo must wait for ana's change to be answered")
            return
        }
        #expect(refusal.description.contains("by ana"))
        await bed.keeper.endChange("cam-1")
        await bed.keeper.expire()
        guard case .granted = await bed.keeper.lock("cam-1", by: "bo", seconds: 60) else {
            Issue.record("bo gets the lease once ana's change is answered")
            return
        }
        #expect(try await bed.store.leases().map(\.holder) == ["bo"])
    }
}

/// A lease keeper on an in-memory database with registered devices, at a wall time the
/// test moves.
struct LeaseBed {
    let store: FleetDatabase
    let events: FleetEvents
    let keeper: LeaseKeeper
    let start: Int64 = 1_800_000_000_000
    let wall: FakeWallTime

    init(devices: [String] = ["cam-0", "cam-1", "cam-2"]) async throws {
        store = try FleetDatabase.inMemory()
        let format = VideoFormat(pixelFormat: .yuyv, width: 64, height: 48, frameRateRanges: [.init(min: 1, max: 30)])
        _ = try await store.registerNode(
            NodeRegistration(
                nodeID: "node-a", name: "a", hostname: "a", softwareVersion: "test", address: "127.0.0.1",
                devices: devices.map {
                    .init(
                        description: DeviceDescription(deviceID: $0, name: $0, driver: "test", kind: .synthetic, formats: [format]),
                        activeFormatIndex: 0, activeFrameRate: 30)
                }), at: 1)
        let keys = try CurveKeyPair.generate()
        let telemetry = try TelemetryPublisherSocket(
            context: ZMQContext(), bind: "tcp://127.0.0.1:*",
            security: CurveServerSecurity(keys: keys, domain: "telemetry") { _, _ in })
        events = FleetEvents(telemetry: telemetry)
        let wall = FakeWallTime(start)
        self.wall = wall
        let clock = CoordinatorClock(fleetNow: { 1_000_000_000_000 }, unixMilliseconds: { wall.now })
        keeper = LeaseKeeper(store: store, events: events, clock: clock, logger: Logger(label: "test"))
    }
}

/// Wall-clock milliseconds that move only when the test says.
final class FakeWallTime: Sendable {
    private let milliseconds: Atomic<Int64>
    init(_ start: Int64) { milliseconds = Atomic(start) }
    var now: Int64 { milliseconds.load(ordering: .relaxed) }
    func set(_ value: Int64) { milliseconds.store(value, ordering: .relaxed) }
}
