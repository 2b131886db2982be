import FleetCore
import FleetProtocol
import Foundation
import Testing

@testable import FleetCoordinator
@testable import FleetStore

/// The fleet listings and the frames handler on an in-memory store: what operators look at,
/// live where a node is online and as stored where it is not.
@Suite(.timeLimit(.minutes(1))) struct FleetListingHandlerTests {
    @Test func nodesAndDevices_areListedOnlineWithTheirLeases() async throws {
        let bed = try await OperatorBed()
        var locked = Capfleet_V1_OperatorReply()
        try await bed.handlers.devices.lock(.with { $0.deviceID = "cam-2" }, by: "ana", session: nil, into: &locked)

        var nodes = Capfleet_V1_OperatorReply()
        try await bed.handlers.listings.listNodes(into: &nodes)
        #expect(nodes.status.code == .ok)
        #expect(nodes.nodes.map(\.nodeID) == ["node-a"])
        #expect(nodes.nodes.first?.online == true)
        #expect(nodes.nodes.first?.deviceCount == 2)

        var devices = Capfleet_V1_OperatorReply()
        try await bed.handlers.listings.listDevices(.with { $0.withFormats = true }, into: &devices)
        #expect(devices.devices.map(\.deviceID).sorted() == ["cam-1", "cam-2"])
        #expect(devices.devices.allSatisfy { $0.online })
        #expect(devices.devices.first { $0.deviceID == "cam-2" }?.leaseHolder == "ana")
        #expect(devices.devices.first { $0.deviceID == "cam-1" }?.formats.count == 2)
        await bed.close()
    }

    @Test func devicesOfAnOfflineNode_areListedAsStored_andOffline() async throws {
        let bed = try await OperatorBed(online: false)
        var devices = Capfleet_V1_OperatorReply()
        try await bed.handlers.listings.listDevices(.with { $0.nodeID = "node-a" }, into: &devices)
        #expect(devices.devices.count == 2)
        #expect(devices.devices.allSatisfy { !$0.online && $0.activeFrameRate == 30 })
        await bed.close()
    }

    @Test func formatsOfAnUnknownDevice_nameTheKnownOnes() async throws {
        let bed = try await OperatorBed()
        var reply = Capfleet_V1_OperatorReply()
        try await bed.handlers.listings.formats(of: "cam-9", into: &reply)
        #expect(reply.status.code == .notFound)
        #expect(reply.status.reason == "no device cam-9; known devices: cam-1, cam-2")
        var known = Capfleet_V1_OperatorReply()
        try await bed.handlers.listings.formats(of: "cam-1", into: &known)
        #expect(known.formats.map(\.width) == [64, 128])
        await bed.close()
    }

    @Test func deviceDetails_carryTheStoredOpticsAndTheListing() async throws {
        let bed = try await OperatorBed()
        var optics = Capfleet_V1_OperatorReply()
        try await bed.handlers.devices.setDeviceOptics(
            .with {
                $0.deviceID = "cam-1"
                $0.optics = .with { $0.minimumFocusDistanceMm = 100 }
            }, by: "ana", into: &optics)
        var reply = Capfleet_V1_OperatorReply()
        try await bed.handlers.listings.deviceDetails("cam-1", into: &reply)
        #expect(reply.status.code == .ok)
        #expect(reply.devices.map(\.deviceID) == ["cam-1"])
        #expect(reply.devices.first?.optics.minimumFocusDistanceMm == 100)
        var unknown = Capfleet_V1_OperatorReply()
        try await bed.handlers.listings.deviceDetails("cam-9", into: &unknown)
        #expect(unknown.status.reason == "no device cam-9; see capfleet devices")
        await bed.close()
    }

    @Test func whoAmI_saysTheRoleAndThePorts_andOperatorsAreListed() async throws {
        let bed = try await OperatorBed()
        var me = Capfleet_V1_OperatorReply()
        bed.handlers.listings.whoAmI(try await bed.account("vic"), into: &me)
        #expect(me.you.name == "vic")
        #expect(me.you.role == .viewer)
        #expect(me.endpoints.httpPort == 8080)
        var operators = Capfleet_V1_OperatorReply()
        try await bed.handlers.listings.listOperators(into: &operators)
        #expect(operators.operators.map(\.name).sorted() == ["ana", "otto", "vic"])
        await bed.close()
    }

    @Test func statisticsIngestCountsAndEvents_areAnsweredFromMemory() async throws {
        let bed = try await OperatorBed()
        bed.rejections.reject(endpoint: "operator", reason: .undecodable, peer: "127.0.0.1")
        bed.events.emit(.recording, message: "a take started")
        var stats = Capfleet_V1_OperatorReply()
        await bed.handlers.listings.fleetStats(into: &stats)
        #expect(stats.deviceStats.map(\.deviceID) == ["cam-1"])
        #expect(stats.nodeStats.map(\.nodeID) == ["node-a"])
        var ingest = Capfleet_V1_OperatorReply()
        bed.handlers.listings.ingestStats(into: &ingest)
        #expect(ingest.rejections.contains { $0.endpoint == "operator" && $0.reason == "undecodable" && $0.count == 1 })
        var events = Capfleet_V1_OperatorReply()
        bed.handlers.listings.events(.with { $0.limit = 5 }, into: &events)
        #expect(events.events.map(\.message).contains("a take started"))
        await bed.close()
    }

    @Test func theDashboardsFleetRead_isNodesDevicesAndStatisticsTogether() async throws {
        let bed = try await OperatorBed()
        let reply = try await bed.handlers.listings.dashboardFleet()
        #expect(reply.status.code == .ok)
        #expect(reply.nodes.count == 1)
        #expect(reply.devices.count == 2)
        #expect(reply.deviceStats.count == 1)
        await bed.close()
    }

    @Test func aPreviewOrSnapshotOfAnUnregisteredDevice_isNotFound_andTheContactSheetIsEmpty() async throws {
        let bed = try await OperatorBed()
        var preview = Capfleet_V1_OperatorReply()
        bed.handlers.frames.preview(of: "cam-1", into: &preview)
        #expect(preview.status.code == .notFound)
        #expect(preview.status.reason == "no device cam-1 is registered; see capfleet devices")
        var frame = Capfleet_V1_OperatorReply()
        let payload = await bed.handlers.frames.nextFrame(of: "cam-1", into: &frame)
        #expect(payload == nil)
        #expect(frame.status.code == .notFound)
        var sheet = Capfleet_V1_OperatorReply()
        bed.handlers.frames.listPreviews(nodeID: nil, into: &sheet)
        #expect(sheet.status.code == .ok)
        #expect(sheet.previews.isEmpty)
        let live = await bed.handlers.frames.watchLive("cam-1", patience: .seconds(1)) { _ in true }
        #expect(live.code == .notFound)
        await bed.close()
    }
}
