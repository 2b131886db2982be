import FleetCore
import Testing

/// Moment rules: a code, a face or a sensor's sample arriving takes one moment, and only one.
@Suite struct MomentTriggerBookTests {
    private static let ms: UInt64 = 1_000_000
    private static let qr = MomentObservation.Code(symbology: "qr", value: "part-17")

    private func codeRule(_ value: String? = nil, rearmMs: UInt32 = 1_000) -> MomentRule {
        MomentRule(name: "line-a", sourceDeviceID: "cam-1", condition: .code(symbology: .qr, value: value), rearmMs: rearmMs)
    }

    private func report(at ms: UInt64, _ codes: [MomentObservation.Code], faces: Int = 0, device: String = "cam-1") -> MomentObservation {
        .detection(deviceID: device, fleetTimeNs: ms * Self.ms, codes: codes, faces: faces)
    }

    private func moments(_ actions: [MomentTriggerBook.Action]) -> [UInt64] {
        actions.compactMap { if case let .takeMoment(_, instant, _) = $0 { instant / Self.ms } else { nil } }
    }

    @Test func aCodeHeldInView_takesOneMomentAtItsFirstFrame_evenWhenTheDecoderMissesAFrame() {
        var book = MomentTriggerBook()
        book.replaceRules(with: [codeRule()])
        var taken: [UInt64] = []
        // Five reports a second for 3 s; the decoder misses it at 1 s and 2 s (the face stays).
        for ms in stride(from: UInt64(1_000), through: 4_000, by: 200) {
            let codes = ms == 2_000 || ms == 3_000 ? [] : [Self.qr]
            taken += moments(book.observed(report(at: ms, codes, faces: 1)))
            if book.isTaking("line-a") { book.momentEnded(rule: "line-a") }
        }
        #expect(taken == [1_000])
        // Gone (the all-gone report), then back after more than the re-arm time: a second moment.
        #expect(book.observed(report(at: 4_200, [])).isEmpty)
        #expect(moments(book.observed(report(at: 4_800, [Self.qr]))).isEmpty, "back 0.8 s after it was last seen: the same arrival")
        #expect(book.observed(report(at: 5_000, [])).isEmpty)
        #expect(moments(book.observed(report(at: 6_400, [Self.qr]))) == [6_400])
    }

