import FleetCore
import FleetProtocol
import FleetRecording
import FleetStore
import FleetSystem

/// `get_frame_sets` (recordings.md, "Frame sets"): the take's frames paired slot by slot, read
/// from the files this coordinator holds, on a thread of its own.
extension RecordingFilesHandler {
    /// A tolerance when neither the request nor the take names one.
    static let defaultSetTolerance: UInt64 = 1_000_000
    static let defaultSetsListed: UInt32 = 100
    static let mostSetsListed: UInt32 = 10_000

    func frameSets(_ query: Capfleet_V1_GetFrameSets, into reply: inout Capfleet_V1_OperatorReply) async throws {
        guard let take = try await store.take(id: query.takeID) else {
            reply.status = .failure(.notFound, "no take \(query.takeID); see capfleet recordings list")
            return
        }
        let segments = try await store.segments(takeID: take.id)
        let open = segments.filter { $0.state == .open }
        guard open.isEmpty else {
            reply.status = .failure(
                .badRequest,
                "take \(take.id) is still being written (\(open.count) segment(s) open): ask for its frame sets once `capfleet recordings show \(take.id)` says stopped"
            )
            return
        }
        let onAgents = segments.filter { $0.readablePath == nil }
        guard onAgents.isEmpty else {
            reply.status = .failure(
                .unavailable,
                "\(onAgents.count) segment(s) of take \(take.id) are only on the agents' disks: collect them first (capfleet recordings collect \(take.id); capfleet recordings sets does it for you)"
            )
            return
        }
        let devices = try await store.takeDevices(takeID: take.id)
        let stored = try await store.takeSync(takeID: take.id)
        // The grid the take's report kept; a take without one (still recording, or from before
        // 1.8) is placed on the coordinator's grid now.
        var storedOrigin: UInt64 = 0
        if let bytes = stored?.report, let report = try? Capfleet_V1_TakeSyncReport(serializedBytes: bytes) {
            storedOrigin = report.gridOriginFleetNs
        }
        let origin = storedOrigin != 0 ? storedOrigin : clock.gridOrigin
        let slowest = devices.map(\.frameRate).filter { $0 > 0 }.min()
        let interval = query.intervalNs != 0 ? query.intervalNs : slowest.map { UInt64((1e9 / $0).rounded()) } ?? 0
        guard interval > 0 else {
            reply.status = .failure(.badRequest, "take \(take.id) names no frame rate for its cameras: give the slots' spacing (--interval)")
            return
        }
        let tolerance =
            query.toleranceNs != 0 ? query.toleranceNs : (stored?.maxSpreadNs).flatMap { $0 > 0 ? $0 : nil } ?? Self.defaultSetTolerance
        let cameras = devices.map { device in
            (
                deviceID: device.deviceId,
                paths: segments.filter { $0.deviceId == device.deviceId }.sorted { $0.number < $1.number }.compactMap(\.readablePath)
            )
        }
        let start = take.startFleetNs
        let limit = Int(min(query.limit == 0 ? Self.defaultSetsListed : query.limit, Self.mostSetsListed))
        let (all, from) = (query.all, query.fromFleetNs)
        let outcome = await OwnedThread.run("cf-files") { () -> Result<Capfleet_V1_FrameSets, RecordingError> in
            do throws(RecordingError) {
                let read = try cameras.map { camera throws(RecordingError) in
                    try CameraFrameTimes.read(deviceID: camera.deviceID, paths: camera.paths, takeStart: start)
                }
                return .success(
                    Self.frameSets(read, gridOrigin: origin, interval: interval, tolerance: tolerance, limit: limit, all: all, from: from))
            } catch { return .failure(error) }
        }
        switch outcome {
        case let .success(sets):
            reply.frameSets = sets
            reply.status = .ok
        case let .failure(error):
            reply.status = .failure(.internal, "cannot read the frames of take \(take.id): \(error)")
        }
    }

    /// The reply's sets: the summary of every one, and those asked for listed.
    static func frameSets(
        _ cameras: [CameraFrameTimes], gridOrigin: UInt64, interval: UInt64, tolerance: UInt64, limit: Int, all: Bool, from: UInt64
    ) -> Capfleet_V1_FrameSets {
        var maker = FrameSetMaker(cameras: cameras.map(\.frames), gridOrigin: gridOrigin, interval: interval, tolerance: tolerance)
        var result = Capfleet_V1_FrameSets()
        while let set = maker.next() {
            guard set.slot >= from, all || !set.complete || set.overTolerance else { continue }
            guard result.listed.count < limit else {
                result.truncated = true
                continue
            }
            result.listed.append(
                .with {
                    $0.slotFleetNs = set.slot
                    $0.spreadNs = set.spread
                    $0.complete = set.complete
                    $0.overTolerance = set.overTolerance
                    $0.members = set.members.map { member in
                        .with {
                            $0.camera = UInt32(member.camera)
                            $0.sequence = member.sequence
                            $0.offsetNs = member.offset
                        }
                    }
                })
        }
        let summary = maker.summary
        result.intervalNs = interval
        result.toleranceNs = tolerance
        result.gridOriginFleetNs = gridOrigin
        result.slotShiftNs = maker.slotShift
        result.sets = UInt64(summary.sets)
        result.complete = UInt64(summary.complete)
        result.overTolerance = UInt64(summary.overTolerance)
        result.spread = summary.spread.wire
        result.cameras = zip(cameras, summary.cameras).map { camera, tally in
            .with {
                $0.deviceID = camera.deviceID
                $0.frames = UInt64(tally.frames)
                $0.paired = UInt64(tally.paired)
                $0.missing = UInt64(tally.missing)
                $0.offset = tally.offset.wire
                $0.exact = camera.exact
            }
        }
        return result
    }
}
