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

/// The take director against a real (in-memory) fleet database, real writers on their own
/// threads and a real telemetry socket; the agents' side is played by the test.
@Suite struct TakeDirectorTests {
    @Test func twoConcurrentStartsOfTheSameDevice_exactlyOneWins() async throws {
        let bed = try await DirectorBed(devices: ["cam-1", "cam-2"])
        // Agents answer slowly, so both requests are in flight together.
        await bed.agents.setAnswerDelay(.milliseconds(50))
        async let first = bed.outcome { try await bed.director.start(deviceIDs: ["cam-1"], name: "a", at: nil, fromNow: 0, by: "ana") }
        async let second = bed.outcome { try await bed.director.start(deviceIDs: ["cam-2", "cam-1"], name: "b", at: nil, fromNow: 0, by: "bo") }
        let outcomes = await [first, second]
        #expect(outcomes.filter { $0 == "started" }.count == 1)
        let refusal = try #require(outcomes.first { $0 != "started" })
        #expect(refusal.contains("device cam-1 is being recorded in take"))
        let takes = try await bed.store.takes()
        #expect(takes.count == 1)
        // The refused request reserved nothing: cam-2 can be recorded now.
        _ = try await bed.director.start(deviceIDs: ["cam-2"], name: "c", at: nil, fromNow: 0, by: "bo")
        await bed.director.shutdown()
    }

    @Test func twoConcurrentStops_exactlyOneStops_theOtherSaysWhenAndByWhom() async throws {
        let bed = try await DirectorBed(devices: ["cam-1"])
        let take = try await bed.director.start(deviceIDs: ["cam-1"], name: "t", at: nil, fromNow: 0, by: "ana")
        async let first = bed.stopOutcome { try await bed.director.stop(takeID: take.id, at: nil, wait: .milliseconds(50), by: "ana") }
        async let second = bed.stopOutcome { try await bed.director.stop(takeID: take.id, at: nil, wait: .milliseconds(50), by: "bo") }
        let outcomes = await [first, second]
        #expect(outcomes.filter { $0 == "stopped" }.count == 1, "\(outcomes)")
        let already = try #require(outcomes.first { $0 != "stopped" })
        #expect(
            already.hasPrefix("take \(take.id) is already stopping at ") || already.hasPrefix("take \(take.id) was already stopped at "), "\(already)"
        )
        #expect(already.hasSuffix("; nothing changed"))
        let audit = try await bed.store.auditLog().filter { $0.action == "recording.stop" }
        #expect(audit.count == 1, "one stop, one audit entry: \(audit)")

        // Later, a third stop names who stopped it and when.
        let third = await bed.stopOutcome { try await bed.director.stop(takeID: take.id, at: nil, wait: .zero, by: "cy") }
        let stopper = try #require(audit.first?.actor)
        #expect(third.contains(" by \(stopper); nothing changed") && third.contains("(fleet ns "), "\(third)")
        await bed.director.shutdown()
    }

    @Test func aStartInThePast_orADayAhead_isRefusedWithTheFleetsTime() async throws {
        let bed = try await DirectorBed(devices: ["cam-1"])
        let past = await bed.outcome { try await bed.director.start(deviceIDs: ["cam-1"], name: "old", at: 1_000_000, fromNow: 0, by: "ana") }
        #expect(past.hasPrefix("the start 1970-01-01T00:00:00.001Z is 16.7 min in the past; the fleet's time is 1970-01-01T00:16:40"), "\(past)")
        #expect(past.contains("Leave --at out to start now"))
        let ahead = await bed.outcome {
            try await bed.director.start(deviceIDs: ["cam-1"], name: "far", at: nil, fromNow: 3 * 86_400 * 1_000_000_000, by: "ana")
        }
        #expect(ahead.contains("3 days ahead, more than the 24 h a take may be scheduled"), "\(ahead)")
        #expect(try await bed.store.takes().isEmpty, "a refused start leaves nothing in the index")
        _ = try await bed.director.start(deviceIDs: ["cam-1"], name: "now", at: nil, fromNow: 0, by: "ana")
        await bed.director.shutdown()
    }

    @Test func aStoreFailureMidTake_failsTheTakeAndSaysWhy() async throws {
        let bed = try await DirectorBed(devices: ["cam-1", "cam-2"])
        let take = try await bed.director.start(deviceIDs: ["cam-1", "cam-2"], name: "t", at: nil, fromNow: 0, by: "ana")
        // The index starts refusing changes to the take's devices (as a full or broken disk would).
        try await bed.store.writer.write { db in
            try db.execute(sql: "CREATE TRIGGER refuse BEFORE UPDATE ON takeDevice BEGIN SELECT RAISE(FAIL, 'disk I/O error'); END")
        }
        // cam-1's writer reports that its frames flow: the index cannot record it.
        await bed.director.report(.flowing, from: TakeBook.Part(takeID: take.id, deviceID: "cam-1"))
        let stored = try #require(try await bed.store.take(id: take.id))
        #expect(stored.state == .failed)
        #expect(stored.error.hasPrefix("the recordings index could not record that cam-1 records: updating cam-1 in take \(take.id) failed"))
        #expect(stored.error.contains("disk I/O error"))
        // Both agents are told to stop, and the fleet hears of it.
        let orders = await bed.agents.orders
        #expect(orders.contains { $0.deviceID == "cam-2" && !$0.recording })
        #expect(orders.contains { $0.deviceID == "cam-1" && !$0.recording })
        #expect(bed.events.recent(limit: 20).contains { $0.message.hasPrefix("take \(take.id) failed: the recordings index could not record") })
        // The devices are free once their parts end.
        await bed.director.shutdown()
    }

    @Test func anAgentRefusingTheStart_failsTheTakeAndFreesTheDevices() async throws {
        let bed = try await DirectorBed(devices: ["cam-1", "cam-2"])
        await bed.agents.refuse("cam-2", reason: "no clock estimate yet")
        let outcome = await bed.outcome { try await bed.director.start(deviceIDs: ["cam-1", "cam-2"], name: "t", at: nil, fromNow: 0, by: "ana") }
        #expect(outcome == "the take did not start: cam-2: no clock estimate yet")
        let take = try #require(try await bed.store.takes().first)
        #expect(take.state == .failed)
        #expect(take.error == "cam-2: no clock estimate yet")
        await bed.agents.refuse("cam-2", reason: nil)
        _ = try await bed.director.start(deviceIDs: ["cam-1", "cam-2"], name: "again", at: nil, fromNow: 0, by: "ana")
        await bed.director.shutdown()
    }
}

