import FleetSystem
import Glibc
import Testing

@Suite struct FileDescriptorIOTests {
    /// A pipe takes at most its capacity before its reader drains it: a whole write of more
    /// than that must keep going as the reader reads.
    @Test func writeAll_deliversMoreThanAPipeHoldsWhileItIsRead() async throws {
        var ends: [Int32] = [0, 0]
        #expect(pipe(&ends) == 0)
        let (reader, writer) = (ends[0], ends[1])
        let sent = (0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let received = Task.detached { () throws -> [UInt8] in
            defer { close(reader) }
            return try FileDescriptorIO.readExactly(reader, count: sent.count, target: "the test pipe")
        }
        try FileDescriptorIO.writeAll(writer, sent, target: "the test pipe")
        close(writer)
        #expect(try await received.value == sent)
    }

    @Test func positionedWritesAndReads_landAtTheirOffsets() throws {
        let path = "/tmp/capfleet-fdio-\(getpid())"
        let fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0o600)
        defer { close(fd); unlink(path) }
        try FileDescriptorIO.writeAll(fd, Array("world".utf8), at: 6, target: path)
        try FileDescriptorIO.writeAll(fd, Array("hello ".utf8), at: 0, target: path)
        #expect(try FileDescriptorIO.readExactly(fd, count: 11, at: 0, target: path) == Array("hello world".utf8))
        #expect(try FileDescriptorIO.readExactly(fd, count: 5, at: 6, target: path) == Array("world".utf8))
    }

    @Test func readingPastTheEnd_isAnErrorNamingTheFile() throws {
        let path = "/tmp/capfleet-fdio-short-\(getpid())"
        let fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0o600)
        defer { close(fd); unlink(path) }
        try FileDescriptorIO.writeAll(fd, [1, 2, 3], target: path)
        #expect(throws: SystemCallError(call: "pread", target: path, errno: EIO)) {
            try FileDescriptorIO.readExactly(fd, count: 4, at: 0, target: path)
        }
    }

    @Test func writingToAClosedDescriptor_namesTheCall() {
        #expect(throws: SystemCallError(call: "write", target: "nothing", errno: EBADF)) {
            try FileDescriptorIO.writeAll(-1, [1], target: "nothing")
        }
    }
}
