import FleetCapture
import FleetCore
import Foundation
import Testing

@testable import FleetEncoding

/// The decoder a still from an encoded pre-roll goes through (stills.md, "From the past"): the
/// agent's own encoder's packets, from a key frame through the frame asked for, decode and repack
/// into the camera's format close to the frame the camera made, its stamp readable.
struct VideoDecoderTests {
    static func frames(_ pixelFormat: PixelFormat, count: Int) -> [[UInt8]] {
        var renderer = TestPatternRenderer(
            format: VideoFormat(pixelFormat: pixelFormat, width: 320, height: 240, frameRateRanges: [FrameRateRange(min: 30, max: 30)]))
        return (0..<count).map { number in
            var bytes = [UInt8](repeating: 0, count: renderer.frameBytes)
            bytes.withUnsafeMutableBytes { renderer.render(frameNumber: UInt32(100 + number), zoom: 1, into: $0.baseAddress!) }
            return bytes
        }
    }

    static func psnr(_ a: [UInt8], _ b: [UInt8]) -> Double {
        let squared = zip(a, b).reduce(0.0) { $0 + pow(Double($1.0) - Double($1.1), 2) } / Double(max(a.count, 1))
        return squared == 0 ? 99 : 10 * log10(255 * 255 / squared)
    }

    @Test(arguments: [(VideoCodec.h264, "NV12"), (.h264, "YUYV"), (.hevc, "NV12"), (.ffv1, "YUYV")])
    func theEncodersPackets_decodeBackIntoTheCamerasFormat(codec: VideoCodec, fourCC: String) throws {
        let format = PixelFormat(fourCC)
        let frames = Self.frames(format, count: 12)
        let encoder = try VideoEncoder(
            choice: EncoderChoice.software(for: codec)!, encoding: TakeEncoding(codec: codec, gop: 30),
            source: VideoEncoder.Source(pixelFormat: fourCC, width: 320, height: 240, frameRate: 30), threads: 1, preset: "ultrafast")
        var packets: [(bytes: [UInt8], index: Int64, key: Bool)] = []
        for (index, frame) in frames.enumerated() {
            try frame.withUnsafeBytes {
                try encoder.encode($0.baseAddress!, count: $0.count, frameIndex: Int64(index), forceKey: index == 0) { packet in
                    packets.append((Array(packet.bytes), packet.frameIndex, packet.isKeyFrame))
                }
            }
        }
        try encoder.drain { packets.append((Array($0.bytes), $0.frameIndex, $0.isKeyFrame)) }
        #expect(packets.first?.key == true && packets.map(\.index) == Array(0..<12), "one packet a frame, in order, from a key frame")

        // Frame 7: the packets from the key frame through it.
        let decoder = try VideoDecoder(codec: codec, codecConfig: encoder.codecConfig, width: 320, height: 240)
        let size = try #require(VideoDecoder.Picture.frameBytes(fourCC, width: 320, height: 240))
        let storage = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 16)
        defer { storage.deallocate() }
        var made = false
        let keep = { (decoded: VideoDecoder.Picture) throws(EncodingError) in
            guard decoded.pts == 7 else { return }
            try decoded.repack(into: storage, pixelFormat: fourCC)
            made = true
        }
        for packet in packets.prefix(8) { try packet.bytes.withUnsafeBytes { try decoder.decode($0, pts: packet.index, deliver: keep) } }
        if !made { try decoder.drain(deliver: keep) }
        try #require(made, "the decoder gives frame 7")
        var picture = [UInt8](UnsafeRawBufferPointer(start: storage, count: size))
        let quality = Self.psnr(picture, frames[7])
        let stamp = picture.withUnsafeMutableBytes { bytes in
            LumaPlane(base: bytes.baseAddress!, pixelFormat: format, width: 320, height: 240).flatMap { FrameNumberStamp.read(from: $0) }
        }
        print(
            "decoder: \(codec.rawValue) from \(fourCC): frame 7 back at \(String(format: "%.1f", quality)) dB, stamp \(stamp.map(String.init) ?? "-")"
        )
        #expect(stamp == 107, "its stamp is the frame's number")
        #expect(codec == .ffv1 ? quality == 99 : quality > 30, "close to the frame the camera made: \(quality) dB")
    }

    @Test func aDeeperPicture_isNotRepacked_andRawHasNoDecoder() throws {
        #expect(throws: EncodingError.decoderMissing(codec: .raw)) { try VideoDecoder(codec: .raw, codecConfig: [], width: 16, height: 16) }
        #expect(VideoDecoder.Picture.frameBytes("P010", width: 16, height: 16) == nil)
    }
}
