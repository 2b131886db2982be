import FleetCapture
import FleetCore
import FleetProtocol
import Foundation
import Logging
import Synchronization
import Testing

@testable import FleetAgent

/// An exposure audit on the agent (clock.md, "Auditing exposures"), on frames of the synthetic
/// scene rendered with a timecode: each read is paired with the stamp of its own frame, and the
/// capture thread never waits for the decoder.
@Suite struct ExposureAuditorTests {
    static let bootID = "5b1f3c2e-9a0d-4e6f-8b7a-0c1d2e3f4a5b"
    static let format = SyntheticCamera.formatList.first { $0.width == 640 && $0.pixelFormat == .yuyv }!

    /// Frame `sequence`, exposed at `exposureStart`, showing its timecode.
    static func frame(_ sequence: UInt64, exposedAt exposureStart: UInt64) -> CapturedFrame {
        var renderer = TestPatternRenderer(
            format: format, overlays: [SyntheticOverlay(timecodeOf: bootID, origin: NormalizedPoint(x: 0.55, y: 0.05), width: 0.4)])
        let buffer = FrameBuffer(unpooledCapacity: renderer.frameBytes)
        renderer.render(frameNumber: UInt32(sequence), zoom: 1, exposureStart: exposureStart, into: buffer.storage)
        return CapturedFrame(
            buffer: buffer, byteCount: renderer.frameBytes, sequence: sequence, captureMonotonicNanoseconds: exposureStart,
            layout: renderer.layout)
    }

    /// An audit's answer, once it ends.
    final class Answer: Sendable {
        let samples = Mutex<Capfleet_V1_ExposureAuditSamples?>(nil)

        func received() async throws -> Capfleet_V1_ExposureAuditSamples {
            for _ in 0..<1200 {
                if let samples = samples.withLock({ $0 }) { return samples }
                try await Task.sleep(for: .milliseconds(50))
            }
            throw CancellationError()
        }
    }

    /// Starts an audit of `milliseconds`.
    static func audit(_ auditor: ExposureAuditor, milliseconds: UInt32) -> Answer {
        let answer = Answer()
        let started = auditor.begin(
            milliseconds: milliseconds, maxSamples: 0, conditions: { (25, 0.01, 1_700_000_000_000_000_000) },
            answer: { samples in answer.samples.withLock { $0 = samples } })
        #expect(started)
        return answer
    }

    /// Waits until the decoder has read every frame offered so far (at most a minute).
    static func idle(_ auditor: ExposureAuditor) async throws {
        var waited = 0
        while auditor.isDecoding, waited < 6000 {
            try await Task.sleep(for: .milliseconds(10))
            waited += 1
        }
    }

    @Test func eachReadIsPairedWithTheStampOfItsOwnFrame() async throws {
        let auditor = ExposureAuditor(deviceID: "syn-audit-1", logger: Logger(label: "capfleet.test"))
        // Ten minutes, ended once the frames are offered: a busy machine's pace does not count.
        let answer = Self.audit(auditor, milliseconds: 600_000)
        for sequence in UInt64(1)...5 {
            let exposure = 1_000_000_000 + sequence * 40_000_000
            try await Self.idle(auditor)
            auditor.offer(Self.frame(sequence, exposedAt: exposure), stamp: (exposure + 7_000, 50_000), real: true)
        }
        // Counted, never looked at: no consent, and no fleet time.
        auditor.offer(Self.frame(6, exposedAt: 2_000_000_000), stamp: (2_000_007_000, 50_000), real: false)
        auditor.offer(Self.frame(7, exposedAt: 2_040_000_000), stamp: nil, real: true)
        auditor.endNow()
        let samples = try await answer.received()
        #expect(samples.framesSeen == 7)
        #expect(samples.framesDecoded == 5 && samples.framesSkipped == 0 && samples.framesWithoutTimecode == 0)
        #expect(samples.samples.map(\.sequence) == [1, 2, 3, 4, 5])
        for sample in samples.samples {
            #expect(sample.clock == .hostMonotonic && sample.timecodeBootID == Self.bootID)
            #expect(sample.stampedFleetNs == sample.timecodeNs + 7_000 && sample.uncertaintyNs == 50_000)
        }
        #expect(samples.frameRate == 25 && samples.exposureSeconds == 0.01 && samples.gridOriginFleetNs == 1_700_000_000_000_000_000)
        await auditor.stop()
    }

    @Test func framesThatFindTheDecoderBusy_areSkippedNotQueued_andASecondAuditWaits() async throws {
        let auditor = ExposureAuditor(deviceID: "syn-audit-2", logger: Logger(label: "capfleet.test"))
        let answer = Self.audit(auditor, milliseconds: 600_000)
        let second = auditor.begin(milliseconds: 1000, maxSamples: 0, conditions: { (25, 0, 0) }, answer: { _ in })
        #expect(!second, "one audit at a time")
        let frames = (UInt64(1)...40).map { Self.frame($0, exposedAt: 1_000_000_000 + $0 * 1_000_000) }
        for frame in frames { auditor.offer(frame, stamp: (frame.captureMonotonicNanoseconds, 1_000), real: true) }
        auditor.endNow()
        let samples = try await answer.received()
        #expect(samples.framesSeen == 40)
        #expect(samples.framesSkipped > 0, "40 frames back to back find the decoder busy")
        #expect(samples.framesDecoded + samples.framesSkipped == 40, "every frame is decoded or skipped: none waits in a queue")
        #expect(samples.samples.count == Int(samples.framesDecoded))
        await auditor.stop()
    }

    @Test func framesOutsideAnAuditAreNotCounted() async throws {
        let auditor = ExposureAuditor(deviceID: "syn-audit-3", logger: Logger(label: "capfleet.test"))
        auditor.offer(Self.frame(1, exposedAt: 1_000_000_000), stamp: (1_000_000_000, 1_000), real: true)
        let answer = Self.audit(auditor, milliseconds: 200)
        let samples = try await answer.received()
        #expect(samples.framesSeen == 0 && samples.samples.isEmpty)
        await auditor.stop()
    }
}