/// A take director on an in-memory database with registered, consenting devices.
struct DirectorBed {
    let store: FleetDatabase
    let agents: PlayedAgents
    let events: FleetEvents
    let director: TakeDirector
    let directory: String

    init(devices: [String]) async throws {
        store = try FleetDatabase.inMemory()
        directory = NSTemporaryDirectory() + "capfleet-director-\(UUID().uuidString.prefix(8))"
        let format = VideoFormat(pixelFormat: .yuyv, width: 64, height: 48, frameRateRanges: [.init(min: 1, max: 30)])
        _ = try await store.registerNode(
            NodeRegistration(
                nodeID: "node-a", name: "a", hostname: "a", softwareVersion: "test", address: "127.0.0.1",
                devices: devices.map {
                    .init(
                        description: DeviceDescription(deviceID: $0, name: $0, driver: "test", kind: .synthetic, formats: [format]),
                        activeFormatIndex: 0, activeFrameRate: 30)
                }), at: 1)
        for device in devices {
            _ = try await store.changeConsent(deviceID: device, action: .grant, role: .admin, actor: "ana", reason: "test", at: 2)
        }
        agents = PlayedAgents()
        let keys = try CurveKeyPair.generate()
        let telemetry = try TelemetryPublisherSocket(
            context: ZMQContext(), bind: "tcp://127.0.0.1:*",
            security: CurveServerSecurity(keys: keys, domain: "telemetry") { _, _ in })
        events = FleetEvents(telemetry: telemetry)
        let fleetNow = Atomic<UInt64>(1_000_000_000_000)
        let clock = CoordinatorClock(fleetNow: { fleetNow.add(1_000_000, ordering: .relaxed).newValue }, unixMilliseconds: { 1_800_000_000_000 })
        var configuration = CoordinatorConfiguration(dataDirectory: directory)
        configuration.recordReserveBytes = 0
        let counter = Atomic<Int>(0)
        director = TakeDirector(
            store: store, agents: agents, writers: TakeWriters(), events: events, clock: clock,
            configuration: configuration, logger: Logger(label: "test"), links: AgentRecordLinks(desk: AgentRecordingsDesk(), send: { _, _ in }),
            currentPixelFormat: { _ in "YUYV" },
            makeTakeID: { "take-\(counter.add(1, ordering: .relaxed).newValue)" })
    }

    /// "stopped", or what the director said instead.
    func stopOutcome(_ body: () async throws -> TakeRecord) async -> String {
        do {
            _ = try await body()
            return "stopped"
        } catch let already as TakeAlreadyStopped {
            return already.message
        } catch let refusal as TakeRefusal {
            return refusal.message
        } catch {
            return "\(error)"
        }
    }

    /// "started", or the refusal's words.
    func outcome(_ body: () async throws -> TakeRecord) async -> String {
        do {
            _ = try await body()
            return "started"
        } catch let refusal as TakeRefusal {
            return refusal.message
        } catch {
            return "\(error)"
        }
    }
}

/// The agents, as the test plays them: online, answering every SetRecording (or refusing it
/// for a device), after a delay the test chooses, and remembering what they were told.
actor PlayedAgents: AgentCommands {
    struct Order: Sendable {
        let deviceID: String
        let recording: Bool
    }
    private(set) var orders: [Order] = []
    private var refusals: [String: String] = [:]
    private var delay: Duration = .zero

    func setAnswerDelay(_ delay: Duration) { self.delay = delay }
    func refuse(_ deviceID: String, reason: String?) { refusals[deviceID] = reason }

    func isOnline(_ nodeID: String) async -> Bool { true }

    func command(_ action: Capfleet_V1_Command.OneOf_Action, deviceID: String, nodeID: String, timeout: Duration) async -> Capfleet_V1_CommandReply {
        if case let .setRecording(request) = action { orders.append(Order(deviceID: deviceID, recording: request.recording)) }
        if delay > .zero { try? await Task.sleep(for: delay) }
        if let reason = refusals[deviceID] { return .with { $0.status = .failure(.unavailable, reason) } }
        return .with { $0.status = .ok }
    }
}
