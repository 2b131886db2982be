import FleetCore
import FleetProtocol
import FleetStore
import Foundation

/// `take_moment` and `list_moments` (recordings.md, "Moments"): answered once the take is
/// stored, with the moment, its take and its still; the pictures are copied on as any still's.
struct MomentHandler: Sendable {
    let taker: MomentTaker
    let store: FleetDatabase
    let catalog: TakeCatalog

    func takeMoment(_ query: Capfleet_V1_TakeMoment, by who: String, into reply: inout Capfleet_V1_OperatorReply) async throws {
        guard query.all == query.deviceIds.isEmpty else {
            reply.status = .failure(.badRequest, query.all ? "--all or cameras, not both" : "name the cameras, or --all")
            return
        }
        let request = MomentTaker.Request(
            cameras: query.deviceIds, all: query.all, beforeMs: query.beforeMs == 0 ? MomentTaker.defaultSideMs : query.beforeMs,
            afterMs: query.afterMs == 0 ? MomentTaker.defaultSideMs : query.afterMs, name: query.name,
            instantFleetNs: query.atFleetTimeNs == 0 ? nil : query.atFleetTimeNs, encoding: query.encoding)
        let taken: MomentTaker.Taken
        do {
            taken = try await taker.take(request, by: OperatorCaller.holder(who))
        } catch let refusal as MomentTaker.Refusal {
            reply.status = .failure(refusal.code, refusal.description)
            return
        }
        reply.moments = [Self.info(taken.moment)]
        reply.takes = [try await catalog.info(taken.take, detailed: false)]
        reply.stills = [StillHandler.info(taken.still, collecting: true)]
        reply.status = StillHandler.status(of: taken.still)
    }

    func listMoments(into reply: inout Capfleet_V1_OperatorReply) async throws {
        reply.moments = try await store.moments().map(Self.info)
        reply.status = .ok
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
            $0.cause = moment.cause
        }
    }

}