    @Test func aSecondArrivalWhileTheMomentIsTaken_isMissed_andTheRuleFiresAgainAfterItEnds() {
        var book = MomentTriggerBook()
        book.replaceRules(with: [codeRule()])
        let other = MomentObservation.Code(symbology: "qr", value: "part-18")
        #expect(moments(book.observed(report(at: 1_000, [Self.qr]))) == [1_000])
        let missed = book.observed(report(at: 1_200, [Self.qr, other]))
        #expect(missed == [.missed(rule: "line-a", instantFleetNs: 1_200 * Self.ms, cause: "qr \"part-18\" on cam-1")])
        book.momentEnded(rule: "line-a")
        #expect(book.observed(report(at: 1_400, [Self.qr, other])).isEmpty, "both were already present")
        let third = MomentObservation.Code(symbology: "qr", value: "part-19")
        let actions = book.observed(report(at: 1_600, [third]))
        #expect(moments(actions) == [1_600])
        if case let .takeMoment(_, _, cause)? = actions.first { #expect(cause == "qr \"part-19\" on cam-1") }
    }

    @Test func aRuleForOneValue_ignoresOtherCodes_andOtherCameras() {
        var book = MomentTriggerBook()
        book.replaceRules(with: [codeRule("part-17")])
        #expect(book.observed(report(at: 1_000, [.init(symbology: "qr", value: "part-99")])).isEmpty)
        #expect(book.observed(report(at: 1_000, [.init(symbology: "ean13", value: "part-17")])).isEmpty, "another symbology")
        #expect(book.observed(report(at: 1_000, [Self.qr], device: "cam-2")).isEmpty)
        #expect(!book.watches("cam-2") && book.watches("cam-1"))
        #expect(moments(book.observed(report(at: 1_200, [Self.qr]))) == [1_200])
    }

    @Test func aFace_firesOnArrival_andASilentSourceCountsAsGone() {
        var book = MomentTriggerBook()
        book.replaceRules(with: [MomentRule(name: "visitor", sourceDeviceID: "cam-1", condition: .face)])
        #expect(moments(book.observed(report(at: 1_000, [], faces: 2))) == [1_000])
        book.momentEnded(rule: "visitor")
        #expect(book.observed(report(at: 1_200, [], faces: 1)).isEmpty)
        // Nothing for 10 s (detection off, the agent restarted) while a face was present.
        #expect(moments(book.observed(report(at: 11_200, [], faces: 1))) == [11_200])
    }

    @Test func aSample_firesOnEachRisingEdge_pastTheRearmTime() {
        var book = MomentTriggerBook()
        book.replaceRules(with: [
            MomentRule(name: "gpio", sourceDeviceID: "sen-1-lines", condition: .above(channel: "line0", level: 0.5), cameras: ["cam-1"], rearmMs: 100)
        ])
        var taken: [UInt64] = []
        // A 10 ms pulse every 500 ms, sampled every millisecond, and a glitch 50 ms after one.
        for ms in UInt64(0)..<1_600 {
            let high = ms % 500 < 10 || ms == 560
            let actions = book.observed(.sample(deviceID: "sen-1-lines", fleetTimeNs: ms * Self.ms, values: ["line0": high ? 1 : 0], text: ""))
            taken += moments(actions)
            if !actions.isEmpty { book.momentEnded(rule: "gpio") }
        }
        #expect(taken == [0, 500, 1_000, 1_500])
        // A sample without the channel says nothing of it.
        #expect(book.observed(.sample(deviceID: "sen-1-lines", fleetTimeNs: 2_000 * Self.ms, values: ["other": 1], text: "")).isEmpty)
    }

    @Test func aTextCue_firesWhenItComes() {
        var book = MomentTriggerBook()
        book.replaceRules(with: [MomentRule(name: "cue", sourceDeviceID: "sen-1-cues", condition: .text("go"), allCameras: true)])
        let cue = { (ms: UInt64, text: String) in
            MomentObservation.sample(deviceID: "sen-1-cues", fleetTimeNs: ms * Self.ms, values: [:], text: text)
        }
        #expect(book.observed(cue(1_000, "standby")).isEmpty)
        let actions = book.observed(cue(2_000, "go"))
        #expect(moments(actions) == [2_000])
        if case let .takeMoment(rule, _, _)? = actions.first { #expect(rule.momentCameras.isEmpty, "every camera") }
    }

    @Test func changingTheRules_keepsWhatAnUnchangedRuleSaw_andForgetsRemovedOnes() {
        var book = MomentTriggerBook()
        let rule = codeRule()
        book.replaceRules(with: [rule])
        #expect(moments(book.observed(report(at: 1_000, [Self.qr]))) == [1_000])
        book.replaceRules(with: [rule, MomentRule(name: "visitor", sourceDeviceID: "cam-1", condition: .face)])
        #expect(book.isTaking("line-a"), "the moment in progress stays")
        book.momentEnded(rule: "line-a")
        #expect(moments(book.observed(report(at: 1_200, [Self.qr]))).isEmpty, "the code was already present")
        var changed = rule
        changed.afterMs = 3_000
        book.replaceRules(with: [changed])
        #expect(moments(book.observed(report(at: 1_400, [Self.qr]))) == [1_400], "a changed rule starts over")
        book.replaceRules(with: [])
        #expect(!book.watches("cam-1") && !book.isTaking("line-a"))
    }

    @Test func manyDistinctCodes_areRememberedWithinABound() {
        var book = MomentTriggerBook()
        // An hour's re-arm: only a forgotten code can arrive again within the test.
        book.replaceRules(with: [codeRule(rearmMs: 3_600_000)])
        for index in UInt64(0)..<1_000 {
            _ = book.observed(report(at: index * 10, [.init(symbology: "qr", value: "part-\(index)")]))
            book.momentEnded(rule: "line-a")
        }
        // The first code was forgotten long ago: seen again, it is a new arrival.
        #expect(moments(book.observed(report(at: 20_000, [.init(symbology: "qr", value: "part-0")]))) == [20_000])
    }

    @Test func rules_refuseWhatCannotWork() {
        #expect(codeRule().refusal(sourceIsSensor: false) == nil)
        #expect(codeRule().refusal(sourceIsSensor: true)?.contains("sensor stream") == true)
        #expect(MomentRule(name: "Bad Name", sourceDeviceID: "cam-1", condition: .face).refusal(sourceIsSensor: false) != nil)
        #expect(
            MomentRule(name: "gpio", sourceDeviceID: "sen-1", condition: .above(channel: "line0", level: 0.5)).refusal(sourceIsSensor: true)?
                .contains("name the cameras") == true)
        #expect(
            MomentRule(name: "gpio", sourceDeviceID: "cam-1", condition: .text("go"), cameras: ["cam-1"]).refusal(sourceIsSensor: false)?
                .contains("is a camera") == true)
        #expect(MomentRule(name: "x", sourceDeviceID: "cam-1", condition: .face, afterMs: 61_000).refusal(sourceIsSensor: false) != nil)
        #expect(MomentRule(name: "x", sourceDeviceID: "cam-1", condition: .code(symbology: nil, value: "")).refusal(sourceIsSensor: false) != nil)
    }
}
