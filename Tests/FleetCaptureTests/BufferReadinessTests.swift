import Glibc
import Testing

@testable import FleetCapture

/// The question the V4L2 stream asks before each VIDIOC_DQBUF, on a pipe, which polls the
/// way a capture node does: readable when something is waiting, a hang-up or an invalid fd
/// when it is broken.
@Suite struct BufferReadinessTests {
    final class Pipe {
        struct Failed: Error { let errno: Int32 }
        var ends: [Int32] = [-1, -1]
        init() throws {
            guard pipe(&ends) == 0 else { throw Failed(errno: errno) }
        }
        var read: Int32 { ends[0] }
        var write: Int32 { ends[1] }
        func closeWrite() {
            close(ends[1])
            ends[1] = -1
        }
        deinit { for end in ends where end >= 0 { close(end) } }
    }

    @Test func nothingWaiting_isNotYet_soNoDequeueIsTried() throws {
        let pipe = try Pipe()
        #expect(BufferReadiness.of(pipe.read) == .notYet)
        #expect(!BufferReadiness.of(pipe.read).mayDequeue)
    }

    @Test func somethingWaiting_isFilled_andIsDequeued() throws {
        let pipe = try Pipe()
        var byte: UInt8 = 1
        #expect(Glibc.write(pipe.write, &byte, 1) == 1)
        #expect(BufferReadiness.of(pipe.read) == .filled)
        #expect(BufferReadiness.of(pipe.read).mayDequeue)
    }

    @Test func aHangUpOrAClosedFd_isFailing_soTheDequeueReportsTheError() throws {
        let pipe = try Pipe()
        pipe.closeWrite()
        #expect(BufferReadiness.of(pipe.read) == .failing)
        // No process here opens a millionth fd: poll says POLLNVAL.
        #expect(BufferReadiness.of(1_000_000) == .failing)
        #expect(BufferReadiness.of(1_000_000).mayDequeue)
    }
}
