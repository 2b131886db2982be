import FleetSystem
import Glibc

/// Whether a V4L2 capture node has a filled buffer for VIDIOC_DQBUF, asked with a poll that
/// does not wait. A stream dequeues only when the driver has something to give: libv4l2
/// prints every failed DQBUF as `libv4l2: error dequeuing buf: …` (to `v4l2_log_file`, else
/// stderr), EAGAIN included, though from a non-blocking node EAGAIN only means "not yet".
/// Asking first keeps the ordinary "not yet" — the capture thread's poll timed out, was
/// woken or interrupted, or the stream restarted since it returned — away from DQBUF, while
/// a real failure still reaches it and is reported as what it is.
enum BufferReadiness: Equatable {
    /// A buffer is filled: DQBUF returns it.
    case filled
    /// Nothing yet: DQBUF would fail with EAGAIN.
    case notYet
    /// The node reports an error or a hang-up (or cannot be polled): DQBUF says which.
    case failing

    /// Asks `fd` without waiting.
    static func of(_ fd: Int32) -> BufferReadiness {
        var descriptor = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        do throws(SystemCallError) {
            _ = try systemCall("poll", on: "capture node fd \(fd)") { poll(&descriptor, 1, 0) }
        } catch {
            return .failing
        }
        if descriptor.revents & Int16(POLLERR | POLLHUP | POLLNVAL) != 0 { return .failing }
        return descriptor.revents & Int16(POLLIN) != 0 ? .filled : .notYet
    }

    /// DQBUF has something to say: a buffer, or the error.
    var mayDequeue: Bool { self != .notYet }
}
