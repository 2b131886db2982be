import FleetProtocol
import Foundation

/// Each channel's level as a sound engineer reads a meter (microphones.md, "Levels"): the
/// peak and the RMS of the last whole second, in dB below full scale, and the samples that
/// reached full scale since the start. Fed interleaved 16-bit blocks of any length; pure.
public struct AudioLevelMeter: Sendable {
    public struct Level: Sendable, Equatable {
        public var peakDBFS: Double
        public var rmsDBFS: Double
        public var clipped: UInt64

        public var wire: Capfleet_V1_AudioLevel {
            .with {
                $0.peakDbfs = peakDBFS
                $0.rmsDbfs = rmsDBFS
                $0.clipped = clipped
            }
        }
    }

    /// What silence reads: below anything a converter resolves.
    public static let floorDBFS = -120.0

    public let channels: Int
    public let windowFrames: Int
    private var peak: [Int32]
    private var sumOfSquares: [Double]
    private var clipped: [UInt64]
    private var framesInWindow = 0
    /// The last whole window's figures; nil until one is complete.
    private var last: [(peak: Int32, sumOfSquares: Double)]?

    /// `windowFrames`: the frames a reading covers (a second: the sample rate).
    public init(channels: Int, windowFrames: Int) {
        self.channels = max(channels, 1)
        self.windowFrames = max(windowFrames, 1)
        peak = Array(repeating: 0, count: self.channels)
        sumOfSquares = Array(repeating: 0, count: self.channels)
        clipped = Array(repeating: 0, count: self.channels)
    }

    public mutating func add(_ samples: UnsafeBufferPointer<Int16>) {
        var channel = 0
        for sample in samples {
            let magnitude = abs(Int32(sample))
            if magnitude > peak[channel] { peak[channel] = magnitude }
            sumOfSquares[channel] += Double(sample) * Double(sample)
            if sample == .max || sample == .min { clipped[channel] += 1 }
            channel += 1
            if channel == channels {
                channel = 0
                framesInWindow += 1
                if framesInWindow == windowFrames { closeWindow() }
            }
        }
    }

    /// Each channel's level: the last whole window's, or the one filling while none is whole.
    public var levels: [Level] {
        let figures = last ?? (0..<channels).map { (peak[$0], sumOfSquares[$0]) }
        let frames = Double(last == nil ? max(framesInWindow, 1) : windowFrames)
        return figures.enumerated().map { channel, figure in
            Level(
                peakDBFS: Self.decibels(Double(figure.peak) / 32768), rmsDBFS: Self.decibels((figure.sumOfSquares / frames).squareRoot() / 32768),
                clipped: clipped[channel])
        }
    }

    private mutating func closeWindow() {
        last = (0..<channels).map { (peak[$0], sumOfSquares[$0]) }
        peak = Array(repeating: 0, count: channels)
        sumOfSquares = Array(repeating: 0, count: channels)
        framesInWindow = 0
    }

    static func decibels(_ ratio: Double) -> Double {
        ratio > 0 ? max(20 * log10(ratio), floorDBFS) : floorDBFS
    }
}
