import FleetCore
import Foundation
import Testing

@testable import FleetImaging

/// Deep grey frames: 16-bit PNG read back by an independent decoder (Python's zlib and
/// struct), and Y10/Y12/Y16 frames turned into pictures.
struct Grey16Tests {
    /// A PNG reader in the Python standard library: checks the signature and every CRC,
    /// inflates the IDATs, undoes all five filters, and prints the header, the sBIT chunk
    /// (or -) and the samples.
    static let pythonReader = #"""
        import struct, sys, zlib
        data = sys.stdin.buffer.read()
        assert data[:8] == b'\x89PNG\r\n\x1a\n', 'signature'
        pos, chunks = 8, []
        while pos < len(data):
            length, kind = struct.unpack('>I4s', data[pos:pos + 8])
            body = data[pos + 8:pos + 8 + length]
            crc, = struct.unpack('>I', data[pos + 8 + length:pos + 12 + length])
            assert crc == zlib.crc32(kind + body) & 0xffffffff, 'CRC of %r' % kind
            chunks.append((kind.decode(), body))
            pos += 12 + length
        assert chunks[0][0] == 'IHDR' and chunks[-1][0] == 'IEND', [c[0] for c in chunks]
        width, height, depth, colour, method, filtering, interlace = struct.unpack('>IIBBBBB', chunks[0][1])
        sbit = [body[0] for kind, body in chunks if kind == 'sBIT']
        raw = zlib.decompress(b''.join(body for kind, body in chunks if kind == 'IDAT'))
        bpp, stride = 2, width * 2
        assert len(raw) == height * (stride + 1), 'inflated size'
        rows, previous = [], bytearray(stride)
        for y in range(height):
            kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b, c = previous[i], previous[i - bpp] if i >= bpp else 0
                if kind == 1: line[i] = (line[i] + a) & 255
                elif kind == 2: line[i] = (line[i] + b) & 255
                elif kind == 3: line[i] = (line[i] + (a + b) // 2) & 255
                elif kind == 4:
                    p = a + b - c
                    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                    line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
                else: assert kind == 0, 'filter %d' % kind
            rows.append(line)
            previous = line
        samples = [v for line in rows for v in struct.unpack('>%dH' % width, bytes(line))]
        print(width, height, depth, colour, interlace, sbit[0] if sbit else '-')
        print(' '.join(map(str, samples)))
        """#

    static func decodeWithPython(_ png: [UInt8]) throws -> (header: String, samples: [UInt16]) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = ["-c", pythonReader]
        let input = Pipe(), output = Pipe(), errors = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        input.fileHandleForWriting.write(Data(png))
        try input.fileHandleForWriting.close()
        let printed = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let complaint = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "python3 could not read the PNG: \(complaint)")
        let lines = printed.split(separator: "\n").map(String.init)
        return (lines.first ?? "", (lines.dropFirst().first ?? "").split(separator: " ").compactMap { UInt16($0) })
    }

    /// Samples with every bit pattern's worth of variety: odd size, both bytes varying, the extremes.
    static func samples(width: Int, height: Int) -> [UInt16] {
        (0..<width * height).map { index in
            index == 0 ? 0 : index == 1 ? 0xFFFF : UInt16(truncatingIfNeeded: index &* 40_503 &+ (index / width) &* 977)
        }
    }

    static func littleEndianBytes(_ samples: [UInt16]) -> [UInt8] { samples.flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] } }

    @Test func grey16PNG_decodesInPython_toTheFramesExactSamples() throws {
        let (width, height) = (37, 23)
        let samples = Self.samples(width: width, height: height)
        let png = try Self.littleEndianBytes(samples).withUnsafeBytes { bytes in
            try PNGEncoder.encodeGrey16(width: width, height: height, littleEndianSamples: bytes)
        }
        let decoded = try Self.decodeWithPython(png)
        #expect(decoded.header == "37 23 16 0 0 -", "16-bit greyscale, not interlaced, no sBIT for full 16-bit samples")
        #expect(decoded.samples == samples)
    }

    @Test func grey16PNG_ofA12BitSensor_saysSoInSBIT() throws {
        let samples: [UInt16] = [0, 1 << 4, 2048 << 4, 4095 << 4, 3067 << 4, 100 << 4]
        let png = try Self.littleEndianBytes(samples).withUnsafeBytes { bytes in
            try PNGEncoder.encodeGrey16(width: 3, height: 2, littleEndianSamples: bytes, significantBits: 12)
        }
        let decoded = try Self.decodeWithPython(png)
        #expect(decoded.header == "3 2 16 0 0 12")
        #expect(decoded.samples == samples, "samples stay in the high bits, as PNG wants them")
    }

    @Test func grey16PNG_refusesAShortPayload() {
        #expect(throws: ImagingError.payloadTooShort(pixelFormat: "Y16", width: 4, height: 4, needed: 32, got: 30)) {
            try [UInt8](repeating: 0, count: 30).withUnsafeBytes { try PNGEncoder.encodeGrey16(width: 4, height: 4, littleEndianSamples: $0) }
        }
    }

    /// One row of four samples in a 16-bit grey format, converted at its own size.
    static func greys(_ fourCC: String, _ words: [UInt16]) throws -> [UInt8] {
        let picture = try Self.littleEndianBytes(words).withUnsafeBytes { bytes in
            try FrameConversion.rgb(
                from: RawFrame(bytes: bytes, pixelFormat: PixelFormat(fourCC), width: words.count, height: 1),
                width: words.count, height: 1)
        }
        #expect((0..<words.count).allSatisfy { picture[$0, 0].red == picture[$0, 0].green && picture[$0, 0].green == picture[$0, 0].blue })
        return (0..<words.count).map { picture[$0, 0].green }
    }

    @Test func deepGreyFrames_showTheirTopEightSignificantBits() throws {
        #expect(try Self.greys("Y16", [0, 0x8000, 4095 << 4, 0x12F0]) == [0, 128, 255, 0x12])
        #expect(try Self.greys("Y12", [0, 0x800, 0xFFF, 0x123]) == [0, 128, 255, 0x12])
        #expect(try Self.greys("Y10", [0, 0x200, 0x3FF, 0xFFFF]) == [0, 128, 255, 255], "bits above the tenth show white")
        #expect(["Y10", "Y12", "Y16"].allSatisfy { FrameConversion.supportedFourCCs.contains($0) && FrameRenderer.canRender(PixelFormat($0)) })
    }

    @Test func y16Preview_isShrunkAndGrey() throws {
        // A 4:3 Y16 frame: the left half at the synthetic camera's 12-bit white bar level, the right half black.
        let (width, height) = (1152, 864)
        var bytes = [UInt8](repeating: 0, count: PixelFormat.y16.frameByteCount(width: width, height: height)!)
        let bar = UInt16(3067) << 4
        for y in 0..<height {
            for x in 0..<width / 2 {
                bytes[(y * width + x) * 2] = UInt8(bar & 0xFF)
                bytes[(y * width + x) * 2 + 1] = UInt8(bar >> 8)
            }
        }
        let picture = try bytes.withUnsafeBytes { raw in
            try FrameRenderer().picture(of: RawFrame(bytes: raw, pixelFormat: .y16, width: width, height: height), width: 320)
        }
        #expect(picture.width == 320 && picture.height == 240)
        #expect(picture[40, 120] == RGB(191, 191, 191) && picture[280, 120] == .black, "\(picture[40, 120]) \(picture[280, 120])")
    }
}
