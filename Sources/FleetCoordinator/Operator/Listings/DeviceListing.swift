import FleetCore
import FleetProtocol
import FleetStore
import Foundation

/// The fleet as operators see it: nodes and devices, live while their node is online,
/// otherwise as last stored, dated. Read by the listings and by every device change's reply.
struct DeviceListing: Sendable {
    let store: FleetDatabase
    let agents: any FleetAgents
    let leases: LeaseKeeper
    /// Who wants which devices' full-rate frames.
    let liveFlow: LiveFlowKeeper
    let clock: CoordinatorClock

    func listNodes(into reply: inout Capfleet_V1_OperatorReply) async throws(StoreError) {
        let nodes = try await store.nodes()
        let devices = try await store.devices()
        let revoked = try await store.revokedNodeIDs()
        let storedClocks = try await store.clocks()
        let live = await agents.liveStatus(of: Set(nodes.map(\.id)))
        let now = clock.unixMilliseconds()
        var presentDevices: [String: Int] = [:]
        for device in devices where device.present { presentDevices[device.nodeId, default: 0] += 1 }
        reply.nodes = nodes.map { node in
            // Live while online; otherwise the last state stored, dated.
            let report = live[node.id]
            let clock =
                report.flatMap { $0.hasClock ? NodeClockRecord(wire: $0.clock, nodeID: node.id, at: now) : nil }
                ?? storedClocks[node.id]
            return .with {
                $0.nodeID = node.id
                $0.name = node.name
                $0.hostname = node.hostname
                $0.softwareVersion = node.softwareVersion
                $0.online = report != nil
                $0.firstSeenUnixMs = node.firstSeenAt
                $0.lastSeenUnixMs = node.lastSeenAt
                $0.address = node.address
                $0.deviceCount = UInt32(presentDevices[node.id] ?? 0)
                $0.revoked = revoked.contains(node.id)
                if let clock { $0.clock = clock.wire }
                $0.encoders = node.hostEncoders.map(\.wire)
            }
        }
        reply.status = .ok
    }

    /// One read of the store, one look at the live sessions and one at the leases, whatever
    /// the number of devices.
    func listDevices(
        nodeID: String?, only deviceID: String? = nil, withFormats: Bool = false,
        into reply: inout Capfleet_V1_OperatorReply
    ) async throws(StoreError) {
        let rows = try await store.deviceListing(nodeID: nodeID, deviceID: deviceID)
        let formats = withFormats ? try await store.formats(deviceIDs: Set(rows.map(\.device.id))) : [:]
        let live = await agents.liveStatus(of: Set(rows.map(\.device.nodeId)))
        let held = await leases.leases(of: rows.map(\.device.id))
        let consumers = await liveFlow.consumers(of: rows.map(\.device.id))
        var infos: [Capfleet_V1_DeviceInfo] = []
        infos.reserveCapacity(rows.count)
        for row in rows {
            let device = row.device
            let status = device.present ? live[device.nodeId] : nil
            let online = status != nil
            let lease = held[device.id]
            let counters = status?.devices.first { $0.deviceID == device.id }
            let (policy, pressurePolicy, consent) = (row.dropRecovery, row.pressurePolicy, row.consent)
            infos.append(
                .with {
                    $0.consent = (consent?.consentState ?? .notDetermined).wire
                    $0.consentReason = consent?.reason ?? ""
                    $0.recording = counters?.recording ?? false
                    $0.realFrames = counters?.realFrames ?? false
                    $0.deviceID = device.id
                    $0.nodeID = device.nodeId
                    $0.name = device.name
                    $0.driver = device.driver
                    $0.kind = (SourceKind(rawValue: device.kind) ?? .v4l2).wire
                    if let active = row.activeFormat { $0.activeFormat = active.wire }
                    $0.activeFrameRate = device.activeFrameRate
                    $0.formatCount = UInt32(row.formatCount)
                    if withFormats { $0.formats = (formats[device.id] ?? []).map(\.wire) }
                    $0.online = online
                    $0.liveConsumers = consumers[device.id] ?? []
                    $0.liveFlow = counters?.liveFlow ?? false
                    if let lease {
                        $0.leaseHolder = lease.holder
                        $0.leaseExpiresUnixMs = Int64(lease.expiresAt)
                    }
                    if let counters {
                        $0.interruption = counters.interruption
                        if counters.hasFocus { $0.focus = counters.focus }
                        $0.zoomFactor = counters.zoomFactor
                        // What the device runs at now, which drop recovery may have lowered.
                        if counters.activeFrameRate > 0 { $0.activeFrameRate = counters.activeFrameRate }
                        $0.activeMinFrameRate = counters.activeMinFrameRate
                        if counters.hasAlignment { $0.alignment = counters.alignment }
                        if counters.hasRegion { $0.region = counters.region }
                        if counters.hasPreRoll { $0.preRoll = counters.preRoll }
                    }
                    if let policy {
                        $0.dropRecovery =
                            DropRecoveryPolicy(
                                isEnabled: policy.enabled, minimumFramesPerSecond: policy.minimumFps,
                                lateDropShare: policy.lateDropShare,
                                quietIntervalsToRestore: policy.quietSeconds
                            ).wire
                    }
                    if let pressurePolicy, let level = PressureLevel(rawValue: pressurePolicy.level) {
                        // Stored settings; whether the cap is in force now is the agent's to say.
                        let active = counters?.hasPressurePolicy == true && counters!.pressurePolicy.active
                        $0.pressurePolicy = PressurePolicy(
                            isEnabled: pressurePolicy.enabled, level: level,
                            frameRate: pressurePolicy.frameRate
                        ).wire(active: active)
                    }
                })
        }
        reply.devices = infos
        reply.status = .ok
    }
}
