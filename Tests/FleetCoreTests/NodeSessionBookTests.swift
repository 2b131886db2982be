import FleetCore
import Testing

/// The coordinator's node sessions: every command is answered exactly once, by the node or,
/// when the node can no longer answer, by the coordinator saying why.
@Suite struct NodeSessionBookTests {
    static let second: UInt64 = 1_000_000_000
    /// Heartbeats every second, a node gone after three missed.
    static func book() -> NodeSessionBook { NodeSessionBook(heartbeatIntervalNanoseconds: second, liveness: 3) }

    static func sent(_ dispatch: NodeSessionBook.Dispatch) -> (id: UInt64, routing: [UInt8])? {
        guard case let .send(id, routing) = dispatch else { return nil }
        return (id, routing)
    }

    @Test func registering_bringsTheNodeOnline_andCommandsGoWhereItLastSpoke() throws {
        var book = Self.book()
        #expect(book.registered(nodeID: "n1", agentInstance: "a", routingID: [1], now: 0) == [.cameOnline(nodeID: "n1")])
        #expect(book.heard(from: "n1", routingID: [2], now: Self.second) == [])
        let command = try #require(Self.sent(book.dispatch(to: "n1", deviceID: "cam", timeoutNanoseconds: 3 * Self.second, now: Self.second)))
        #expect(command.routing == [2])
        #expect(book.session("n1")?.recentRoutingIDs == [[1], [2]])
    }

    @Test func aCommandToAnOfflineOrUnknownNode_isNotSent() {
        var book = Self.book()
        #expect(book.dispatch(to: "n1", deviceID: "cam", timeoutNanoseconds: Self.second, now: 0) == .nodeOffline)
        _ = book.registered(nodeID: "n1", agentInstance: "a", routingID: [1], now: 0)
        _ = book.tick(now: 4 * Self.second)
        #expect(!book.isOnline("n1"))
        #expect(book.dispatch(to: "n1", deviceID: "cam", timeoutNanoseconds: Self.second, now: 4 * Self.second) == .nodeOffline)
    }

    @Test func theNodesAnswer_isDeliveredOnce_andAnAnswerAfterTheDeadlineIsLate() throws {
        var book = Self.book()
        _ = book.registered(nodeID: "n1", agentInstance: "a", routingID: [1], now: 0)
        let first = try #require(Self.sent(book.dispatch(to: "n1", deviceID: "cam", timeoutNanoseconds: 2 * Self.second, now: 0)))
        guard case let .deliver(command) = book.replied(commandID: first.id, from: "n1") else {
            Issue.record("the node's answer is delivered")
            return
        }
        #expect(command.deviceID == "cam")
        #expect(book.replied(commandID: first.id, from: "n1") == .late)

        let second = try #require(Self.sent(book.dispatch(to: "n1", deviceID: "cam", timeoutNanoseconds: 2 * Self.second, now: 0)))
        _ = book.heard(from: "n1", routingID: [1], now: Self.second)
        #expect(book.tick(now: Self.second).isEmpty, "not yet due")
        let actions = book.tick(now: 2 * Self.second)
        #expect(actions.count == 1)
        guard case let .answerUnavailable(expired, .timedOut(timeout))? = actions.first else {
            Issue.record("the coordinator answers at the deadline: \(actions)")
            return
        }
        #expect(expired.commandID == second.id && timeout == 2 * Self.second)
        #expect(book.replied(commandID: second.id, from: "n1") == .late)
    }

    @Test func anotherNodesAnswer_isRefused_andTheCommandWaitsForItsOwn() throws {
        var book = Self.book()
        _ = book.registered(nodeID: "n1", agentInstance: "a", routingID: [1], now: 0)
        _ = book.registered(nodeID: "n2", agentInstance: "b", routingID: [2], now: 0)
        let command = try #require(Self.sent(book.dispatch(to: "n1", deviceID: "cam", timeoutNanoseconds: Self.second, now: 0)))
        guard case .wrongNode = book.replied(commandID: command.id, from: "n2") else {
            Issue.record("n2 may not answer n1's command")
            return
        }
        guard case .deliver = book.replied(commandID: command.id, from: "n1") else {
            Issue.record("n1's answer still arrives")
            return
        }
    }

    @Test func aNodeWhoseAgentRestartsWhileACommandIsInFlight_hasTheCommandAnsweredAtOnce() throws {
        var book = Self.book()
        _ = book.registered(nodeID: "n1", agentInstance: "first", routingID: [1], now: 0)
        let command = try #require(Self.sent(book.dispatch(to: "n1", deviceID: "cam", timeoutNanoseconds: 3 * Self.second, now: 0)))
        let actions = book.registered(nodeID: "n1", agentInstance: "second", routingID: [9], now: Self.second / 2)
        #expect(actions.count == 1, "still online: no second cameOnline")
        guard case let .answerUnavailable(answered, .agentRestarted)? = actions.first else {
            Issue.record("a restarted agent lost the command: \(actions)")
            return
        }
        #expect(answered.commandID == command.id)
        // The new process never saw it; an answer with its id is nobody's now.
        #expect(book.replied(commandID: command.id, from: "n1") == .late)
        #expect(book.tick(now: 3 * Self.second).isEmpty, "answered once, not again at the deadline")
        let next = try #require(Self.sent(book.dispatch(to: "n1", deviceID: "cam", timeoutNanoseconds: Self.second, now: Self.second)))
        #expect(next.routing == [9], "new commands go to the new connection")
    }

