import FleetCore
import Testing

/// A microphone's part of a take (microphones.md, "In takes") and the 10 ms blocks it is cut into.
@Suite struct MicrophoneTakeStateTests {
    @Test func blocksFromTheStart_areTheTakes_theFirstAtTheStopEndsIt() {
        var state = MicrophoneTakeState(consent: .authorized)
        #expect(state.takeBegan(takeID: "t1", startFleet: 1_000, deviceDrops: DropTally()) == [.beginTake(takeID: "t1")])
        #expect(state.blockCaptured(fleetTime: 999, deviceDrops: DropTally()).recordedFor == nil, "before the start")
        #expect(state.blockCaptured(fleetTime: 1_000, deviceDrops: DropTally()).recordedFor?.takeID == "t1")
        #expect(state.takeStopAsked(takeID: "t1", stopFleet: 5_000, nowFleet: 2_000, cause: .stopped, deviceDrops: DropTally()).isEmpty)
        #expect(state.blockCaptured(fleetTime: 4_999, deviceDrops: DropTally()).recordedFor?.takeID == "t1")
        let last = state.blockCaptured(fleetTime: 5_000, deviceDrops: DropTally(discontinuity: 2))
        #expect(last.recordedFor == nil)
        #expect(
            last.actions == [
                .endTake(TakeEnd(takeID: "t1", drops: DropTally(discontinuity: 2), reason: TakeStopCause.stopped.reason, withholding: false))
            ])
        #expect(state.take == nil)
    }

    @Test func consentWithdrawnMidTake_endsItAtOnce_withholding() {
        var state = MicrophoneTakeState(consent: .authorized)
        _ = state.takeBegan(takeID: "t1", startFleet: 0, deviceDrops: DropTally())
        let actions = state.consentChanged(to: .denied, deviceDrops: DropTally())
        #expect(actions == [.endTake(TakeEnd(takeID: "t1", drops: DropTally(), reason: TakeStopCause.consentWithdrawn.reason, withholding: true))])
        #expect(state.blockCaptured(fleetTime: 10, deviceDrops: DropTally()).recordedFor == nil)
        // Granted again: nothing to end, nothing recorded until a take begins.
        #expect(state.consentChanged(to: .authorized, deviceDrops: DropTally()).isEmpty)
    }

    @Test func aStopThatPassesWithNoBlock_endsTheTakeByTheClock() {
        var state = MicrophoneTakeState(consent: .authorized)
        _ = state.takeBegan(takeID: "t1", startFleet: 0, deviceDrops: DropTally())
        _ = state.takeStopAsked(takeID: "t1", stopFleet: 100, nowFleet: 50, cause: .stopped, deviceDrops: DropTally())
        #expect(state.takeStopDue(nowFleet: 99, deviceDrops: DropTally()).isEmpty)
        #expect(state.takeStopDue(nowFleet: 100, deviceDrops: DropTally()).count == 1)
    }

    @Test func theChunker_cutsAnyBlocksIntoFixedOnes_andFillsAGapWithSilence() {
        var chunker = AudioChunker(channels: 2, chunkFrames: 480, maxGapFrames: 4_800)
        var chunks: [(UInt64, [Int16])] = []
        func add(_ frames: Int, first: UInt64) {
            let samples = (0..<(frames * 2)).map { Int16(truncatingIfNeeded: 1 + Int(first) * 2 + $0) }
            samples.withUnsafeBufferPointer { chunker.add($0, frames: frames, first: first) { chunks.append(($0, Array($1))) } }
        }
        add(300, first: 0)
        #expect(chunks.isEmpty)
        add(300, first: 300)
        #expect(chunks.map(\.0) == [0])
        #expect(chunks[0].1 == (0..<960).map { Int16(1 + $0) }, "the samples in order across the two blocks")
        add(1000, first: 600)
        #expect(chunks.map(\.0) == [0, 480, 960])
        // 160 frames held (1440..1599); a gap of 400 frames (an overrun): silence for them, so
        // that the block after it is at its place in the chunks.
        add(480, first: 2_000)
        #expect(chunks.map(\.0) == [0, 480, 960, 1_440, 1_920])
        let filled = chunks[3].1
        #expect(filled[0..<320] == ArraySlice((2_880..<3_200).map { Int16(1 + $0) }), "what was held before the gap")
        #expect(filled[320...].allSatisfy { $0 == 0 }, "the gap's frames are silent")
        #expect(chunks[4].1[0..<160].allSatisfy { $0 == 0 } && chunks[4].1[160] == Int16(truncatingIfNeeded: 1 + 4_000))
        // Every chunk of a long gap is there, at its place, silent.
        add(80, first: 2_480)
        add(10, first: 2_560 + 2_400)
        #expect(chunks.map(\.0).suffix(5) == [2_400, 2_880, 3_360, 3_840, 4_320])
        #expect(chunks.suffix(4).allSatisfy { $0.1.allSatisfy { $0 == 0 } })
    }

    @Test func theChunker_dropsThePartialChunk_atAGapLongerThanItFills_orABlockThatGoesBack() {
        var chunker = AudioChunker(channels: 1, chunkFrames: 100, maxGapFrames: 1_000)
        var firsts: [UInt64] = []
        func add(_ frames: Int, first: UInt64) {
            let samples = [Int16](repeating: 7, count: frames)
            samples.withUnsafeBufferPointer { chunker.add($0, frames: frames, first: first) { chunk, _ in firsts.append(chunk) } }
        }
        add(150, first: 0)
        add(150, first: 5_000)
        #expect(firsts == [0, 5_000], "the 50 frames before the long gap went")
        add(60, first: 4_000)
        add(100, first: 4_060)
        #expect(firsts == [0, 5_000, 4_000])
    }
}
