import Foundation

/// What the synthetic microphone hears (microphones.md, "The synthetic microphone"): a
/// 1 kHz tone at −20 dBFS on every channel and, on every whole second of fleet time, a click
/// of 2 ms at −1 dBFS, so that sound can be checked against picture (the synthetic camera
/// flashes on the same seconds) and against the fleet's clock. Pure: a block is its first
/// sample's place in the stream and its fleet time.
public struct SyntheticTone: Sendable {
    public let format: AudioFormat
    public static let toneHertz = 1000.0
    public static let toneAmplitude = 0.1  // −20 dBFS
    public static let clickAmplitude = 0.891  // −1 dBFS
    public static let clickNanoseconds: UInt64 = 2_000_000

    public init(format: AudioFormat) { self.format = format }

    /// Fills `samples` (interleaved, `frames` × channels) with the block whose first frame is
    /// frame `index` of the stream, captured at `fleetNs` (nil: the node has no fleet time, and
    /// no click can be put on a fleet second).
    public func render(into samples: inout [Int16], frames: Int, index: UInt64, fleetNs: UInt64?) {
        let channels = format.channels
        let rate = Double(format.sampleRate)
        if samples.count != frames * channels { samples = Array(repeating: 0, count: frames * channels) }
        let frameNanoseconds = 1e9 / rate
        for frame in 0..<frames {
            let n = Double(index &+ UInt64(frame))
            var value = Self.toneAmplitude * sin(2 * Double.pi * Self.toneHertz * n / rate)
            if let fleetNs {
                // Where this frame falls within its fleet second.
                let at = fleetNs &+ UInt64((Double(frame) * frameNanoseconds).rounded())
                if at % 1_000_000_000 < Self.clickNanoseconds {
                    // A square burst: easy to find, the same on every channel.
                    value = (frame / 4) % 2 == 0 ? Self.clickAmplitude : -Self.clickAmplitude
                }
            }
            let sample = Int16(clamping: Int((value * 32767).rounded()))
            for channel in 0..<channels { samples[frame * channels + channel] = sample }
        }
    }

    /// The frame of a block starting at `fleetNs` where the next fleet second's click starts,
    /// or nil if it falls after the block's `frames`.
    public func clickFrame(inBlockAt fleetNs: UInt64, frames: Int) -> Int? {
        let intoSecond = fleetNs % 1_000_000_000
        let toNext = intoSecond < Self.clickNanoseconds ? 0 : 1_000_000_000 - intoSecond
        let frame = Int((Double(toNext) * Double(format.sampleRate) / 1e9).rounded(.up))
        return frame < frames ? frame : nil
    }
}
