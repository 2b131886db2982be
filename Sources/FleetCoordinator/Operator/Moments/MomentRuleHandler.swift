import FleetCore
import FleetProtocol
import FleetStore
import Foundation

/// `change_moment_rule` and `list_moment_rules` (recordings.md, "Moments by rule"): rules are
/// checked against the devices they name, stored with an audit entry, and put in force at once.
struct MomentRuleHandler: Sendable {
    let store: FleetDatabase
    let triggers: MomentTriggers
    let clock: CoordinatorClock

    func change(_ query: Capfleet_V1_ChangeMomentRule, by who: String, into reply: inout Capfleet_V1_OperatorReply) async throws {
        let holder = OperatorCaller.holder(who)
        let now = clock.unixMilliseconds()
        if query.remove {
            let name = query.rule.name
            let removed = try await store.removeMomentRule(
                named: name, audit: AuditEntry(at: now, actor: holder, action: "moment.rule", target: name, outcome: "ok", detail: "removed"))
            guard removed else {
                reply.status = .failure(.notFound, "no moment rule \(name); see capfleet moment-rule list")
                return
            }
            await triggers.rulesChanged(to: try await store.momentRules())
            reply.status = .ok
            return
        }
        let rule: MomentRule
        do {
            rule = try MomentRule(wire: query.rule)
        } catch {
            reply.status = .failure(.badRequest, "moment rule \(query.rule.name): \(error)")
            return
        }
        guard let source = try await store.existingDevice(rule.sourceDeviceID, into: &reply) else { return }
        let sourceKind = SourceKind(rawValue: source.kind)
        if sourceKind?.isMicrophone == true {
            reply.status = .failure(.badRequest, "\(source.id) is a microphone: rules watch cameras' detections and sensor streams' samples")
            return
        }
        if let problem = rule.refusal(sourceIsSensor: sourceKind == .sensor) {
            reply.status = .failure(.badRequest, "moment rule \(rule.name): \(problem)")
            return
        }
        for camera in rule.cameras {
            guard let device = try await store.existingDevice(camera, into: &reply) else { return }
            guard SourceKind(rawValue: device.kind)?.isCamera ?? true else {
                reply.status = .failure(.badRequest, "moment rule \(rule.name): \(device.id) is a \(device.kind) device: a moment takes cameras")
                return
            }
        }
        let record = MomentRuleRecord(rule, createdAt: now, createdBy: holder)
        try await store.saveMomentRule(
            record,
            audit: AuditEntry(
                at: now, actor: holder, action: "moment.rule", target: rule.name, outcome: "ok",
                detail:
                    "on \(rule.condition.spoken) from \(rule.sourceDeviceID): \(rule.allCameras ? "every camera" : rule.momentCameras.joined(separator: ", ")), \(rule.beforeMs) ms before to \(rule.afterMs) ms after, re-armed after \(rule.rearmMs) ms"
            ))
        let rules = try await store.momentRules()
        await triggers.rulesChanged(to: rules)
        reply.momentRules = await Self.infos(rules.filter { $0.name == rule.name }, triggers: triggers)
        reply.status = .ok
    }

    func list(into reply: inout Capfleet_V1_OperatorReply) async throws {
        reply.momentRules = await Self.infos(try await store.momentRules(), triggers: triggers)
        reply.status = .ok
    }

    static func infos(_ records: [MomentRuleRecord], triggers: MomentTriggers) async -> [Capfleet_V1_MomentRuleInfo] {
        let taking = await triggers.taking()
        return records.compactMap { record in
            guard let rule = record.rule else { return nil }
            return .with {
                $0.rule = rule.wire
                $0.createdBy = record.createdBy
                $0.createdUnixMs = record.createdAt
                $0.fired = UInt64(record.fired)
                $0.missed = UInt64(record.missed)
                $0.refused = UInt64(record.refused)
                $0.lastMomentID = record.lastMomentId
                $0.lastFiredUnixMs = record.lastFiredAt
                $0.lastProblem = record.lastProblem
                $0.taking = taking.contains(record.name)
            }
        }
    }
}
