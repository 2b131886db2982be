/// The luma (Y) samples of a raw frame, addressed by pixel, for the formats whose luma
/// is 8-bit: interleaved YUYV (every other byte) and planar NV12/GREY.
public struct LumaPlane {
    public let base: UnsafeMutableRawPointer
    public let width: Int
    public let height: Int
    let pixelStride: Int
    let rowStride: Int

    public init?(base: UnsafeMutableRawPointer, pixelFormat: PixelFormat, width: Int, height: Int) {
        switch pixelFormat {
        case .yuyv: (pixelStride, rowStride) = (2, width * 2)
        case .nv12, .grey: (pixelStride, rowStride) = (1, width)
        default: return nil
        }
        self.base = base
        self.width = width
        self.height = height
    }

    @inline(__always)
    public subscript(x: Int, y: Int) -> UInt8 {
        get { base.load(fromByteOffset: y * rowStride + x * pixelStride, as: UInt8.self) }
        nonmutating set { base.storeBytes(of: newValue, toByteOffset: y * rowStride + x * pixelStride, as: UInt8.self) }
    }

    public func fill(x: Int, y: Int, width w: Int, height h: Int, value: UInt8) {
        let x1 = min(x + w, width), y1 = min(y + h, height)
        guard x < x1, y < y1 else { return }
        for row in max(y, 0)..<y1 {
            for col in max(x, 0)..<x1 { self[col, row] = value }
        }
    }
}
