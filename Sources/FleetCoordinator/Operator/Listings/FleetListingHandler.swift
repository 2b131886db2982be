import FleetCore
import FleetProtocol
import FleetStore
import Foundation
import Logging

/// What operators look at: nodes, devices, formats, statistics, events, operators and who
/// they are. Nothing here changes the fleet.
struct FleetListingHandler: Sendable {
    let store: FleetDatabase
    let listing: DeviceListing
    /// What the telemetry reporter last worked out for the fleet.
    let statistics: any FleetStatistics
    let events: FleetEvents
    let rejections: RejectionCounter
    /// Every endpoint's port, as bound: who_am_i tells them.
    let ports: Capfleet_V1_CoordinatorEndpoints
    let logger: Logger
    /// Who decides whether cameras auto-frame: a device's detection is shown as its agent is told it.
    var framingPolicy = FramingPolicy.operatorControlled

    func listNodes(into reply: inout Capfleet_V1_OperatorReply) async throws(StoreError) {
        try await listing.listNodes(into: &reply)
    }

    func listDevices(_ query: Capfleet_V1_ListDevices, into reply: inout Capfleet_V1_OperatorReply) async throws(StoreError) {
        try await listing.listDevices(nodeID: query.nodeID.isEmpty ? nil : query.nodeID, withFormats: query.withFormats, into: &reply)
    }

    func fleetStats(into reply: inout Capfleet_V1_OperatorReply) async {
        reply.deviceStats = await statistics.deviceStatuses
        reply.nodeStats = await statistics.nodeStatuses
        reply.pressure = await statistics.pressureReports
        reply.status = .ok
    }

    func ingestStats(into reply: inout Capfleet_V1_OperatorReply) {
        reply.rejections = rejections.counts.map { entry in
            .with {
                $0.endpoint = entry.endpoint
                $0.reason = entry.reason
                $0.count = entry.count
            }
        }
        reply.status = .ok
    }

    func events(_ query: Capfleet_V1_GetEvents, into reply: inout Capfleet_V1_OperatorReply) {
        reply.events = events.recent(limit: Int(query.limit == 0 ? 100 : min(query.limit, UInt32(FleetEvents.remembered))))
        reply.status = .ok
    }

    func listOperators(into reply: inout Capfleet_V1_OperatorReply) async throws(StoreError) {
        reply.operators = try await store.operators().map(AccessHandler.info)
        reply.status = .ok
    }

    func whoAmI(_ account: OperatorRecord, into reply: inout Capfleet_V1_OperatorReply) {
        reply.you = AccessHandler.info(account)
        reply.endpoints = ports
        reply.status = .ok
    }

    /// One device in full: its listing plus the descriptor it registered with.
    func deviceDetails(_ deviceID: String, into reply: inout Capfleet_V1_OperatorReply) async throws(StoreError) {
        guard let device = try await store.existingDevice(deviceID, into: &reply) else { return }
        try await listing.listDevices(nodeID: device.nodeId, only: device.id, into: &reply)
        if !reply.devices.isEmpty, let node = try await store.node(device.nodeId) { reply.devices[0].encoders = node.hostEncoders.map(\.wire) }
        if !reply.devices.isEmpty, let optics = try await store.optics(deviceID: device.id) { reply.devices[0].optics = optics.wire }
        if !reply.devices.isEmpty {
            let stored = try await store.detection(deviceID: device.id)
            let isCamera = SourceKind(rawValue: device.kind)?.isCamera ?? false
            if stored != nil || isCamera, let detection = framingPolicy.effective(stored?.settings), detection.isOn {
                reply.devices[0].detection = detection.wire
            }
        }
        if !reply.devices.isEmpty, let processing = try await store.audioProcessing(deviceID: device.id), processing.settings.isOn {
            reply.devices[0].audioProcessing = processing.settings.wire
        }
        guard let bytes = try await store.descriptor(deviceID: device.id), !reply.devices.isEmpty else { return }
        do {
            reply.devices[0].descriptor = try Capfleet_V1_DeviceDescriptor(serializedBytes: bytes)
        } catch {
            // The listing still answers; a stored descriptor that does not decode is damage to report.
            logger.error("a stored device descriptor does not decode", metadata: ["device.id": "\(device.id)", "error": "\(error)"])
        }
    }

    func formats(of deviceID: String, into reply: inout Capfleet_V1_OperatorReply) async throws(StoreError) {
        guard try await store.device(deviceID) != nil else {
            let known = try await store.devices().map(\.id)
            reply.status = .failure(.notFound, "no device \(deviceID); known devices: \(known.isEmpty ? "none" : known.joined(separator: ", "))")
            return
        }
        reply.formats = try await store.formats(deviceID: deviceID).map(\.wire)
        reply.status = .ok
    }

    /// What the dashboard's live feed reads once a tick for every browser: the answers to
    /// listNodes, listDevices and getFleetStats, together.
    func dashboardFleet() async throws(StoreError) -> Capfleet_V1_OperatorReply {
        var reply = Capfleet_V1_OperatorReply()
        try await listing.listNodes(into: &reply)
        try await listing.listDevices(nodeID: nil, into: &reply)
        await fleetStats(into: &reply)
        return reply
    }
}

/// The fleet's statistics as last reported (TelemetryReporter, once a second).
protocol FleetStatistics: Sendable {
    var deviceStatuses: [Capfleet_V1_DeviceStatus] { get async }
    var nodeStatuses: [Capfleet_V1_NodeStatus] { get async }
    var pressureReports: [Capfleet_V1_PressureReport] { get async }
}

extension TelemetryReporter: FleetStatistics {}
