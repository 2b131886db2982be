import FleetCore

/// The agent's own zoom for devices that have neither a zoom control nor crop selection:
/// a centred crop of `1/factor` of the frame, scaled back to full size (nearest
/// neighbour, so it costs one pass over the output). Raw YUYV, UYVY, GREY and NV12 only.
struct CentredCropScaler {
    let layout: FrameLayout

    static func supports(_ pixelFormat: PixelFormat) -> Bool {
        ["YUYV", "UYVY", "YVYU", "VYUY", "GREY", "NV12", "NV21"].contains(pixelFormat.fourCC)
    }

    /// Source column for each output column, and source row for each output row.
    private func sourceIndices(count: Int, factor: Double) -> [Int] {
        let visible = Double(count) / factor
        let start = (Double(count) - visible) / 2
        return (0..<count).map { min(count - 1, Int(start + (Double($0) + 0.5) * visible / Double(count))) }
    }

    /// Writes the zoomed frame of `source` into `destination`; both hold one frame of `layout`.
    func scale(from source: UnsafeRawPointer, to destination: UnsafeMutableRawPointer, factor: Double) {
        let width = layout.width, height = layout.height, stride = layout.bytesPerLine
        let rows = sourceIndices(count: height, factor: factor)
        let src = source.assumingMemoryBound(to: UInt8.self)
        let dst = destination.assumingMemoryBound(to: UInt8.self)
        switch layout.pixelFormat.fourCC {
        case "GREY":
            let columns = sourceIndices(count: width, factor: factor)
            for y in 0..<height { copyRow(src + rows[y] * stride, dst + y * stride, columns: columns, bytesPerPixel: 1) }
        case "NV12", "NV21":
            let columns = sourceIndices(count: width, factor: factor)
            for y in 0..<height { copyRow(src + rows[y] * stride, dst + y * stride, columns: columns, bytesPerPixel: 1) }
            // Chroma: interleaved pairs at half resolution in both directions.
            let chromaRows = sourceIndices(count: height / 2, factor: factor)
            let chromaColumns = sourceIndices(count: width / 2, factor: factor)
            let srcChroma = src + stride * height, dstChroma = dst + stride * height
            for y in 0..<height / 2 { copyRow(srcChroma + chromaRows[y] * stride, dstChroma + y * stride, columns: chromaColumns, bytesPerPixel: 2) }
        default:
            // Packed 4:2:2: scale whole macropixels (two pixels, four bytes) so chroma stays paired.
            let columns = sourceIndices(count: width / 2, factor: factor)
            for y in 0..<height { copyRow(src + rows[y] * stride, dst + y * stride, columns: columns, bytesPerPixel: 4) }
        }
    }

    private func copyRow(_ source: UnsafePointer<UInt8>, _ destination: UnsafeMutablePointer<UInt8>, columns: [Int], bytesPerPixel: Int) {
        for (x, column) in columns.enumerated() {
            for byte in 0..<bytesPerPixel { destination[x * bytesPerPixel + byte] = source[column * bytesPerPixel + byte] }
        }
    }
}
