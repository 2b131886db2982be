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
    let offloads: TakeOffloads
    let sync: TakeSyncDesk

    func info(_ take: TakeRecord, detailed: Bool) async throws -> Capfleet_V1_TakeInfo {
        let devices = try await store.takeDevices(takeID: take.id)
        let segments = try await store.segments(takeID: take.id)
        var online: Set<String> = []
        for nodeID in Set(devices.map(\.nodeId)) where await agents.isOnline(nodeID) { online.insert(nodeID) }
        let copies = try await store.segmentCopies(takeID: take.id)
        var info = Self.wire(
            take, devices: devices, segments: segments, events: detailed ? try await store.takeEvents(takeID: take.id) : nil,
            onlineNodes: online, copies: copies)
        info.offloads = try await offloadInfo(take, segments: segments, copies: copies)
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

    /// The take's offload to each destination it has copies on or a run under way to.
    private func offloadInfo(
        _ take: TakeRecord, segments: [SegmentRecord], copies: [SegmentCopyRecord]
    ) async throws
        -> [Capfleet_V1_TakeOffloadInfo]
    {
        let names = Set(copies.map(\.destination)).union(await offloads.destinations(of: take.id))
        guard !names.isEmpty else { return [] }
        let destinations = try await store.storageDestinations()
        let finished = segments.filter { $0.state != .open }
        var infos: [Capfleet_V1_TakeOffloadInfo] = []
        for name in names.sorted() {
            let own = copies.filter { $0.destination == name }
            let proved = Set(own.filter { $0.state == .verified }.map { "\($0.deviceId)#\($0.number)" })
            let provedBytes = finished.filter { proved.contains("\($0.deviceId)#\($0.number)") }.reduce(0) { $0 + UInt64(max($1.sizeBytes, 0)) }
            let total = finished.reduce(0) { $0 + UInt64(max($1.sizeBytes, 0)) }
            let running = await offloads.isRunning(take.id, to: name)
            let ending = await offloads.ending(take.id, to: name)
            let sending = running ? await offloads.bytesSending(take.id, to: name) : 0
            infos.append(
                .with {
                    $0.destination = name
                    $0.segments = UInt32(finished.count)
                    $0.verified = UInt32(proved.count)
                    $0.verifiedBytes = provedBytes
                    $0.pendingBytes = total - min(provedBytes, total)
                    $0.running = running
                    $0.sendingBytes = min(sending, total - min(provedBytes, total))
                    $0.error = ending?.error ?? ""
                    $0.destinationFull = ending?.destinationFull ?? false
                    $0.heldBack = UInt32(own.filter { $0.state == .heldBack }.count)
                    if let destination = destinations.first(where: { $0.name == name }), !proved.isEmpty {
                        $0.indexPath = OffloadLayout(root: destination.root).takeIndex(take.id)
                    }
                })
        }
        return infos
    }

    static func wire(_ copy: SegmentCopyRecord) -> Capfleet_V1_SegmentCopyInfo {
        .with {
            $0.destination = copy.destination
            $0.objectPath = copy.objectPath
            $0.state = copy.state.rawValue
            $0.proof = copy.proof
            $0.sentBytes = UInt64(max(copy.sentBytes, 0))
            $0.atUnixMs = copy.at
            $0.error = copy.error
            $0.nodeID = copy.nodeId ?? ""
        }
    }

    static func wire(
        _ take: TakeRecord, devices: [TakeDeviceRecord], segments: [SegmentRecord], events: [TakeEventRecord]?,
        onlineNodes: Set<String> = [], copies: [SegmentCopyRecord] = []
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
                        $0.copies = copies.filter { $0.deviceId == segment.deviceId && $0.number == segment.number }.map(wire)
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
