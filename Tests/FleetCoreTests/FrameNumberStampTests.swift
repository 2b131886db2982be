import FleetCore
import Testing

@Suite struct FrameNumberStampTests {
    func roundTrip(_ number: UInt32, pixel: PixelFormat, width: Int, height: Int) -> UInt32? {
        var bytes = [UInt8](repeating: 90, count: pixel.frameByteCount(width: width, height: height)!)
        return bytes.withUnsafeMutableBytes { raw in
            let luma = LumaPlane(base: raw.baseAddress!, pixelFormat: pixel, width: width, height: height)!
            FrameNumberStamp.write(number, into: luma)
            return FrameNumberStamp.read(from: luma)
        }
    }

    @Test(arguments: [UInt32(0), 1, 42, 65_535, 4_000_000_000])
    func frameNumberStamp_readsBackFromYUYV(_ number: UInt32) {
        #expect(roundTrip(number, pixel: .yuyv, width: 640, height: 480) == number)
    }

    @Test func frameNumberStamp_readsBackFromNV12AndSmallFrames() {
        #expect(roundTrip(123_456, pixel: .nv12, width: 1920, height: 1080) == 123_456)
        #expect(roundTrip(77, pixel: .nv12, width: 160, height: 120) == 77)
    }

    @Test func frameNumberStamp_unstampedFrameReadsAsNil() {
        var bytes = [UInt8](repeating: 16, count: 640 * 480 * 2)
        let read = bytes.withUnsafeMutableBytes { raw in
            FrameNumberStamp.read(from: LumaPlane(base: raw.baseAddress!, pixelFormat: .yuyv, width: 640, height: 480)!)
        }
        #expect(read == nil)
    }
}

@Suite struct DropAccountingTests {
    @Test func sequenceGaps_countFramesLostBetweenSequenceNumbers() {
        var detector = SequenceGapDetector()
        #expect(detector.observe(5) == 0)
        #expect(detector.observe(6) == 0)
        #expect(detector.observe(9) == 2)
        #expect(detector.observe(9) == 0)
        detector.reset()
        #expect(detector.observe(100) == 0)
    }

    @Test func dropTally_mergesOutOfOrderReportsByMaximum() {
        let a = DropTally(late: 5, outOfBuffers: 1, discontinuity: 0)
        let b = DropTally(late: 3, outOfBuffers: 2, discontinuity: 7)
        #expect(a.merging(b) == DropTally(late: 5, outOfBuffers: 2, discontinuity: 7))
        #expect(a.merging(b).total == 14)
    }

    @Test func throughputMeter_measuresOverTheSampleInterval() {
        var meter = ThroughputMeter()
        meter.sample(frames: 0, bytes: 0, at: 0)
        meter.sample(frames: 30, bytes: 3000, at: 2_000_000_000)
        #expect(meter.framesPerSecond == 15)
        #expect(meter.bytesPerSecond == 1500)
    }
}