    @Test func aNodeThatOnlyReconnectsWhileACommandIsInFlight_stillAnswersItOnTheNewConnection() throws {
        var book = Self.book()
        _ = book.registered(nodeID: "n1", agentInstance: "same", routingID: [1], now: 0)
        let command = try #require(Self.sent(book.dispatch(to: "n1", deviceID: "cam", timeoutNanoseconds: 3 * Self.second, now: 0)))
        #expect(book.registered(nodeID: "n1", agentInstance: "same", routingID: [2], now: Self.second) == [])
        #expect(book.commandsInFlight.map(\.commandID) == [command.id])
        guard case .deliver = book.replied(commandID: command.id, from: "n1") else {
            Issue.record("the same agent process answers on its new connection")
            return
        }
    }

    @Test func anAgentThatCannotNameItsProcess_isTakenForANewOne() throws {
        var book = Self.book()
        _ = book.registered(nodeID: "n1", agentInstance: "", routingID: [1], now: 0)
        _ = try #require(Self.sent(book.dispatch(to: "n1", deviceID: "cam", timeoutNanoseconds: 3 * Self.second, now: 0)))
        let actions = book.registered(nodeID: "n1", agentInstance: "", routingID: [1], now: Self.second)
        #expect(actions.count == 1)
        guard case .answerUnavailable(_, .agentRestarted)? = actions.first else {
            Issue.record("without an instance a re-registration may be a restart: \(actions)")
            return
        }
    }

    @Test func aNodeGoingSilent_goesOffline_andItsCommandsAreAnsweredThen() throws {
        var book = Self.book()
        _ = book.registered(nodeID: "n1", agentInstance: "a", routingID: [1], now: 0)
        _ = book.registered(nodeID: "n2", agentInstance: "b", routingID: [2], now: 0)
        let lost = try #require(Self.sent(book.dispatch(to: "n1", deviceID: "cam", timeoutNanoseconds: 60 * Self.second, now: 0)))
        let kept = try #require(Self.sent(book.dispatch(to: "n2", deviceID: "cam2", timeoutNanoseconds: 60 * Self.second, now: 0)))
        _ = book.heard(from: "n2", routingID: [2], now: 3 * Self.second)
        let actions = book.tick(now: 3 * Self.second + 1)
        #expect(actions.count == 2)
        #expect(actions.first == .wentOffline(nodeID: "n1"))
        guard case let .answerUnavailable(answered, .wentOffline)? = actions.last else {
            Issue.record("n1's command is answered when n1 goes offline: \(actions)")
            return
        }
        #expect(answered.commandID == lost.id)
        #expect(book.commandsInFlight.map(\.commandID) == [kept.id])
    }

    @Test func trafficWaitingBehindASlowMessage_keepsTheNodeOnline() {
        var book = Self.book()
        _ = book.registered(nodeID: "n1", agentInstance: "a", routingID: [1], now: 0)
        book.arrived(from: "n1", at: 2 * Self.second)
        #expect(book.tick(now: 4 * Self.second).isEmpty)
        #expect(book.isOnline("n1"))
    }

    @Test func forgettingANode_endsItsSession_andAnswersItsCommands() throws {
        var book = Self.book()
        _ = book.registered(nodeID: "n1", agentInstance: "a", routingID: [1], now: 0)
        let command = try #require(Self.sent(book.dispatch(to: "n1", deviceID: "cam", timeoutNanoseconds: Self.second, now: 0)))
        let actions = book.forget("n1")
        #expect(actions.first == .wentOffline(nodeID: "n1"))
        guard case let .answerUnavailable(answered, .forgotten)? = actions.last else {
            Issue.record("a revoked node's command is answered: \(actions)")
            return
        }
        #expect(answered.commandID == command.id)
        #expect(book.session("n1") == nil)
        #expect(book.heard(from: "n1", routingID: [1], now: 1) == nil, "a forgotten node must register again")
    }

    @Test func theAnswersSayTheCommandMayOrMayNotHaveBeenApplied() {
        for reason in [NodeSessionBook.Unanswerable.timedOut(timeoutNanoseconds: 3 * Self.second), .agentRestarted, .wentOffline, .forgotten] {
            let message = reason.message(nodeID: "n1")
            #expect(message.contains("node n1") && message.contains("may or may not have been applied"), "\(message)")
        }
        #expect(NodeSessionBook.Unanswerable.timedOut(timeoutNanoseconds: 3 * Self.second).message(nodeID: "n1").contains("within 3.0 s"))
    }

    static func ticket(_ verdict: NodeSessionBook.HelloVerdict) -> NodeSessionBook.RegistrationTicket? {
        guard case let .register(ticket) = verdict else { return nil }
        return ticket
    }

