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
            // Packed 4:2:2: luma per pixel, chroma from the macropixel (two pixels, four bytes)
            // the first of each output pair comes from, so colours stay paired.
            let columns = sourceIndices(count: width, factor: factor)
            let lumaFirst = layout.pixelFormat.fourCC == "YUYV" || layout.pixelFormat.fourCC == "YVYU"
            let (luma0, luma1, chroma0, chroma1) = lumaFirst ? (0, 2, 1, 3) : (1, 3, 0, 2)
            for y in 0..<height {
                let source = src + rows[y] * stride, destination = dst + y * stride
                for pair in 0..<width / 2 {
                    let left = columns[2 * pair], right = columns[2 * pair + 1]
                    let out = destination + 4 * pair
                    out[luma0] = source[4 * (left / 2) + 2 * (left % 2) + luma0]
                    out[luma1] = source[4 * (right / 2) + 2 * (right % 2) + luma0]
                    out[chroma0] = source[4 * (left / 2) + chroma0]
                    out[chroma1] = source[4 * (left / 2) + chroma1]
                }
            }
        }
    }

    private func copyRow(_ source: UnsafePointer<UInt8>, _ destination: UnsafeMutablePointer<UInt8>, columns: [Int], bytesPerPixel: Int) {
        for (x, column) in columns.enumerated() {
            for byte in 0..<bytesPerPixel { destination[x * bytesPerPixel + byte] = source[column * bytesPerPixel + byte] }
        }
    }
}
