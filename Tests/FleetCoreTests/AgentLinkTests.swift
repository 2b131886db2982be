import FleetCore
import Testing

@Suite struct AgentLinkTests {
    let ms: UInt64 = 1_000_000
    let second: UInt64 = 1_000_000_000

    func registeredLink() -> AgentLink {
        var link = AgentLink(now: 0)
        _ = link.tick(now: 0)
        _ = link.received(.welcome(frameIngestPort: 7601, heartbeatIntervalNanoseconds: second, liveness: 3), now: 10 * ms)
        return link
    }

    @Test func agentLink_sendsHelloAtOnceThenBacksOff() {
        var link = AgentLink(now: 0)
        #expect(link.tick(now: 0) == [.sendHello])
        #expect(link.tick(now: 100 * ms).isEmpty)
        #expect(link.tick(now: 250 * ms) == [.sendHello])
        #expect(link.tick(now: 600 * ms).isEmpty)
        #expect(link.tick(now: 750 * ms) == [.sendHello])
    }

    @Test func agentLink_welcomeStartsStreamingAndStatus() {
        var link = AgentLink(now: 0)
        _ = link.tick(now: 0)
        let directives = link.received(.welcome(frameIngestPort: 9000, heartbeatIntervalNanoseconds: second, liveness: 3), now: 5 * ms)
        #expect(directives == [.registered(frameIngestPort: 9000)])
        #expect(link.phase == .registered)
        #expect(link.tick(now: 6 * ms) == [.sendStatus])
    }

    @Test func agentLink_heartbeatsOncePerInterval() {
        var link = registeredLink()
        _ = link.tick(now: 20 * ms)
        #expect(link.tick(now: 500 * ms).isEmpty)
        _ = link.received(.other, now: 900 * ms)
        #expect(link.tick(now: second + 10 * ms).contains(.sendHeartbeat(sequence: 1)))
        #expect(!link.tick(now: second + 500 * ms).contains(.sendHeartbeat(sequence: 2)))
        _ = link.received(.other, now: 1900 * ms)
        #expect(link.tick(now: 2 * second + 10 * ms).contains(.sendHeartbeat(sequence: 2)))
    }

