/// Least squares of exposure starts against lines counted, over a window of frames: the
/// slope is the line time in fleet ns. Bounded jitter on each start averages out over the
/// window's thousands of lines, where one frame's interval would carry all of it.
struct LineTimeFit: Sendable {
    private var points: [(lines: Int64, time: UInt64)] = []
    /// Fewer points than this give a slope noisier than the nominal line time is wrong.
    static let minimumPoints = 16

    mutating func removeAll() { points.removeAll() }

    mutating func append(lines: Int64, time: UInt64, window: Int) {
        points.append((lines, time))
        if points.count > max(window, Self.minimumPoints) { points.removeFirst(points.count - max(window, Self.minimumPoints)) }
    }

    var slope: Double? {
        guard points.count >= Self.minimumPoints, let first = points.first else { return nil }
        // Relative to the first point, so that fleet times near 2^61 keep their nanoseconds.
        let xs = points.map { Double($0.lines - first.lines) }
        let ys = points.map { Double(Int64(bitPattern: $0.time &- first.time)) }
        let count = Double(points.count)
        let meanX = xs.reduce(0, +) / count, meanY = ys.reduce(0, +) / count
        var covariance = 0.0, variance = 0.0
        for (x, y) in zip(xs, ys) {
            covariance += (x - meanX) * (y - meanY)
            variance += (x - meanX) * (x - meanX)
        }
        return variance > 0 ? covariance / variance : nil
    }
}
