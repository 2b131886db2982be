import FleetCore
import Testing

@Suite struct ClockProbePairsTests {
    @Test func aWakeProbesAnswer_asksForTheMeasuredProbe_andOnlyThatOnesTimestampsComeOut() {
        var pairs = ClockProbePairs()
        let wake = pairs.nextSequence()
        pairs.sent(wake, at: 1_000, purpose: .wake)
        #expect(pairs.answer(sequence: wake, echoedSent: 1_000, serverReceived: 5_300, serverSent: 5_310, received: 1_700) == .sendMeasuredProbe)

        let measured = pairs.nextSequence()
        #expect(measured == wake + 1)
        pairs.sent(measured, at: 1_710, purpose: .measure)
        let answer = pairs.answer(sequence: measured, echoedSent: 1_710, serverReceived: 5_800, serverSent: 5_805, received: 2_100)
        #expect(answer == .measured(ClockProbe(sent: 1_710, serverReceived: 5_800, serverSent: 5_805, received: 2_100)))
        #expect(pairs.probesInFlight == 0)
    }

    @Test func answersThatMatchNoProbe_areIgnored() {
        var pairs = ClockProbePairs()
        let sequence = pairs.nextSequence()
        pairs.sent(sequence, at: 1_000, purpose: .measure)
        #expect(pairs.answer(sequence: sequence + 7, echoedSent: 1_000, serverReceived: 1, serverSent: 2, received: 3) == nil)
        #expect(
            pairs.answer(sequence: sequence, echoedSent: 999, serverReceived: 1, serverSent: 2, received: 3) == nil,
            "an echo of another t1 is another run's probe")
        #expect(pairs.answer(sequence: sequence, echoedSent: 1_000, serverReceived: 1, serverSent: 2, received: 3) != nil)
        #expect(
            pairs.answer(sequence: sequence, echoedSent: 1_000, serverReceived: 1, serverSent: 2, received: 3) == nil,
            "a duplicated answer counts once")
    }

    @Test func answersOverdueByTwoSeconds_areForgotten() {
        var pairs = ClockProbePairs()
        let old = pairs.nextSequence()
        pairs.sent(old, at: 10_000_000_000, purpose: .wake)
        let recent = pairs.nextSequence()
        pairs.sent(recent, at: 11_500_000_000, purpose: .measure)
        pairs.expire(now: 12_000_000_000)
        #expect(pairs.probesInFlight == 1)
        #expect(pairs.answer(sequence: old, echoedSent: 10_000_000_000, serverReceived: 1, serverSent: 2, received: 12_000_000_001) == nil)
        #expect(pairs.answer(sequence: recent, echoedSent: 11_500_000_000, serverReceived: 1, serverSent: 2, received: 12_000_000_001) != nil)
    }
}
