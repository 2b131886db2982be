import FleetCore
import Testing

@testable import FleetCapture

/// A V4L2 driver's colour fields as the fleet's colour description (frames.md, "Colour and depth").
struct V4L2ColourTests {
    @Test func aWebcamsDefaults_followFromItsColourSpace() {
        // UVC webcams: SRGB colour space, everything else default; YUV is limited range.
        #expect(
            V4L2Colour.description(colorspace: 8, transfer: 0, encoding: 0, quantization: 0, isYUV: true)
                == ColourDescription(primaries: .bt709, transfer: .srgb, matrix: .bt601, range: .limited))
        // SMPTE 170M (standard definition), and Rec. 709 with its own matrix.
        #expect(V4L2Colour.description(colorspace: 1, transfer: 0, encoding: 0, quantization: 0, isYUV: true) == .bt601)
        #expect(V4L2Colour.description(colorspace: 3, transfer: 0, encoding: 0, quantization: 0, isYUV: true) == .bt709)
        // JPEG's colour space is full range.
        #expect(V4L2Colour.description(colorspace: 7, transfer: 0, encoding: 0, quantization: 0, isYUV: true)?.range == .full)
    }

    @Test func explicitFields_winOverTheDefaults_andPQIsHDR10() {
        #expect(V4L2Colour.description(colorspace: 10, transfer: 7, encoding: 6, quantization: 2, isYUV: true) == .bt2020PQ)
        let linear = V4L2Colour.description(colorspace: 3, transfer: 5, encoding: 2, quantization: 1, isYUV: false)
        #expect(linear == ColourDescription(primaries: .bt709, transfer: .linear, matrix: .bt709, range: .full))
    }

    @Test func whatTheDriverDoesNotSay_orH273CannotCarry_isNotDeclared() {
        #expect(V4L2Colour.description(colorspace: 0, transfer: 0, encoding: 0, quantization: 0, isYUV: true) == nil, "DEFAULT")
        #expect(V4L2Colour.description(colorspace: 11, transfer: 0, encoding: 0, quantization: 0, isYUV: false) == nil, "RAW")
        #expect(V4L2Colour.description(colorspace: 12, transfer: 6, encoding: 0, quantization: 0, isYUV: true) == nil, "DCI-P3")
        #expect(V4L2Colour.description(colorspace: 3, transfer: 4, encoding: 0, quantization: 0, isYUV: true) == nil, "SMPTE 240M transfer")
    }
}
