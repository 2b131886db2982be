/// The luma (Y) samples of a raw frame, addressed by pixel, as 8-bit values: interleaved
/// YUYV (every other byte), planar NV12/GREY, and Y16 (16-bit little-endian grey), whose
/// samples are read and written through their high byte.
public struct LumaPlane {
    public let base: UnsafeMutableRawPointer
    public let width: Int
    public let height: Int
    let pixelStride: Int
    let rowStride: Int
    /// Y16: a sample is a 16-bit word, of which the 8-bit value is the high byte.
    let isWide: Bool

    public init?(base: UnsafeMutableRawPointer, pixelFormat: PixelFormat, width: Int, height: Int) {
        switch pixelFormat {
        case .yuyv: (pixelStride, rowStride, isWide) = (2, width * 2, false)
        case .nv12, .grey: (pixelStride, rowStride, isWide) = (1, width, false)
        case .y16: (pixelStride, rowStride, isWide) = (2, width * 2, true)
        default: return nil
        }
        self.base = base
        self.width = width
        self.height = height
    }

    @inline(__always)
    public subscript(x: Int, y: Int) -> UInt8 {
        get { base.load(fromByteOffset: y * rowStride + x * pixelStride + (isWide ? 1 : 0), as: UInt8.self) }
        nonmutating set {
            let offset = y * rowStride + x * pixelStride
            if isWide {
                // The low byte is cleared, so a sample written here is valid at any bit depth
                // that keeps its samples in the high bits (12-bit sensors in Y16).
                base.storeBytes(of: (UInt16(newValue) << 8).littleEndian, toByteOffset: offset, as: UInt16.self)
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
        } else {
            // 8-bit values: YUYV's luma bytes, or the high byte of a Y16 word.
            let bytes = line.assumingMemoryBound(to: UInt8.self) + (isWide ? 1 : 0)
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
                line.storeBytes(of: (UInt16(source[column - x]) << 8).littleEndian, toByteOffset: column * 2, as: UInt16.self)
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
