import FleetSystem
import Glibc

/// A pipe a capture thread polls beside its device, so another thread can wake it at once:
/// `stop` does not wait out a poll's timeout or a retry's second.
final class WakePipe: Sendable {
    private let readEnd: Int32
    private let writeEnd: Int32

    /// `purpose` names what the pipe serves in errors (the device node).
    init(for purpose: String) throws(V4L2Error) {
        var ends: [Int32] = [0, 0]
        do throws(SystemCallError) {
            try systemCall("pipe", on: "the capture thread's wake-up for \(purpose)") { pipe(&ends) }
            for end in ends {
                try systemCall("fcntl(F_SETFD)", on: "the capture thread's wake-up for \(purpose)") { fcntl(end, F_SETFD, FD_CLOEXEC) }
                try systemCall("fcntl(F_SETFL)", on: "the capture thread's wake-up for \(purpose)") { fcntl(end, F_SETFL, O_NONBLOCK) }
            }
        } catch {
            for end in ends where end > 0 { close(end) }
            throw V4L2Error(error)
        }
        readEnd = ends[0]
        writeEnd = ends[1]
    }

    deinit {
        close(readEnd)
        close(writeEnd)
    }

    /// Wakes the waiter (now, or at its next wait). A full pipe already wakes it: EAGAIN is
    /// success here.
    func signal() {
        var byte: UInt8 = 1
        _ = write(writeEnd, &byte, 1)
    }

    /// Empties the pipe once the waiter has stopped, so the next run starts unwoken.
    func drain() {
        var bytes = [UInt8](repeating: 0, count: 64)
        while read(readEnd, &bytes, bytes.count) > 0 {}
    }

    /// Waits until `fd` (if any) is readable, the pipe is signalled, or `milliseconds` pass.
    /// An interrupted poll just returns early: the loop polls again.
    func wait(alongside fd: Int32?, milliseconds: Int32) {
        var descriptors = [pollfd(fd: readEnd, events: Int16(POLLIN), revents: 0)]
        if let fd { descriptors.append(pollfd(fd: fd, events: Int16(POLLIN), revents: 0)) }
        _ = poll(&descriptors, nfds_t(descriptors.count), milliseconds)
    }
}
