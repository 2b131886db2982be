import CV4L2
import FleetCore
import Glibc

/// One streaming run of a V4L2 device: the negotiated format, its mmap buffers, and
/// STREAMON/STREAMOFF. Created and torn down by `V4L2Camera` under its lock.
final class V4L2Stream {
    struct MappedBuffer {
        let start: UnsafeMutableRawPointer
        let length: Int
    }

    let handle: V4L2Handle
    /// What the driver actually set (it may pad lines).
    let layout: FrameLayout
    let driverBytesPerLine: Int
    let sizeImage: Int
    private(set) var buffers: [MappedBuffer] = []
    private var streaming = false
    /// When VIDIOC_STREAMON was called, CLOCK_MONOTONIC ns.
    private(set) var startedMonotonic: UInt64 = 0

    /// Negotiates `format` at `framesPerSecond`, maps `bufferCount` buffers, queues them and
    /// starts streaming: at once, or at `streamOnAt` (CLOCK_MONOTONIC ns) once all is ready, so
    /// the instant is not moved by the setup's own time.
    init(
        handle: V4L2Handle, format: VideoFormat, framesPerSecond: Double, bufferCount: Int, deviceID: String,
        streamOnAt: UInt64? = nil
    )
        throws(CaptureError)
    {
        self.handle = handle
        var negotiated = v4l2_format()
        negotiated.type = CAPFLEET_V4L2_BUF_TYPE_VIDEO_CAPTURE
        negotiated.fmt.pix.width = UInt32(format.width)
        negotiated.fmt.pix.height = UInt32(format.height)
        negotiated.fmt.pix.pixelformat = format.pixelFormat.v4l2Code
        negotiated.fmt.pix.field = CAPFLEET_V4L2_FIELD_ANY
        do throws(V4L2Error) {
            try handle.ioctl(CAPFLEET_VIDIOC_S_FMT, &negotiated, "VIDIOC_S_FMT")
        } catch {
            throw .deviceFailed(device: deviceID, error)
        }
        let pix = negotiated.fmt.pix
        guard pix.width == UInt32(format.width), pix.height == UInt32(format.height), pix.pixelformat == format.pixelFormat.v4l2Code else {
            throw .unsupportedFormat(
                device: deviceID, requested: format.label,
                supported: ["the driver chose \(pix.width)x\(pix.height) \(PixelFormat(v4l2Code: pix.pixelformat)) instead"])
        }
        var negotiatedLayout = FrameLayout(format)
        // What the driver says of its colour travels with every frame (frames.md, "Colour and depth").
        if negotiatedLayout.colour == nil { negotiatedLayout.colour = V4L2Colour.description(of: pix, pixelFormat: format.pixelFormat) }
        layout = negotiatedLayout
        driverBytesPerLine = Int(pix.bytesperline)
        sizeImage = Int(pix.sizeimage)
        try Self.setFrameRate(handle, framesPerSecond, deviceID: deviceID)
        do throws(V4L2Error) {
            try mapBuffers(count: bufferCount)
            for index in buffers.indices { try queue(index: UInt32(index)) }
            var type = Int32(CAPFLEET_V4L2_BUF_TYPE_VIDEO_CAPTURE)
            if let streamOnAt { MonotonicTime.sleep(until: streamOnAt) }
            startedMonotonic = MonotonicTime.now()
            try handle.ioctl(CAPFLEET_VIDIOC_STREAMON, &type, "VIDIOC_STREAMON")
            streaming = true
        } catch {
            release()
            throw .deviceFailed(device: deviceID, error)
        }
    }

    deinit { release() }

    /// Sets the frame interval (VIDIOC_S_PARM); works while streaming on drivers that allow it.
    static func setFrameRate(_ handle: V4L2Handle, _ framesPerSecond: Double, deviceID: String) throws(CaptureError) {
        var parameters = v4l2_streamparm()
        parameters.type = CAPFLEET_V4L2_BUF_TYPE_VIDEO_CAPTURE
        guard handle.attempt(CAPFLEET_VIDIOC_G_PARM, &parameters) == nil,
            parameters.parm.capture.capability & CAPFLEET_V4L2_CAP_TIMEPERFRAME != 0
        else { return }
        let interval = Self.interval(for: framesPerSecond)
        parameters.parm.capture.timeperframe = v4l2_fract(numerator: interval.numerator, denominator: interval.denominator)
        do throws(V4L2Error) {
            try handle.ioctl(CAPFLEET_VIDIOC_S_PARM, &parameters, "VIDIOC_S_PARM")
        } catch {
            throw .deviceFailed(device: deviceID, error)
        }
    }

