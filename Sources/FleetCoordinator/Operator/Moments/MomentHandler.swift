import FleetCore
import FleetProtocol
import FleetStore
import Foundation

/// Moments (recordings.md, "Moments"): the fleet's Live Photo. One instant, a still of every
/// camera named at it (from each stream as it runs, so nothing switches format) and a take
/// from `before` it (the cameras' pre-roll) to `after` it, linked in the index. Answered
/// once the take is stored; the pictures are copied on as any still's.
struct MomentHandler: Sendable {
    let store: FleetDatabase
    let takes: TakeDirector
    let stills: StillDirector
    let catalog: TakeCatalog
    let clock: CoordinatorClock

    /// The moment's sides when none are asked for, and the most either may be.
    static let defaultSideMs: UInt32 = 1_500
    static let maximumSideMs = UInt32(PreRollSettings.maximumSeconds * 1000)

    func takeMoment(_ query: Capfleet_V1_TakeMoment, by who: String, into reply: inout Capfleet_V1_OperatorReply) async throws {
        let before = query.beforeMs == 0 ? Self.defaultSideMs : query.beforeMs
        let after = query.afterMs == 0 ? Self.defaultSideMs : query.afterMs
        guard before <= Self.maximumSideMs, after <= Self.maximumSideMs else {
            reply.status = .failure(.badRequest, "a moment reaches at most \(Self.maximumSideMs / 1000) s either side of its instant")
            return
        }
        guard query.all == query.deviceIds.isEmpty else {
            reply.status = .failure(.badRequest, query.all ? "--all or cameras, not both" : "name the cameras, or --all")
            return
        }
        let cameras = query.all ? try await authorizedCameras() : query.deviceIds
        guard !cameras.isEmpty else {
            reply.status = .failure(.unavailable, "no camera is online with its consent granted")
            return
        }
        let holder = OperatorCaller.holder(who)
        let id = Self.momentID(at: Date(timeIntervalSince1970: Double(clock.unixMilliseconds()) / 1000))
        let name = query.name.isEmpty ? id : query.name
        let instant =
            query.atFleetTimeNs != 0 ? query.atFleetTimeNs : clock.fleetNow() + UInt64(takes.configuration.recordLeadMilliseconds) * 1_000_000
        let take: TakeRecord
        do {
            take = try await takes.start(deviceIDs: cameras, name: name, at: instant, fromNow: 0, preRollMs: Int(before), by: holder)
        } catch let refusal as TakeRefusal {
            reply.status = .failure(refusal.code, "moment \(name): \(refusal.message)")
            return
        }
        // The pictures at the instant, from the streams the take records.
        let still: StillEntry
        do {
            still = try await stills.take(
                .with {
                    $0.deviceIds = cameras
                    $0.atFleetTimeNs = instant
                    $0.streamingFormat = true
                    $0.encoding = query.encoding
                    $0.name = name
                }, by: holder)
        } catch let refusal as StillRefusal {
            var reason = "moment \(name): no still, so no moment (its take \(take.id) is stopped): \(refusal.description)"
            do {
                _ = try await takes.stop(takeID: take.id, at: nil, wait: .seconds(30), by: holder)
            } catch {
                reason += "; stopping the take failed too: \(error) (capfleet record stop \(take.id))"
            }
            reply.status = .failure(refusal.code, reason)
            return
        }
        let stopAt = instant + UInt64(after) * 1_000_000
        let stopped = try await takes.stop(takeID: take.id, at: stopAt, wait: .milliseconds(Int64(after) + 60_000), by: holder)
        let moment = MomentRecord(
            id: id, name: name, instantFleetNs: instant, beforeMs: Int(before), afterMs: Int(after), takeId: take.id, stillId: still.still.id,
            devices: cameras, createdAt: clock.unixMilliseconds(), createdBy: holder, trigger: "operator")
        try await store.saveMoment(
            moment,
            audit: AuditEntry(
                at: moment.createdAt, actor: holder, action: "moment.take", target: id, outcome: "ok",
                detail:
                    "\(cameras.joined(separator: ", ")) at fleet time \(instant), \(before) ms before to \(after) ms after: take \(take.id), still \(still.still.id)"
            ))
        reply.moments = [Self.info(moment)]
        reply.takes = [try await catalog.info(stopped, detailed: false)]
        reply.stills = [StillHandler.info(still, collecting: true)]
        reply.status = StillHandler.status(of: still)
    }

    func listMoments(into reply: inout Capfleet_V1_OperatorReply) async throws {
        reply.moments = try await store.moments().map(Self.info)
        reply.status = .ok
    }

    /// The online cameras whose consent is granted: what `--all` records.
    private func authorizedCameras() async throws -> [String] {
        var cameras: [String] = []
        for device in try await store.devices() where SourceKind(rawValue: device.kind)?.isCamera ?? true {
            guard await takes.agents.isOnline(device.nodeId),
                try await store.consent(deviceID: device.id)?.consentState.allowsRealFrames == true
            else { continue }
            cameras.append(device.id)
        }
        return cameras.sorted()
    }

    static func info(_ moment: MomentRecord) -> Capfleet_V1_MomentInfo {
        .with {
            $0.id = moment.id
            $0.name = moment.name
            $0.instantFleetNs = moment.instantFleetNs
            $0.beforeMs = UInt32(clamping: moment.beforeMs)
            $0.afterMs = UInt32(clamping: moment.afterMs)
            $0.takeID = moment.takeId
            $0.stillID = moment.stillId
            $0.deviceIds = moment.devices
            $0.createdUnixMs = moment.createdAt
            $0.createdBy = moment.createdBy
            $0.trigger = moment.trigger
        }
    }

    /// Moment ids sort by time and say when: moment-20261129-221500-3f2a.
    static func momentID(at date: Date) -> String { TimestampedID.make("moment", at: date) }
}
