import FleetCore
import Testing

@Suite struct OperatorRosterTests {
    @Test func theLastAdmin_cannotBeRemoved() {
        let roster: [(name: String, role: OperatorRole?)] = [("root", .admin), ("ana", .operator)]
        #expect(OperatorRoster.refusal(removing: "root", from: roster)?.description.hasPrefix("root is the last admin") == true)
        #expect(OperatorRoster.refusal(removing: "ana", from: roster) == nil)
    }

    @Test func anAdmin_canBeRemovedWhileAnotherRemains() {
        let roster: [(name: String, role: OperatorRole?)] = [("root", .admin), ("ana", .admin)]
        #expect(OperatorRoster.refusal(removing: "root", from: roster) == nil)
        // After that removal, ana is the last one.
        #expect(OperatorRoster.refusal(removing: "ana", from: [("ana", .admin)]) != nil)
    }

    @Test func anUnknownName_isNotARefusal_butTheStoresNotFound() {
        #expect(OperatorRoster.refusal(removing: "nobody", from: [("root", .admin)]) == nil)
    }
}

@Suite struct OperatorRosterRoleTests {
    @Test func theLastAdmin_cannotBeGivenALesserRole_butAnotherCan() {
        let roster: [(name: String, role: OperatorRole?)] = [("root", .admin), ("ana", .operator)]
        #expect(OperatorRoster.refusal(giving: .viewer, to: "root", in: roster) != nil)
        #expect(OperatorRoster.refusal(giving: .admin, to: "root", in: roster) == nil)
        #expect(OperatorRoster.refusal(giving: .viewer, to: "ana", in: roster) == nil)
        #expect(OperatorRoster.refusal(giving: .viewer, to: "newcomer", in: []) == nil)
    }
}