    /// 12.5 fps → 2/25 s: the frame interval as a reduced fraction in milliseconds' precision.
    static func interval(for framesPerSecond: Double) -> (numerator: UInt32, denominator: UInt32) {
        var numerator = UInt32(1000)
        var denominator = UInt32(max(1, (framesPerSecond * 1000).rounded()))
        var a = numerator, b = denominator
        while b != 0 { (a, b) = (b, a % b) }
        numerator /= a
        denominator /= a
        return (numerator, denominator)
    }

    private func mapBuffers(count: Int) throws(V4L2Error) {
        var request = v4l2_requestbuffers()
        request.count = UInt32(count)
        request.type = CAPFLEET_V4L2_BUF_TYPE_VIDEO_CAPTURE
        request.memory = CAPFLEET_V4L2_MEMORY_MMAP
        try handle.ioctl(CAPFLEET_VIDIOC_REQBUFS, &request, "VIDIOC_REQBUFS")
        for index in 0..<request.count {
            var buffer = v4l2_buffer()
            buffer.type = CAPFLEET_V4L2_BUF_TYPE_VIDEO_CAPTURE
            buffer.memory = CAPFLEET_V4L2_MEMORY_MMAP
            buffer.index = index
            try handle.ioctl(CAPFLEET_VIDIOC_QUERYBUF, &buffer, "VIDIOC_QUERYBUF")
            let start = v4l2_mmap(nil, Int(buffer.length), PROT_READ | PROT_WRITE, MAP_SHARED, handle.fd, Int64(buffer.m.offset))
            guard let start, start != MAP_FAILED else { throw V4L2Error(call: "mmap", path: handle.path, errno: Glibc.errno) }
            buffers.append(MappedBuffer(start: start, length: Int(buffer.length)))
        }
    }

    func queue(index: UInt32) throws(V4L2Error) {
        var buffer = v4l2_buffer()
        buffer.type = CAPFLEET_V4L2_BUF_TYPE_VIDEO_CAPTURE
        buffer.memory = CAPFLEET_V4L2_MEMORY_MMAP
        buffer.index = index
        try handle.ioctl(CAPFLEET_VIDIOC_QBUF, &buffer, "VIDIOC_QBUF")
    }

    /// A filled buffer, or nil when none is ready yet. The driver is asked first, so that
    /// "not yet" never becomes a failed DQBUF, which libv4l2 prints as an error (BufferReadiness).
    func dequeue() throws(V4L2Error) -> v4l2_buffer? {
        guard BufferReadiness.of(handle.fd).mayDequeue else { return nil }
        var buffer = v4l2_buffer()
        buffer.type = CAPFLEET_V4L2_BUF_TYPE_VIDEO_CAPTURE
        buffer.memory = CAPFLEET_V4L2_MEMORY_MMAP
        if let error = handle.attempt(CAPFLEET_VIDIOC_DQBUF, &buffer) {
            if error == EAGAIN { return nil }
            throw V4L2Error(call: "VIDIOC_DQBUF", path: handle.path, errno: error)
        }
        return buffer
    }

    /// Copies a dequeued buffer into `destination` with tight lines (drivers may pad them);
    /// returns the bytes written.
    func copy(_ buffer: v4l2_buffer, into destination: UnsafeMutableRawPointer, capacity: Int) -> Int {
        let source = UnsafeRawPointer(buffers[Int(buffer.index)].start)
        let used = min(Int(buffer.bytesused), buffers[Int(buffer.index)].length)
        let tight = layout.pixelFormat.frameByteCount(width: layout.width, height: layout.height)
        guard let tight, tight <= capacity else {
            let count = min(used, capacity)
            destination.copyMemory(from: source, byteCount: count)
            return count
        }
        if driverBytesPerLine == layout.bytesPerLine || driverBytesPerLine == 0 {
            destination.copyMemory(from: source, byteCount: min(tight, used))
            return min(tight, used)
        }
        // Padded lines: copy each line of each plane without its padding.
        let tightLines = tight / layout.bytesPerLine
        for line in 0..<tightLines where (line + 1) * driverBytesPerLine <= used {
            (destination + line * layout.bytesPerLine).copyMemory(from: source + line * driverBytesPerLine, byteCount: layout.bytesPerLine)
        }
        return tight
    }

    func release() {
        if streaming {
            var type = Int32(CAPFLEET_V4L2_BUF_TYPE_VIDEO_CAPTURE)
            _ = handle.attempt(CAPFLEET_VIDIOC_STREAMOFF, &type)
            streaming = false
        }
        for buffer in buffers { _ = v4l2_munmap(buffer.start, buffer.length) }
        if !buffers.isEmpty {
            var request = v4l2_requestbuffers()
            request.type = CAPFLEET_V4L2_BUF_TYPE_VIDEO_CAPTURE
            request.memory = CAPFLEET_V4L2_MEMORY_MMAP
            _ = handle.attempt(CAPFLEET_VIDIOC_REQBUFS, &request)
        }
        buffers = []
    }
}