    @Test func removingANode_waitsForNoRegistration_andKeepsItFromRegisteringMeanwhile() throws {
        var book = Self.book()
        _ = book.registered(nodeID: "n1", agentInstance: "a", routingID: [1], now: 0)
        let whileOnline = book.beginRemoval(of: "n1")
        #expect(!whileOnline, "an online node is not removed")
        _ = book.tick(now: 4 * Self.second)
        let registering = try #require(
            Self.ticket(book.hello(nodeID: "n1", agentInstance: "a", helloFingerprint: 7, routingID: [1], now: 4 * Self.second)))
        let whileRegistering = book.beginRemoval(of: "n1")
        #expect(!whileRegistering, "nor one whose HELLO is being stored")
        _ = book.endRegistration(registering)
        let offline = book.beginRemoval(of: "n1")
        let registerWhileRemoving = book.hello(nodeID: "n1", agentInstance: "a", helloFingerprint: 7, routingID: [1], now: 4 * Self.second)
        #expect(offline && registerWhileRemoving == .refuseWhileRemoving, "a node being removed cannot register")
        let failedRemoval = book.endRemoval(of: "n1", removed: false)
        let registerAfterFailure = try #require(
            Self.ticket(book.hello(nodeID: "n1", agentInstance: "a", helloFingerprint: 7, routingID: [1], now: 4 * Self.second)),
            "a removal that failed leaves the node as it was")
        #expect(failedRemoval.isEmpty)
        _ = book.endRegistration(registerAfterFailure)
        let again = book.beginRemoval(of: "n1")
        _ = book.endRemoval(of: "n1", removed: true)
        #expect(again && book.session("n1") == nil)
    }

    /// A WELCOME that takes a second crosses the agent's retries: the repeats wait for it and
    /// get the same answer instead of registering the node three times.
    @Test func repeatsOfAHelloUnderRegistration_waitForItsAnswer() throws {
        var book = Self.book()
        let first = try #require(Self.ticket(book.hello(nodeID: "n1", agentInstance: "a", helloFingerprint: 7, routingID: [1], now: 0)))
        #expect(book.hello(nodeID: "n1", agentInstance: "a", helloFingerprint: 7, routingID: [1], now: Self.second / 4) == .awaitRegistration)
        #expect(book.hello(nodeID: "n1", agentInstance: "a", helloFingerprint: 7, routingID: [2], now: Self.second / 2) == .awaitRegistration)
        _ = book.registered(nodeID: "n1", agentInstance: "a", helloFingerprint: 7, routingID: [1], now: Self.second)
        #expect(book.endRegistration(first) == [[1], [2]])
        // Another process, or the same one with other devices, is a registration of its own.
        #expect(Self.ticket(book.hello(nodeID: "n1", agentInstance: "b", helloFingerprint: 7, routingID: [3], now: Self.second)) != nil)
    }

    @Test func theSameHelloOfARegisteredOnlineNode_isWelcomedAgainOnItsNewConnection() throws {
        var book = Self.book()
        let ticket = try #require(Self.ticket(book.hello(nodeID: "n1", agentInstance: "a", helloFingerprint: 7, routingID: [1], now: 0)))
        _ = book.registered(nodeID: "n1", agentInstance: "a", helloFingerprint: 7, routingID: [1], now: 0)
        _ = book.endRegistration(ticket)
        #expect(book.hello(nodeID: "n1", agentInstance: "a", helloFingerprint: 7, routingID: [5], now: Self.second) == .welcomeAgain)
        let sent = try #require(Self.sent(book.dispatch(to: "n1", deviceID: "cam", timeoutNanoseconds: Self.second, now: Self.second)))
        #expect(sent.routing == [5], "commands go to the connection the HELLO came on")
        // Changed devices register anew; so does a node the coordinator took for offline.
        #expect(Self.ticket(book.hello(nodeID: "n1", agentInstance: "a", helloFingerprint: 8, routingID: [5], now: Self.second)) != nil)
        _ = book.tick(now: 10 * Self.second)
        #expect(Self.ticket(book.hello(nodeID: "n1", agentInstance: "a", helloFingerprint: 7, routingID: [5], now: 10 * Self.second)) != nil)
    }

    @Test func agentsThatCannotNameTheirProcess_registerEveryTime() {
        var book = Self.book()
        _ = book.hello(nodeID: "n1", agentInstance: "", helloFingerprint: 7, routingID: [1], now: 0)
        #expect(Self.ticket(book.hello(nodeID: "n1", agentInstance: "", helloFingerprint: 7, routingID: [1], now: 0)) != nil)
    }

    @Test func aBurstFromAnUnknownNode_drawsOneReregisterPerHeartbeatInterval() {
        var book = Self.book()
        let asked = [
            book.shouldAskToRegister("n1", now: 0), book.shouldAskToRegister("n1", now: Self.second / 10),
            book.shouldAskToRegister("n1", now: Self.second / 2), book.shouldAskToRegister("n2", now: Self.second / 2),
            book.shouldAskToRegister("n1", now: Self.second),
        ]
        #expect(asked == [true, false, false, true, true], "each node is asked on its own, once per interval")
    }
}
