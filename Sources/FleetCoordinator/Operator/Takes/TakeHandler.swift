import FleetCore
import FleetProtocol
import FleetStore
import Foundation

/// Takes: started, stopped and noted through the director; listed, shown and collected from
/// the index. The director decides; this answers the operator.
struct TakeHandler: Sendable {
    let store: FleetDatabase
    let takes: TakeDirector
    /// Takes as the replies show them.
    let catalog: TakeCatalog
    /// Copies of agent-held segments to the coordinator.
    let collections: TakeCollections
    /// Copies to storage destinations, from the hosts that hold the files.
    let offloads: TakeOffloads
    let clock: CoordinatorClock

    func startRecording(_ query: Capfleet_V1_StartRecording, by caller: String, into reply: inout Capfleet_V1_OperatorReply) async throws {
        do {
            let store: TakeBook.Store? =
                switch query.store {
                case .agent: .agent
                case .coordinator: .coordinator
                default: nil
                }
            let take = try await takes.start(
                deviceIDs: query.deviceIds, name: query.name,
                at: query.atFleetTimeNs == 0 ? nil : query.atFleetTimeNs, fromNow: query.fromNowNs, store: store,
                encoding: TakeEncoding(wire: query.encoding),
                deviceEncodings: query.deviceEncodings.compactMapValues(TakeEncoding.init(wire:)),
                requirements: TakeRequirements(wire: query.requirements), preRollMs: Int(query.preRollMs), by: caller)
            reply.takes = [try await catalog.info(take, detailed: false)]
            reply.status = .ok
        } catch let refusal as TakeRefusal {
            reply.status = .failure(refusal.code, refusal.message)
        }
    }

    func stopRecording(_ query: Capfleet_V1_StopRecording, by caller: String, into reply: inout Capfleet_V1_OperatorReply) async throws {
        do {
            let at: UInt64? = query.atFleetTimeNs != 0 ? query.atFleetTimeNs : (query.fromNowNs != 0 ? clock.fleetNow() + query.fromNowNs : nil)
            let wait = Duration.milliseconds(Int64(query.waitMs == 0 ? 10_000 : min(query.waitMs, 600_000)))
            let take = try await takes.stop(takeID: query.takeID, at: at, wait: wait, by: caller)
            reply.takes = [try await catalog.info(take, detailed: false)]
            reply.status = .ok
        } catch let refusal as TakeRefusal {
            reply.status = .failure(refusal.code, refusal.message)
        } catch let already as TakeAlreadyStopped {
            // Not a failure (the take is stopped, as asked), but not this request's doing: an
            // OK with a reason, which `capfleet record stop` shows and exits 4 on.
            reply.takes = [try await catalog.info(already.take, detailed: false)]
            reply.status = .ok
            reply.status.reason = already.message
        }
    }

    func listRecordings(into reply: inout Capfleet_V1_OperatorReply) async throws {
        var infos: [Capfleet_V1_TakeInfo] = []
        for take in try await store.takes() { infos.append(try await catalog.info(take, detailed: false)) }
        reply.takes = infos
        reply.status = .ok
    }

    func showRecording(_ takeID: String, into reply: inout Capfleet_V1_OperatorReply) async throws {
        guard let take = try await store.take(id: takeID) else {
            reply.status = .failure(.notFound, "no take \(takeID); see capfleet recordings list")
            return
        }
        reply.takes = [try await catalog.info(take, detailed: true)]
        reply.status = .ok
    }

    /// Starts copying a take's agent-held segments to the coordinator; answers at once.
    func collectRecording(_ takeID: String, by caller: String, into reply: inout Capfleet_V1_OperatorReply) async throws {
        guard let take = try await store.take(id: takeID) else {
            reply.status = .failure(.notFound, "no take \(takeID); see capfleet recordings list")
            return
        }
        guard take.store == .agent else {
            reply.status = .failure(.badRequest, "take \(takeID) was recorded on the coordinator: its segments are here already")
            return
        }
        let left = try await collections.collect(take, by: caller)
        reply.takes = [try await catalog.info(take, detailed: true)]
        reply.status = .ok
        reply.status.reason = left == 0 ? "every segment of take \(takeID) is on the coordinator" : "collecting \(left) segments"
    }

    /// Starts copying a take's segments to a storage destination; answers at once.
    func offloadRecording(_ query: Capfleet_V1_OffloadRecording, by caller: String, into reply: inout Capfleet_V1_OperatorReply) async throws {
        guard let take = try await store.take(id: query.takeID) else {
            reply.status = .failure(.notFound, "no take \(query.takeID); see capfleet recordings list")
            return
        }
        let left: Int
        do {
            left = try await offloads.offload(take, to: query.destination, by: caller)
        } catch let refusal as OffloadRefusal {
            reply.status = .failure(refusal.code, refusal.message)
            return
        }
        reply.takes = [try await catalog.info(take, detailed: true)]
        reply.status = .ok
        reply.status.reason =
            left == 0
            ? "every segment of take \(take.id) is proved on \(query.destination)"
            : "offloading \(left) segments to \(query.destination)"
    }

    /// Client-supplied timed metadata: into the index and the files.
    func noteRecording(_ query: Capfleet_V1_NoteRecording, by caller: String, into reply: inout Capfleet_V1_OperatorReply) async throws {
        // Anything but one JSON object is the client's mistake, answered as such.
        guard var fields = (try? JSONSerialization.jsonObject(with: Data(query.json.utf8))) as? [String: Any] else {
            reply.status = .failure(.badRequest, "the note must be one JSON object, e.g. {\"location\":\"stage 2\"}")
            return
        }
        if fields["kind"] == nil { fields["kind"] = "note" }
        fields["by"] = caller
        do {
            let noted = try await takes.note(
                takeID: query.takeID, deviceID: query.deviceID.isEmpty ? nil : query.deviceID, fields: fields,
                at: query.atFleetTimeNs == 0 ? nil : query.atFleetTimeNs)
            reply.status = .ok
            reply.takes = [try await catalog.info(noted, detailed: false)]
        } catch let refusal as TakeRefusal {
            reply.status = .failure(refusal.code, refusal.message)
        }
    }
}
