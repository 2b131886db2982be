import FleetCore
import FleetProtocol
import FleetStore
import FleetSystem
import Foundation

/// Stills (stills.md): take, list, show, read for export, delete. The still director takes
/// and copies the pictures; this answers the operator.
struct StillHandler: Sendable {
    let store: FleetDatabase
    let stills: StillDirector
    let clock: CoordinatorClock

    func takeStill(_ query: Capfleet_V1_TakeStill, by who: String, into reply: inout Capfleet_V1_OperatorReply) async throws {
        do {
            let entry = try await stills.take(query, by: OperatorCaller.holder(who))
            reply.stills = [Self.info(entry, collecting: true)]
            reply.status = Self.status(of: entry)
        } catch let refusal as StillRefusal {
            reply.status = .failure(refusal.code, refusal.description)
        }
    }

    /// OK, with a reason naming the cameras that took no picture.
    static func status(of entry: StillEntry) -> Capfleet_V1_Status {
        let failed = entry.devices.filter { $0.state == .failed }
        guard !failed.isEmpty else { return .ok }
        return .with {
            $0.code = .ok
            $0.reason =
                "\(failed.count) of \(entry.devices.count) camera(s) took no picture: "
                + failed.map { "\($0.deviceId): \($0.error)" }.joined(separator: "; ")
        }
    }

    func listStills(into reply: inout Capfleet_V1_OperatorReply) async throws {
        var infos: [Capfleet_V1_StillInfo] = []
        for entry in try await store.stills() { infos.append(Self.info(entry, collecting: await stills.isCollecting(entry.still.id))) }
        reply.stills = infos
        reply.status = .ok
    }

    /// A still as the index has it; a still whose copying stopped short is copied again
    /// (the agent may be back).
    func showStill(_ stillID: String, into reply: inout Capfleet_V1_OperatorReply) async throws {
        guard let entry = try await store.still(id: stillID) else {
            reply.status = .failure(.notFound, "no still \(stillID); see capfleet stills list")
            return
        }
        var collecting = await stills.isCollecting(stillID)
        if !collecting, entry.devices.contains(where: { $0.state == .collecting }) {
            await stills.startCollecting(stillID)
            collecting = true
        }
        reply.stills = [Self.info(entry, collecting: collecting)]
        reply.status = .ok
    }

    func deleteStill(_ stillID: String, by who: String, into reply: inout Capfleet_V1_OperatorReply) async throws {
        do {
            try await stills.delete(stillID, by: OperatorCaller.holder(who))
            reply.status = .ok
        } catch let refusal as StillRefusal {
            try await store.appendAudit(
                AuditEntry(
                    at: clock.unixMilliseconds(), actor: OperatorCaller.holder(who), action: "still.delete", target: stillID,
                    outcome: "refused", detail: refusal.description))
            reply.status = .failure(refusal.code, refusal.description)
        }
    }

    /// A chunk of a stored picture or of its sidecar.
    func readStillFile(_ query: Capfleet_V1_ReadStillFile, into reply: inout Capfleet_V1_OperatorReply) async throws {
        guard let entry = try await store.still(id: query.stillID),
            let image = entry.images.first(where: { $0.deviceId == query.deviceID && $0.number == Int(query.number) })
        else {
            reply.status = .failure(.notFound, "still \(query.stillID) has no picture \(query.number) of \(query.deviceID)")
            return
        }
        guard let stored = image.storedPath else {
            reply.status = .failure(
                .unavailable,
                "picture \(image.number) of \(image.deviceId) is still on its node's disk: it is being copied (capfleet stills show \(query.stillID))"
            )
            return
        }
        let path = query.sidecar ? (stored as NSString).deletingPathExtension + ".json" : stored
        await FileChunk.read(of: path, offset: query.offset, length: query.length, into: &reply)
    }

    static func info(_ entry: StillEntry, collecting: Bool) -> Capfleet_V1_StillInfo {
        let devices = entry.devices
        let state: String
        if devices.contains(where: { $0.state == .capturing }) {
            state = "capturing"
        } else if devices.contains(where: { $0.state == .collecting }) {
            state = "collecting"
        } else if devices.allSatisfy({ $0.state == .failed }) {
            state = "failed"
        } else {
            state = devices.contains(where: { $0.state == .failed }) ? "partial" : "stored"
        }
        let firsts = devices.compactMap { device in entry.images(of: device.deviceId).first?.fleetTimeNs }
        return .with {
            $0.id = entry.still.id
            $0.name = entry.still.name
            $0.state = state
            $0.requestedFleetNs = entry.still.requestedFleetNs
            $0.createdUnixMs = entry.still.createdAt
            $0.createdBy = entry.still.createdBy
            $0.storedUnixMs = entry.still.storedAt ?? 0
            $0.directory = entry.still.directory
            if let first = firsts.min(), let last = firsts.max() { $0.spreadNs = last - first }
            $0.encoding = entry.still.encoding
            $0.bracketEv = entry.still.bracketEV
            $0.devices = devices.map { device in
                .with {
                    $0.deviceID = device.deviceId
                    $0.nodeID = device.nodeId
                    $0.state = device.state.rawValue
                    $0.error = device.error
                    $0.awayNs = device.awayNs
                    $0.images = entry.images(of: device.deviceId).map { image in
                        .with {
                            $0.number = UInt32(image.number)
                            $0.fileName = image.fileName
                            $0.sizeBytes = UInt64(max(image.sizeBytes, 0))
                            $0.sha256 = image.sha256
                            $0.stored = image.storedPath != nil
                            $0.requestedFleetNs = image.requestedFleetNs
                            $0.fleetTimeNs = image.fleetTimeNs
                            $0.spreadNs = image.spreadNs
                            $0.ev = image.ev
                            $0.width = UInt32(clamping: image.width)
                            $0.height = UInt32(clamping: image.height)
                            $0.pixelFormat = image.pixelFormat
                            $0.sidecarJson = image.sidecarJson
                        }
                    }
                }
            }
        }
    }
}
