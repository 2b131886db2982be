import FleetCore
import Testing

@Suite struct AlertThrottleTests {
    let second: UInt64 = 1_000_000_000

    @Test func oneAlertPerKeyPerInterval_andTheNextOneSaysHowManyWereHeldBack() {
        var throttle = AlertThrottle(intervalNanoseconds: 60 * second)
        #expect(throttle.consider(key: "node_offline n1", at: 0) == .init(deliver: true, suppressedBefore: 0))
        #expect(!throttle.consider(key: "node_offline n1", at: 10 * second).deliver)
        #expect(!throttle.consider(key: "node_offline n1", at: 59 * second).deliver)
        #expect(throttle.consider(key: "node_offline n1", at: 60 * second) == .init(deliver: true, suppressedBefore: 2))
    }

    @Test func differentKeys_doNotHoldEachOtherBack_untilTheBurstLimit() {
        var throttle = AlertThrottle(intervalNanoseconds: 60 * second, burst: 3)
        #expect(throttle.consider(key: "a", at: 0).deliver)
        #expect(throttle.consider(key: "b", at: 1).deliver)
        #expect(throttle.consider(key: "c", at: 2).deliver)
        #expect(!throttle.consider(key: "d", at: 3).deliver, "a storm of distinct alerts is capped too")
        #expect(throttle.consider(key: "d", at: 60 * second).deliver)
    }
}
