import FleetCore
import Testing

@Suite struct NodeLivenessTests {
    let second: UInt64 = 1_000_000_000

    @Test func nodeLiveness_firstHeartbeatBringsNodeOnline() {
        var liveness = NodeLiveness(heartbeatIntervalNanoseconds: second, liveness: 3)
        #expect(liveness.heard(from: "a", at: 0) == .cameOnline(nodeID: "a"))
        #expect(liveness.heard(from: "a", at: second) == nil)
        #expect(liveness.isOnline("a"))
    }

    @Test func nodeLiveness_goesOfflineAfterThreeMissedHeartbeats() {
        var liveness = NodeLiveness(heartbeatIntervalNanoseconds: second, liveness: 3)
        _ = liveness.heard(from: "a", at: 0)
        _ = liveness.heard(from: "b", at: 2 * second)
        #expect(liveness.expire(at: 3 * second).isEmpty)
        #expect(liveness.expire(at: 3 * second + 1) == [.wentOffline(nodeID: "a")])
        #expect(!liveness.isOnline("a"))
        #expect(liveness.isOnline("b"))
        #expect(liveness.expire(at: 5 * second).isEmpty)
        #expect(liveness.expire(at: 5 * second + 1) == [.wentOffline(nodeID: "b")])
    }

    @Test func nodeLiveness_returningNodeComesOnlineAgain() {
        var liveness = NodeLiveness(heartbeatIntervalNanoseconds: second, liveness: 3)
        _ = liveness.heard(from: "a", at: 0)
        _ = liveness.expire(at: 10 * second)
        #expect(liveness.heard(from: "a", at: 11 * second) == .cameOnline(nodeID: "a"))
    }

    /// Heartbeats that arrived but wait behind a slow message keep the node online; they
    /// never bring back a node already gone, nor move its last sign of life backwards.
    @Test func nodeLiveness_arrivalsNotYetHandledKeepANodeOnline() {
        var liveness = NodeLiveness(heartbeatIntervalNanoseconds: second, liveness: 3)
        _ = liveness.heard(from: "a", at: 0)
        liveness.refresh("a", arrivedAt: 2 * second)
        #expect(liveness.expire(at: 4 * second).isEmpty)
        liveness.refresh("a", arrivedAt: 1 * second)
        #expect(liveness.expire(at: 5 * second + 1) == [.wentOffline(nodeID: "a")])
        liveness.refresh("a", arrivedAt: 6 * second)
        #expect(!liveness.isOnline("a"))
    }

    @Test func nodeLiveness_removedNodeIsOfflineAtOnce() {
        var liveness = NodeLiveness(heartbeatIntervalNanoseconds: second, liveness: 3)
        _ = liveness.heard(from: "a", at: 0)
        #expect(liveness.remove("a") == .wentOffline(nodeID: "a"))
        #expect(liveness.remove("a") == nil)
    }
}

@Suite struct ReconnectBackoffTests {
    @Test func backoff_doublesUpToTheCapAndResets() {
        var backoff = ReconnectBackoff(initialNanoseconds: 250, maximumNanoseconds: 1500)
        var delays: [UInt64] = []
        for _ in 0..<5 { delays.append(backoff.nextDelay()) }
        #expect(delays == [250, 500, 1000, 1500, 1500])
        backoff.reset()
        #expect(backoff.nextDelay() == 250)
    }
}
