import FleetCore

/// The synthetic camera's sensor timing, as a raw sensor's mode fixes it: every format is read
/// out as 1080 active lines of a 2200-pixel line (the broadcast 1080p timing many sensors
/// follow), on the pixel clock the format's fastest rate needs at the least vertical blanking
/// (45 lines), with blanking up to its slowest rate. Smaller pictures are scaled from it, as a
/// sensor's modes are, so even a 160x120 stream is timed to a line of at most 30 µs.
enum SyntheticSensor {
    static let activeLines = 1080
    static let activeWidth = 1920
    static let horizontalBlanking = 280
    static let leastVerticalBlanking = 45
    /// Each frame's start moves by up to this much (ns) from where its oscillator puts it.
    static let jitterBound: UInt64 = 10_000

    static func mode(for format: VideoFormat) -> SensorMode {
        let fastest = format.frameRateRanges.map(\.maxFramesPerSecond).max() ?? 30
        let slowest = max(format.frameRateRanges.map(\.minFramesPerSecond).min() ?? 1, 0.1)
        let shortest = activeLines + leastVerticalBlanking
        let longest = Int((Double(shortest) * fastest / slowest).rounded(.up))
        return SensorMode(
            width: activeWidth, height: activeLines,
            pixelRate: UInt64((Double((activeWidth + horizontalBlanking) * shortest) * fastest).rounded()),
            horizontalBlankingRange: horizontalBlanking...horizontalBlanking,
            verticalBlankingRange: leastVerticalBlanking...max(leastVerticalBlanking, longest - activeLines))
    }

    /// The frame length, in lines, nearest `frameRate` on a perfect oscillator.
    static func frameLength(for frameRate: Double, in mode: SensorMode) -> Int {
        let lines = Int((1e9 / max(frameRate, 0.1) / mode.lineTime(horizontalBlanking: horizontalBlanking)).rounded())
        return min(max(lines, mode.frameLengthRange.lowerBound), mode.frameLengthRange.upperBound)
    }

    static func timing(of format: VideoFormat, at frameRate: Double) -> FrameLengthTiming {
        let mode = mode(for: format)
        return FrameLengthTiming(
            nominalLineTime: mode.lineTime(horizontalBlanking: horizontalBlanking), frameLengthRange: mode.frameLengthRange,
            nominalFrameLength: frameLength(for: frameRate, in: mode))
    }

    /// A stable number from a device id (FNV-1a): the same camera gets the same oscillator in
    /// every run and process, which Swift's seeded `Hasher` would not give.
    static func seed(deviceID: String) -> UInt64 {
        deviceID.utf8.reduce(0xcbf2_9ce4_8422_2325) { ($0 ^ UInt64($1)) &* 0x100_0000_01b3 }
    }

    /// Each camera's oscillator is off by its own error within ±40 ppm (crystals are quoted at
    /// ±20 to ±50), fixed by its device id.
    static func frequencyErrorPPM(deviceID: String) -> Double {
        Double(seed(deviceID: deviceID) % 8001) / 100 - 40
    }
}
