import FleetCore
import FleetProtocol
import FleetStore
import Foundation

/// Takes as operators see them: the index's rows with whether each part's node is online,
/// how far a collect has come, and the take's sync report (its figures so far while it
/// records, shown in detail only).
struct TakeCatalog: Sendable {
    let store: FleetDatabase
    let agents: any AgentCommands
    let collections: TakeCollections
    let sync: TakeSyncDesk

    func info(_ take: TakeRecord, detailed: Bool) async throws -> Capfleet_V1_TakeInfo {
        let devices = try await store.takeDevices(takeID: take.id)
        let segments = try await store.segments(takeID: take.id)
        var online: Set<String> = []
        for nodeID in Set(devices.map(\.nodeId)) where await agents.isOnline(nodeID) { online.insert(nodeID) }
        var info = Self.wire(
            take, devices: devices, segments: segments, events: detailed ? try await store.takeEvents(takeID: take.id) : nil,
            onlineNodes: online)
        // A collect's progress moves with the bytes of the segments being copied, not only
        // with whole segments (which may be most of a short take).
        info.collectedBytes += min(collections.bytesArriving(takeID: take.id), info.agentHeldBytes)
        info.sensorDeviceIds = try await store.takeSensors(takeIDs: [take.id]).map(\.deviceId)
        if let live = await sync.liveReport(takeID: take.id) {
            if detailed { info.syncReport = live }
        } else if let stored = try await store.takeSync(takeID: take.id)?.report {
            info.syncReport = try Capfleet_V1_TakeSyncReport(serializedBytes: stored)
        }
        return info
    }

    static func wire(
        _ take: TakeRecord, devices: [TakeDeviceRecord], segments: [SegmentRecord], events: [TakeEventRecord]?,
        onlineNodes: Set<String> = []
    ) -> Capfleet_V1_TakeInfo {
        .with { info in
            info.store = take.store.rawValue
            info.preRollMs = UInt32(clamping: take.preRollMs)
            info.collectError = take.collectError
            info.encoding = take.encoding.wire
            info.agentHeldBytes = segments.filter { $0.nodeId != nil && $0.collectedPath == nil }.reduce(0) { $0 + UInt64(max($1.sizeBytes, 0)) }
            info.collectedBytes = segments.filter { $0.nodeId != nil && $0.collectedPath != nil }.reduce(0) { $0 + UInt64(max($1.sizeBytes, 0)) }
            info.id = take.id
            info.name = take.name
            info.state = take.state.rawValue
            info.startFleetNs = take.startFleetNs
            info.stopFleetNs = take.stopFleetNs ?? 0
            info.directory = take.directory
            info.createdUnixMs = take.createdAt
            info.createdBy = take.createdBy
            info.error = take.error
            info.devices = devices.map { device in
                .with {
                    $0.deviceID = device.deviceId
                    $0.nodeID = device.nodeId
                    $0.state = device.state.rawValue
                    $0.pixelFormat = device.pixelFormat
                    $0.width = UInt32(clamping: device.width)
                    $0.height = UInt32(clamping: device.height)
                    $0.frameRate = device.frameRate
                    $0.firstFleetNs = device.firstFleetNs ?? 0
                    $0.lastFleetNs = device.lastFleetNs ?? 0
                    $0.firstSequence = device.firstSequence ?? 0
                    $0.lastSequence = device.lastSequence ?? 0
                    $0.frames = UInt64(max(device.frames, 0))
                    $0.bytes = UInt64(max(device.bytes, 0))
                    $0.drops = device.drops.wire
                    $0.segments = UInt32(segments.filter { $0.deviceId == device.deviceId }.count)
                    $0.endReason = device.endReason
                    $0.withheldFrames = UInt64(max(device.withheldFrames, 0))
                    $0.nodeOnline = onlineNodes.contains(device.nodeId)
                    $0.encoder = device.encoder
                    $0.sourcePixelFormat = device.sourcePixelFormat
                    $0.bitDepth = device.bitDepth == 8 ? 0 : UInt32(clamping: device.bitDepth)
                    if let colour = ColourDescription(device.colour) { $0.colour = colour.wire }
                    $0.depthUnitMetres = device.depthUnitMetres ?? 0
                    $0.encoding = (device.ownEncoding ?? take.encoding).wire
                }
            }
            let firsts = devices.compactMap(\.firstFleetNs)
            if let earliest = firsts.min(), let latest = firsts.max() { info.startSpreadNs = latest - earliest }
            info.frames = devices.reduce(0) { $0 + UInt64(max($1.frames, 0)) }
            info.bytes = devices.reduce(0) { $0 + UInt64(max($1.bytes, 0)) }
            info.sizeBytes = segments.reduce(0) { $0 + UInt64(max($1.sizeBytes, 0)) }
            if let events {
                info.segments = segments.map { segment in
                    .with {
                        $0.deviceID = segment.deviceId
                        $0.number = UInt32(segment.number)
                        $0.path = segment.path
                        $0.state = segment.state.rawValue
                        $0.sizeBytes = UInt64(max(segment.sizeBytes, 0))
                        $0.sha256 = segment.sha256
                        $0.firstFleetNs = segment.firstFleetNs ?? 0
                        $0.lastFleetNs = segment.lastFleetNs ?? 0
                        $0.firstSequence = segment.firstSequence ?? 0
                        $0.lastSequence = segment.lastSequence ?? 0
                        $0.frames = UInt64(max(segment.frames, 0))
                        $0.nodeID = segment.nodeId ?? ""
                        $0.nodeOnline = segment.nodeId.map { onlineNodes.contains($0) } ?? true
                        $0.collectedPath = segment.collectedPath ?? ""
                        $0.drops = segment.drops.wire
                    }
                }
                info.events = events.map { event in
                    .with {
                        $0.deviceID = event.deviceId
                        $0.fleetNs = event.fleetNs
                        $0.kind = event.kind
                        $0.detail = event.detail
                    }
                }
            }
        }
    }
}
