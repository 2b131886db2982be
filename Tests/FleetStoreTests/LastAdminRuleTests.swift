import FleetCore
import FleetStore
import Foundation
import Testing

/// The last-admin rule, applied in the transaction that removes.
@Suite struct LastAdminRuleTests {
    func store(admins: [String]) async throws -> FleetDatabase {
        let store = try FleetDatabase.inMemory()
        for (index, name) in admins.enumerated() {
            let key = String(repeating: "\(index)", count: 40)
            try await store.saveOperator(
                OperatorRecord(name: name, publicKey: key, role: OperatorRole.admin.rawValue, addedAt: 1, addedBy: "test"),
                audit: AuditEntry(at: 1, actor: "test", action: "operator.add", target: name, outcome: "ok"))
        }
        return store
    }

    func remove(_ name: String, by who: String, from store: FleetDatabase) async -> String {
        do {
            return try await store.removeOperator(name, audit: AuditEntry(at: 2, actor: who, action: "operator.remove", target: name, outcome: "ok"))
                ? "removed" : "not found"
        } catch {
            return "\(error)"
        }
    }

    @Test func twoAdminsRemovingEachOtherAtOnce_oneRemains() async throws {
        let store = try await store(admins: ["ana", "bo"])
        async let first = remove("ana", by: "bo", from: store)
        async let second = remove("bo", by: "ana", from: store)
        let outcomes = await [first, second]
        #expect(outcomes.filter { $0 == "removed" }.count == 1)
        #expect(outcomes.contains { $0.hasSuffix("is the last admin; add another admin first, or nobody could manage the fleet") })
        #expect(try await store.operators().count == 1)
        // Only the removal that happened is audited.
        #expect(try await store.auditLog(actionPrefix: "operator.remove").count == 1)
    }

    @Test func theLastAdmin_reAddedWithALesserRole_isRefused_andStaysAdmin() async throws {
        let store = try await store(admins: ["ana"])
        await #expect(throws: StoreError.self) {
            try await store.saveOperator(
                OperatorRecord(
                    name: "ana", publicKey: String(repeating: "0", count: 40), role: OperatorRole.viewer.rawValue,
                    addedAt: 3, addedBy: "ana"),
                audit: AuditEntry(at: 3, actor: "ana", action: "operator.add", target: "ana", outcome: "ok"))
        }
        #expect(try await store.operators().map(\.role) == [OperatorRole.admin.rawValue])
    }

    @Test func anUnknownOperator_isNotFound_notRefused() async throws {
        let store = try await store(admins: ["ana"])
        #expect(await remove("nobody", by: "ana", from: store) == "not found")
    }
}
