import FleetCore
import FleetStore
import Foundation
import Testing

/// Moment rules in a real SQLite file: kept as given, counted as they fire, removed.
@Suite final class MomentRuleStoreTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("capfleet-rules-\(UUID().uuidString.prefix(8))").path

    init() throws { try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true) }

    deinit { try? FileManager.default.removeItem(atPath: directory) }

    private func audit(_ target: String) -> AuditEntry {
        AuditEntry(at: 1_000, actor: "ana", action: "moment.rule", target: target, outcome: "ok")
    }

    @Test func everyCondition_comesBackAsGiven() async throws {
        let store = try FleetDatabase(path: directory + "/fleet.sqlite")
        let rules = [
            MomentRule(name: "line-a", sourceDeviceID: "cam-1", condition: .code(symbology: .qr, value: "part-17"), beforeMs: 500, afterMs: 2_000),
            MomentRule(name: "any-code", sourceDeviceID: "cam-1", condition: .code(symbology: nil, value: nil), cameras: ["cam-1", "cam-2"]),
            MomentRule(name: "visitor", sourceDeviceID: "cam-2", condition: .face, allCameras: true, rearmMs: 10_000, jpeg: true),
            MomentRule(name: "gpio", sourceDeviceID: "sen-1-lines", condition: .above(channel: "line0", level: 0.5), cameras: ["cam-1"]),
            MomentRule(name: "dark", sourceDeviceID: "sen-1-light", condition: .below(channel: "lux", level: -2.25), cameras: ["cam-2"]),
            MomentRule(name: "cue", sourceDeviceID: "sen-1-cues", condition: .text("go \"now\""), allCameras: true),
        ]
        for rule in rules { try await store.saveMomentRule(MomentRuleRecord(rule, createdAt: 1_000, createdBy: "ana"), audit: audit(rule.name)) }
        let stored = try await store.momentRules()
        #expect(stored.map(\.name) == rules.map(\.name).sorted())
        #expect(Set(stored.compactMap(\.rule)) == Set(rules))
    }

    @Test func aRulesFigures_countWhatItDid_andReplacingItStartsThemOver() async throws {
        let store = try FleetDatabase(path: directory + "/fleet.sqlite")
        let rule = MomentRule(name: "line-a", sourceDeviceID: "cam-1", condition: .code(symbology: .qr, value: nil))
        try await store.saveMomentRule(MomentRuleRecord(rule, createdAt: 1_000, createdBy: "ana"), audit: audit("line-a"))
        let moment = MomentRecord(
            id: "moment-1", name: "line-a: qr \"p\" on cam-1", instantFleetNs: 5, beforeMs: 1_500, afterMs: 1_500, takeId: "take-1",
            stillId: "still-1", devices: ["cam-1"], createdAt: 2_000, createdBy: "rule line-a", trigger: "rule line-a", cause: "qr \"p\" on cam-1")
        try await store.saveMoment(
            moment, audit: AuditEntry(at: 2_000, actor: "rule line-a", action: "moment.take", target: "moment-1", outcome: "ok"), rule: "line-a")
        try await store.recordMomentRuleOutcome("line-a", .missed("qr \"q\" while taking"))
        try await store.recordMomentRuleOutcome("line-a", .refused("cam-1 keeps no pre-roll"))
        let counted = try #require(try await store.momentRules().first)
        #expect(
            counted.fired == 1 && counted.missed == 1 && counted.refused == 1 && counted.lastMomentId == "moment-1" && counted.lastFiredAt == 2_000)
        #expect(counted.lastProblem == "cam-1 keeps no pre-roll")
        #expect(try await store.moment("moment-1")?.cause == "qr \"p\" on cam-1")

        try await store.saveMomentRule(MomentRuleRecord(rule, createdAt: 3_000, createdBy: "bo"), audit: audit("line-a"))
        let replaced = try #require(try await store.momentRules().first)
        #expect(replaced.fired == 0 && replaced.createdBy == "bo")
        #expect(try await store.removeMomentRule(named: "line-a", audit: audit("line-a")))
        #expect(try await store.removeMomentRule(named: "line-a", audit: audit("line-a")) == false)
        // A rule removed while its moment was taken: the outcome changes nothing.
        try await store.recordMomentRuleOutcome("line-a", .missed("late"))
        #expect(try await store.momentRules().isEmpty)
        #expect(try await store.moment("moment-1") != nil, "its moments stay")
    }
}
