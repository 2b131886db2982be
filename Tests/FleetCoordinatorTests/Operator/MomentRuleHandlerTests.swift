import FleetCore
import FleetProtocol
import Foundation
import Testing

@testable import FleetCoordinator
@testable import FleetStore

/// `change_moment_rule` and `list_moment_rules` on an in-memory fleet: rules are checked against
/// the devices they name, kept, audited, listed with their figures, and removed.
@Suite(.timeLimit(.minutes(1))) struct MomentRuleHandlerTests {
    private func change(_ bed: OperatorBed, _ rule: Capfleet_V1_MomentRule, remove: Bool = false) async throws -> Capfleet_V1_OperatorReply {
        var reply = Capfleet_V1_OperatorReply()
        try await bed.handlers.momentRules.change(
            .with {
                $0.rule = rule
                $0.remove = remove
            }, by: "otto", into: &reply)
        return reply
    }

    @Test func aRuleOnACamerasCodes_isKeptWithItsDefaults_listedAndRemoved() async throws {
        let bed = try await OperatorBed()
        let added = try await change(
            bed,
            .with {
                $0.name = "line-a"
                $0.sourceDeviceID = "cam-1"
                $0.on = .code
                $0.symbology = "QR-Code"
                $0.value = "part-17"
                $0.deviceIds = ["cam-1", "cam-2"]
            })
        #expect(added.status.code == .ok, "\(added.status)")
        let kept = try #require(added.momentRules.first)
        #expect(kept.rule.symbology == "qr" && kept.rule.beforeMs == 1_500 && kept.rule.afterMs == 1_500 && kept.rule.rearmMs == 1_000)
        #expect(kept.createdBy == "otto" && kept.fired == 0 && !kept.taking)
        #expect(try await bed.audit("moment.rule").map(\.outcome) == ["ok"])

        var listed = Capfleet_V1_OperatorReply()
        try await bed.handlers.momentRules.list(into: &listed)
        #expect(listed.momentRules.map(\.rule.name) == ["line-a"])

        let removed = try await change(bed, .with { $0.name = "line-a" }, remove: true)
        #expect(removed.status.code == .ok && removed.momentRules.isEmpty)
        let again = try await change(bed, .with { $0.name = "line-a" }, remove: true)
        #expect(again.status.code == .notFound && again.status.reason.contains("capfleet moment-rule list"))
        #expect(try await bed.store.momentRules().isEmpty)
        await bed.close()
    }

    @Test(arguments: [
        ("Line A", "cam-1", Capfleet_V1_MomentRule.On.face, [String](), Capfleet_V1_StatusCode.badRequest, "a-z, 0-9"),
        ("x", "cam-9", .face, [], .notFound, "no device cam-9"),
        ("x", "cam-1", .unspecified, [], .badRequest, "say what the rule waits for"),
        ("x", "cam-1", .text, [], .badRequest, "cam-1 is a camera"),
        ("x", "cam-1", .face, ["cam-7"], .notFound, "no device cam-7"),
    ])
    func aRuleThatCannotWork_isRefusedSayingWhy(
        name: String, source: String, on: Capfleet_V1_MomentRule.On, cameras: [String], code: Capfleet_V1_StatusCode, reason: String
    ) async throws {
        let bed = try await OperatorBed()
        let reply = try await change(
            bed,
            .with {
                $0.name = name
                $0.sourceDeviceID = source
                $0.on = on
                $0.text = "go"
                $0.deviceIds = cameras
            })
        #expect(reply.status.code == code && reply.status.reason.contains(reason), "\(reply.status)")
        #expect(try await bed.store.momentRules().isEmpty)
        await bed.close()
    }

    @Test func anUnknownSymbology_isRefusedNamingTheOnesAgentsDecode() async throws {
        let bed = try await OperatorBed()
        let reply = try await change(
            bed,
            .with {
                $0.name = "dm"
                $0.sourceDeviceID = "cam-1"
                $0.on = .code
                $0.symbology = "datamatrix"
            })
        #expect(reply.status.code == .badRequest && reply.status.reason.contains("choose from qr"), "\(reply.status)")
        await bed.close()
    }
}
