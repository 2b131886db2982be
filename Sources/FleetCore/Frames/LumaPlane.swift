/// The luma (Y) samples of a raw frame, addressed by pixel, as 8-bit values: interleaved
/// YUYV (every other byte), planar NV12/GREY, and the formats of 16-bit little-endian words
/// (Y10, Y12, Y16, Z16, and P010/P016's luma plane), whose samples are read and written
/// through their top eight significant bits.
public struct LumaPlane {
    public let base: UnsafeMutableRawPointer
    public let width: Int
    public let height: Int
    let pixelStride: Int
    let rowStride: Int
    /// Words: a sample is a 16-bit word, of which the 8-bit value is the eight bits from `wideShift` up.
    let isWide: Bool
    let wideShift: Int

    public init?(base: UnsafeMutableRawPointer, pixelFormat: PixelFormat, width: Int, height: Int) {
        switch pixelFormat {
        case .yuyv: (pixelStride, rowStride, isWide, wideShift) = (2, width * 2, false, 0)
        case .nv12, .grey: (pixelStride, rowStride, isWide, wideShift) = (1, width, false, 0)
        case .y16, .z16, .p010, .p016: (pixelStride, rowStride, isWide, wideShift) = (2, width * 2, true, 8)
        case .y12: (pixelStride, rowStride, isWide, wideShift) = (2, width * 2, true, 4)
        case .y10: (pixelStride, rowStride, isWide, wideShift) = (2, width * 2, true, 2)
        default: return nil
        }
        self.base = base
        self.width = width
        self.height = height
    }

    @inline(__always)
    public subscript(x: Int, y: Int) -> UInt8 {
        get {
            guard isWide else { return base.load(fromByteOffset: y * rowStride + x * pixelStride, as: UInt8.self) }
            let word = UInt16(littleEndian: base.loadUnaligned(fromByteOffset: y * rowStride + x * pixelStride, as: UInt16.self))
            return UInt8(truncatingIfNeeded: word >> wideShift)
        }
        nonmutating set {
            let offset = y * rowStride + x * pixelStride
            if isWide {
                // The bits below are cleared, so a sample written here is valid at any bit depth
                // that keeps its samples in the high bits (12-bit sensors in Y16, P010).
                base.storeBytes(of: (UInt16(newValue) << wideShift).littleEndian, toByteOffset: offset, as: UInt16.self)
            } else {
                base.storeBytes(of: newValue, toByteOffset: offset, as: UInt8.self)
            }
        }
    }

    /// Reads row `y` into `destination` (at most `width` values, 8 bits each): a copy for
    /// planes of one byte a pixel, a strided load for the others.
    public func read(row y: Int, into destination: UnsafeMutableBufferPointer<UInt8>) {
        guard y >= 0, y < height, let target = destination.baseAddress else { return }
        let count = min(destination.count, width)
        let line = UnsafeRawPointer(base + y * rowStride)
        if pixelStride == 1 {
            target.update(from: line.assumingMemoryBound(to: UInt8.self), count: count)
        } else if isWide {
            for column in 0..<count {
                let word = UInt16(littleEndian: line.loadUnaligned(fromByteOffset: column * 2, as: UInt16.self))
                target[column] = UInt8(truncatingIfNeeded: word >> wideShift)
            }
        } else {
            // YUYV's luma bytes.
            let bytes = line.assumingMemoryBound(to: UInt8.self)
            for column in 0..<count { target[column] = bytes[column * pixelStride] }
        }
    }

    /// Writes `values` into row `y` from column `x` on, one 8-bit value a pixel, clipped to the
    /// plane: a copy for planes of one byte a pixel, a strided store for the others.
    public func write(row values: UnsafeBufferPointer<UInt8>, x: Int, y: Int) {
        guard y >= 0, y < height, let source = values.baseAddress else { return }
        let first = max(x, 0), last = min(x + values.count, width)
        guard first < last else { return }
        let line = base + y * rowStride
        if pixelStride == 1 {
            (line + first).copyMemory(from: source + (first - x), byteCount: last - first)
        } else if isWide {
            for column in first..<last {
                line.storeBytes(of: (UInt16(source[column - x]) << wideShift).littleEndian, toByteOffset: column * 2, as: UInt16.self)
            }
        } else {
            let bytes = line.assumingMemoryBound(to: UInt8.self)
            for column in first..<last { bytes[column * pixelStride] = source[column - x] }
        }
    }

    public func fill(x: Int, y: Int, width w: Int, height h: Int, value: UInt8) {
        let x1 = min(x + w, width), y1 = min(y + h, height)
        guard x < x1, y < y1 else { return }
        for row in max(y, 0)..<y1 {
            for col in max(x, 0)..<x1 { self[col, row] = value }
        }
    }
}
