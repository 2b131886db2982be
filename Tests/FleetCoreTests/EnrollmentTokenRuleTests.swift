import FleetCore
import Testing

/// What an admin may ask of a token, and how a token names the nodes it admits.
@Suite struct EnrollmentTokenRuleTests {
    func problem(name: String = "", prefix: String = "", uses: Int = 1) -> EnrollmentTokenSpecProblem? {
        do {
            _ = try EnrollmentTokenSpec(name: name, namePrefix: prefix, uses: uses)
            return nil
        } catch {
            return error
        }
    }

    @Test func spec_oneNameIsForOneAgent_aPrefixForMany() throws {
        #expect(try EnrollmentTokenSpec(name: "booth", namePrefix: "", uses: 0) == EnrollmentTokenSpec(name: "booth", namePrefix: "", uses: 1))
        #expect(try EnrollmentTokenSpec(name: "", namePrefix: "cam-", uses: 50).naming == .prefix("cam-"))
        #expect(problem(name: "booth", uses: 50) == .oneNameForMany(uses: 50))
        #expect(problem(uses: 50) == .noPrefix(uses: 50))
        #expect(problem() == .noName)
        #expect(problem(name: "a", prefix: "b") == .nameAndPrefix)
        #expect(problem(prefix: "cam-", uses: 10_001) == .usesOutOfRange(10_001))
        #expect(problem(prefix: "cam/", uses: 2) == .invalidPrefix("cam/"))
        #expect(problem(prefix: String(repeating: "p", count: 57), uses: 2) != nil, "room is left for the number")
        #expect(problem(uses: 50)?.description.contains("--name-prefix") == true, "the error says what to write instead")
    }

    func decide(
        _ token: EnrollmentTokenFacts, asking: String = "", taken: [String: String] = [:], earlier: EarlierEnrollment? = nil,
        now: Int64 = 10
    ) -> EnrollmentTokenRule.Decision {
        EnrollmentTokenRule.decide(
            token: token, nodeID: "me", nodeKey: "key", requestedName: asking, earlierUse: earlier,
            nodeHasLiveKey: false, keyIsKnown: false, takenNames: taken, now: now)
    }

    @Test func prefixToken_numbersFromTheNextFreeName_orTakesTheAgentsOwn() {
        let token = EnrollmentTokenFacts(naming: .prefix("cam-"), uses: 3, used: 1, expiresAt: 100, nextNumber: 2)
        #expect(
            decide(token, taken: ["cam-2": "other", "cam-3": "me"]) == .admit(name: "cam-3", use: 2, nextNumber: 4),
            "a name this node had is no other node's")
        #expect(decide(token, asking: "stage-left") == .admit(name: "stage-left", use: 2, nextNumber: 2))
        #expect(decide(token, asking: "stage-left", taken: ["stage-left": "other"]) == .refuse(.nameTaken(name: "stage-left", nodeID: "other")))
    }

    @Test func refusals_revokedBeforeSpentBeforeExpired_andARepeatBeforeAll() {
        var token = EnrollmentTokenFacts(
            naming: .fixed("booth"), uses: 1, used: 1, lastUseAt: 5, lastUseNodeID: "me", expiresAt: 8,
            revokedAt: 7, revokedBy: "ana")
        let mine = EarlierEnrollment(nodeKey: "key", name: "booth", at: 5, keyIsLive: true)
        #expect(decide(token, earlier: mine) == .again(name: "booth"))
        #expect(decide(token) == .refuse(.revoked(at: 7, by: "ana")))
        token.revokedAt = nil
        #expect(decide(token) == .refuse(.alreadyUsed(uses: 1, lastAt: 5, lastNodeID: "me")))
        token.used = 0
        #expect(decide(token) == .refuse(.expired(at: 8)))
        #expect(token.state(at: 10) == .expired && token.remaining == 1)
    }
}
