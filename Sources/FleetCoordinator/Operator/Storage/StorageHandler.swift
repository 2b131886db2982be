import FleetCore
import FleetProtocol
import FleetStorage
import FleetStore
import Foundation

/// `change_storage` and `list_storage` (recordings.md, "Offload"): a destination is checked as
/// rclone would need it, its secrets kept apart from the database (StorageSecrets), and the
/// change audited without them.
struct StorageHandler: Sendable {
    let store: FleetDatabase
    let secrets: StorageSecrets
    let clock: CoordinatorClock

    func change(_ query: Capfleet_V1_ChangeStorage, by who: String, into reply: inout Capfleet_V1_OperatorReply) async throws {
        let holder = OperatorCaller.holder(who)
        let now = clock.unixMilliseconds()
        let wire = query.destination
        if query.remove {
            let removed = try await store.removeStorageDestination(
                named: wire.name, audit: AuditEntry(at: now, actor: holder, action: "storage.remove", target: wire.name, outcome: "ok"))
            guard removed else {
                reply.status = .failure(.notFound, "no storage destination \(wire.name); see capfleet storage list")
                return
            }
            do {
                try secrets.remove(wire.name)
            } catch {
                reply.status = .failure(.internal, "storage destination \(wire.name) is removed, but \(error)")
                return
            }
            reply.status = .ok
            return
        }
        guard wire.offloadDailyAt.isEmpty || DailyOffloadSchedule.minuteOfDay(wire.offloadDailyAt) != nil else {
            reply.status = .failure(
                .badRequest,
                "offload daily at \(wire.offloadDailyAt) is not a time of day: give HH:MM, 00:00 to 23:59, in the coordinator's local time")
            return
        }
        let destination: StorageDestination
        do {
            destination = try StorageDestination(
                name: wire.name, backend: wire.backend, options: wire.options, secrets: wire.secrets, root: wire.root)
        } catch {
            reply.status = .failure(.badRequest, error.description)
            return
        }
        // The secrets first: a destination listed without the secrets it names would fail
        // every offload; secrets without their row are replaced by the next add.
        do {
            try secrets.save(destination.secrets, for: destination.name)
        } catch {
            reply.status = .failure(.internal, error.description)
            return
        }
        let record = StorageDestinationRecord(
            name: destination.name, backend: destination.backend, options: destination.options, secretKeys: Array(destination.secrets.keys),
            root: destination.layout.root, offloadWhenStopped: wire.offloadWhenStopped, offloadDailyAt: wire.offloadDailyAt, createdAt: now,
            createdBy: holder)
        let settings = destination.options.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ", ")
        try await store.saveStorageDestination(
            record,
            audit: AuditEntry(
                at: now, actor: holder, action: "storage.add", target: destination.name, outcome: "ok",
                detail: "\(destination.backend)\(settings.isEmpty ? "" : " (\(settings))")"
                    + (destination.secrets.isEmpty ? "" : "; secrets \(destination.secrets.keys.sorted().joined(separator: ", ")) kept apart")
                    + "; takes under \(destination.layout.root.isEmpty ? "its top" : destination.layout.root)"
                    + (wire.offloadWhenStopped ? "; every take offloaded once stored" : "")
                    + (wire.offloadDailyAt.isEmpty ? "" : "; every take not yet there offloaded daily at \(wire.offloadDailyAt)")))
        reply.storage = [try info(record)]
        reply.status = .ok
    }

    func list(into reply: inout Capfleet_V1_OperatorReply) async throws {
        reply.storage = try await store.storageDestinations().map(info)
        reply.status = .ok
    }

    private func info(_ record: StorageDestinationRecord) throws -> Capfleet_V1_StorageInfo {
        let kept = try secrets.load(record.name)
        return .with {
            $0.destination = .with {
                $0.name = record.name
                $0.backend = record.backend
                $0.options = record.options
                $0.root = record.root
                $0.offloadWhenStopped = record.offloadWhenStopped
                $0.offloadDailyAt = record.offloadDailyAt
            }
            $0.secretKeys = record.secretKeyList
            $0.createdBy = record.createdBy
            $0.createdUnixMs = record.createdAt
            $0.secretsMissing = record.secretKeyList.filter { kept[$0] == nil }
        }
    }
}