    @Test func agentLink_aCoordinatorThatCountsStatusesAsHeartbeats_getsOneMessageASecond() {
        var link = AgentLink(now: 0)
        _ = link.tick(now: 0)
        _ = link.received(.welcome(frameIngestPort: 9000, heartbeatIntervalNanoseconds: second, liveness: 3, statusHeartbeats: true), now: 5 * ms)
        #expect(link.tick(now: 6 * ms) == [.sendStatus], "the first status at once")
        var sent: [AgentLink.Directive] = []
        var now = 100 * ms
        while now <= 3 * second + 200 * ms {
            sent += link.tick(now: now)
            _ = link.received(.other, now: now)  // the acks
            now += 100 * ms
        }
        #expect(
            sent == [.sendStatusAsHeartbeat(sequence: 1), .sendStatusAsHeartbeat(sequence: 2), .sendStatusAsHeartbeat(sequence: 3)],
            "the status stands for each heartbeat: no separate Heartbeat, no second status: \(sent)")
    }

    @Test func agentLink_silentCoordinatorIsGivenUpAndReconnected() {
        var link = registeredLink()
        _ = link.tick(now: 1 * second)
        let directives = link.tick(now: 3 * second + 20 * ms)
        #expect(directives == [.lostCoordinator, .reconnect])
        #expect(link.phase == .registering)
        // HELLO again after the back-off, on the new socket.
        #expect(link.tick(now: 3 * second + 300 * ms) == [.sendHello])
    }

    @Test func agentLink_reregisterRequestSendsHelloAtOnce() {
        var link = registeredLink()
        #expect(link.received(.reregister, now: 500 * ms) == [.sendHello])
        #expect(link.phase == .registering)
    }

    /// A loaded coordinator takes a second to answer: the HELLO the socket took is not sent
    /// again meanwhile, and the reregisters a coordinator restart draws ask for one HELLO.
    @Test func agentLink_keepsOneHelloOutstanding() {
        var link = AgentLink(now: 0)
        #expect(link.tick(now: 0) == [.sendHello])
        link.helloSent(accepted: true, now: 0)
        #expect(link.tick(now: 250 * ms).isEmpty)
        #expect(link.tick(now: 900 * ms).isEmpty)
        #expect(
            link.received(.welcome(frameIngestPort: 7601, heartbeatIntervalNanoseconds: second, liveness: 3), now: second)
                == [.registered(frameIngestPort: 7601)])
        #expect(link.received(.reregister, now: 2 * second) == [.sendHello])
        link.helloSent(accepted: true, now: 2 * second)
        #expect(link.received(.reregister, now: 2 * second + ms).isEmpty)
        #expect(link.received(.reregister, now: 2 * second + 2 * ms).isEmpty)
    }

    @Test func agentLink_aHelloTheSocketCouldNotTake_isTriedAgainAfterTheBackOff() {
        var link = AgentLink(now: 0)
        #expect(link.tick(now: 0) == [.sendHello])
        link.helloSent(accepted: false, now: 0)
        #expect(link.tick(now: 250 * ms) == [.sendHello])
    }

    /// A HELLO lost with its connection is said again after 2 s, then 4 s, 8 s; the patience
    /// then replaces the socket, and the fresh one says HELLO.
    @Test func agentLink_anUnansweredHello_isRepeatedSlowly_thenEndsWithItsSocket() {
        var link = AgentLink(now: 0)
        var hellos: [UInt64] = []
        var now: UInt64 = 0
        var reconnectedAt: UInt64?
        while now < 12 * second, reconnectedAt == nil {
            let directives = link.tick(now: now)
            if directives.contains(.sendHello) {
                hellos.append(now)
                link.helloSent(accepted: true, now: now)
            }
            if directives.contains(.reconnect) { reconnectedAt = now }
            now += 50 * ms
        }
        #expect(hellos == [0, 2 * second, 6 * second], "\(hellos.map { Double($0) / 1e9 })")
        let reconnect = try? #require(reconnectedAt)
        #expect(reconnect.map { $0 > 10 * second } == true, "the patience replaced the socket")
        #expect(link.tick(now: (reconnect ?? 0) + AgentLink.freshSocketGrace) == [.sendHello], "and the fresh socket says HELLO")
    }

    @Test func agentLink_refusalKeepsTheReasonAndRetriesSlowly() {
        var link = AgentLink(now: 0)
        _ = link.tick(now: 0)
        #expect(link.received(.refused(reason: "protocol 2 only"), now: 10 * ms).isEmpty)
        #expect(link.lastRefusal == "protocol 2 only")
        #expect(link.tick(now: 100 * ms).isEmpty)
    }

    @Test func agentLink_unansweredHelloOpensAFreshSocket() {
        var link = AgentLink(now: 0)
        var sawReconnect = false
        var now: UInt64 = 0
        while now < 15 * second {
            if link.tick(now: now).contains(.reconnect) { sawReconnect = true }
            now += 50 * ms
        }
        #expect(sawReconnect)
    }

    /// A coordinator that comes up long after the agent: however far the back-off has grown,
    /// every fresh socket gets a HELLO after it has had time to connect, never in the same
    /// breath as its creation.
    @Test func agentLink_aFreshSocketGetsItsHelloAfterTheGrace_evenWhenTheBackOffIsLong() {
        var link = AgentLink(now: 0)
        var now: UInt64 = 0
        var lastReconnect: UInt64?
        var hellosAfterGrace = 0
        while now < 200 * second {
            let directives = link.tick(now: now)
            if directives.contains(.reconnect) {
                #expect(!directives.contains(.sendHello), "no HELLO into a socket that has not connected yet")
                lastReconnect = now
            }
            if directives.contains(.sendHello), let reconnect = lastReconnect, now - reconnect >= AgentLink.freshSocketGrace,
                now - reconnect < AgentLink.freshSocketGrace + 100 * ms
            {
                hellosAfterGrace += 1
            }
            now += 50 * ms
        }
        #expect(hellosAfterGrace >= 4, "each fresh socket said HELLO once connected: \(hellosAfterGrace)")
    }

    /// A coordinator slower to register than the patience: each fresh socket waits twice as
    /// long as the last (so its WELCOME can arrive), up to the cap; a WELCOME resets it.
    @Test func agentLink_patienceGrowsWithEachUnansweredRegistration_andResetsOnWelcome() {
        var link = AgentLink(now: 0)
        var now: UInt64 = 0
        var reconnects: [UInt64] = []
        while now < 400 * second {
            if link.tick(now: now).contains(.reconnect) { reconnects.append(now) }
            now += 50 * ms
        }
        let gaps = zip(reconnects.dropFirst(), reconnects).map { ($0 - $1) / second }
        #expect(reconnects.first.map { $0 / second } == 10)
        #expect(gaps.prefix(3) == [20, 40, 80], "\(gaps)")
        #expect(gaps.dropFirst(3).allSatisfy { $0 == 80 }, "capped: \(gaps)")
        _ = link.received(.welcome(frameIngestPort: 1, heartbeatIntervalNanoseconds: second, liveness: 3), now: now)
        // Silence after registration: the link is lost after the liveness window, then a
        // fresh socket after the first patience again.
        var lost: UInt64?
        var next: UInt64?
        let welcomed = now
        while now < welcomed + 30 * second, next == nil {
            now += 50 * ms
            let directives = link.tick(now: now)
            if directives.contains(.lostCoordinator) { lost = now } else if directives.contains(.reconnect), lost != nil { next = now }
        }
        #expect(lost != nil && next != nil && (next! - lost!) / second == 10)
    }
}
