import FleetCore
import Testing

@Suite struct TakeStartWindowTests {
    let now: UInt64 = 1_795_000_000_000_000_000  // late 2026
    let window = TakeStartWindow.standard

    @Test func aStartYearsInThePast_isRefusedSayingHowFarBehind() throws {
        let jan2020: UInt64 = 1_577_836_800_000_000_000
        let refusal = try #require(window.refusal(startFleetNs: jan2020, nowFleetNs: now))
        guard case let .past(by) = refusal else { Issue.record("refused as \(refusal)"); return }
        #expect(TakeStartWindow.spoken(by) == "6.9 years")
    }

    @Test func aStartAMomentAgo_nowOrSoon_isAccepted() {
        #expect(window.refusal(startFleetNs: now - 1_500_000_000, nowFleetNs: now) == nil, "a script's instant arrives a moment late")
        #expect(window.refusal(startFleetNs: now, nowFleetNs: now) == nil)
        #expect(window.refusal(startFleetNs: now + 3_600_000_000_000, nowFleetNs: now) == nil, "an hour ahead is a scheduled take")
    }

    @Test func aStartJustBeyondTheTolerance_orADayAhead_isRefused() {
        #expect(window.refusal(startFleetNs: now - 2_500_000_000, nowFleetNs: now) == .past(byNs: 2_500_000_000))
        let twoDays: UInt64 = 2 * 86_400 * 1_000_000_000
        #expect(window.refusal(startFleetNs: now + twoDays, nowFleetNs: now) == .tooFarAhead(byNs: twoDays))
        #expect(TakeStartWindow.spoken(twoDays) == "2 days")
    }
}
