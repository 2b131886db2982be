import FleetCore
import FleetRecording
import Testing

@Suite struct SequenceMarkerTests {
    @Test func aMarker_readsBackAsItWasWritten_andOtherEntriesAreNotMarkers() {
        let plain = SequenceMarker(sequence: 1_042, fleetTime: 1_795_000_000_123_456_789, dropped: DropTally())
        #expect(plain.json == #"{"kind":"sequence","sequence":1042,"fleet_ns":1795000000123456789}"#)
        #expect(SequenceMarker(json: plain.json) == plain)
        let lossy = SequenceMarker(sequence: 7, fleetTime: 9, dropped: DropTally(late: 1, outOfBuffers: 2, discontinuity: 3))
        #expect(SequenceMarker(json: lossy.json) == lossy)
        let behind = SequenceMarker(sequence: 8, fleetTime: 10, dropped: DropTally(encoderLate: 4))
        #expect(behind.json.contains(#""encoder_late":4"#) && SequenceMarker(json: behind.json) == behind)
        #expect(!lossy.json.contains("encoder_late"), "raw takes' markers read as before 1.4")
        #expect(SequenceMarker(json: #"{"kind":"zoom","factor":2}"#) == nil)
        #expect(SequenceMarker(json: #"{"kind":"sequence"}"#) == nil, "a marker without its numbers is not one")
        #expect(SequenceMarker(json: "not json") == nil)
    }
}
