import Foundation

/// A second-order Butterworth high-pass filter (the cookbook biquad, Q = 1/√2: 12 dB an octave
/// below the corner, flat above it), one state per channel, over interleaved samples. It
/// removes rumble and handling noise below the corner; it adds no delay worth a block.
public struct HighPassFilter: Sendable {
    public let cornerHertz: Double
    public let channels: Int
    private let b0: Double, b1: Double, b2: Double, a1: Double, a2: Double
    /// Transposed direct form II: two state values per channel.
    private var state: [Double]

    public init(cornerHertz: Double, sampleRate: Int, channels: Int) {
        self.cornerHertz = cornerHertz
        self.channels = max(channels, 1)
        let omega = 2 * Double.pi * cornerHertz / Double(sampleRate)
        let cosine = cos(omega)
        let alpha = sin(omega) / (2 * 0.5.squareRoot())
        let a0 = 1 + alpha
        b0 = (1 + cosine) / 2 / a0
        b1 = -(1 + cosine) / a0
        b2 = (1 + cosine) / 2 / a0
        a1 = -2 * cosine / a0
        a2 = (1 - alpha) / a0
        state = Array(repeating: 0, count: 2 * self.channels)
    }

    /// Filters `frames` interleaved frames in place, rounding back to 16 bits with clipping.
    public mutating func process(_ samples: UnsafeMutableBufferPointer<Int16>, frames: Int) {
        let channels = channels
        for channel in 0..<channels {
            var s1 = state[2 * channel], s2 = state[2 * channel + 1]
            var index = channel
            for _ in 0..<frames {
                let x = Double(samples[index])
                let y = b0 * x + s1
                s1 = b1 * x - a1 * y + s2
                s2 = b2 * x - a2 * y
                samples[index] = Self.clip(y)
                index += channels
            }
            state[2 * channel] = s1
            state[2 * channel + 1] = s2
        }
    }

    /// The filter's gain at `hertz` (1 in the pass band), from its coefficients.
    public func magnitude(atHertz hertz: Double, sampleRate: Int) -> Double {
        let omega = 2 * Double.pi * hertz / Double(sampleRate)
        // H(e^jω) = (b0 + b1 z⁻¹ + b2 z⁻²) / (1 + a1 z⁻¹ + a2 z⁻²)
        let (c1, s1, c2, s2) = (cos(omega), -sin(omega), cos(2 * omega), -sin(2 * omega))
        let numerator = (re: b0 + b1 * c1 + b2 * c2, im: b1 * s1 + b2 * s2)
        let denominator = (re: 1 + a1 * c1 + a2 * c2, im: a1 * s1 + a2 * s2)
        let n = (numerator.re * numerator.re + numerator.im * numerator.im).squareRoot()
        let d = (denominator.re * denominator.re + denominator.im * denominator.im).squareRoot()
        return n / d
    }

    @inline(__always) public static func clip(_ value: Double) -> Int16 {
        let rounded = value.rounded()
        return rounded >= 32767 ? .max : rounded <= -32768 ? .min : Int16(rounded)
    }
}
