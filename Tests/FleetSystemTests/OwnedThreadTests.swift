import FleetSystem
import Foundation
import Glibc
import Synchronization
import Testing

@Suite struct OwnedThreadTests {
    @Test func run_returnsTheWorksResultFromAnotherThread() async {
        let value = await OwnedThread.run("cf-test") { 6 * 7 }
        #expect(value == 42)
    }

    @Test func run_rethrowsWhatTheWorkThrew() async {
        await #expect(throws: SystemCallError.self) {
            try await OwnedThread.run("cf-test") { () throws -> Int32 in
                try systemCall("open", on: "/nonexistent/capfleet") { open("/nonexistent/capfleet", O_RDONLY) }
            }
        }
    }

    @Test func join_resumesAfterTheBodyReturned() async {
        let done = Atomic<Bool>(false)
        let thread = OwnedThread(name: "cf-test") {
            usleep(20_000)
            done.store(true, ordering: .releasing)
        }
        await thread.join()
        let finishedFirst = done.load(ordering: .acquiring)
        #expect(finishedFirst)
        #expect(thread.isFinished)
        await thread.join()  // a second join returns at once
    }

    @Test func threadBound_isUsableOnItsThreadOnly() async {
        let thread = OwnedThread(name: "cf-test")
        let counter = ThreadBound(0, on: thread)
        let seen = Mutex<Int>(0)
        #expect(thread.isCurrent == false)
        thread.start {
            for _ in 0..<10 { counter.value += 1 }
            seen.withLock { $0 = counter.value }
        }
        await thread.join()
        #expect(seen.withLock { $0 } == 10)
    }

    @Test func threadName_isWhatTheKernelShows() async {
        let name = await OwnedThread.run("cf-named") { () -> String in
            (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
        }
        #expect(name == "cf-named")
    }
}

@Suite struct SystemCallTests {
    @Test func failure_carriesErrnoAndNamesTheCall() {
        do {
            try systemCall("open", on: "/nonexistent/capfleet") { open("/nonexistent/capfleet", O_RDONLY) }
            Issue.record("open of a missing file succeeded")
        } catch {
            #expect(error.errno == ENOENT)
            #expect(error.call == "open")
            #expect(error.description == "open on /nonexistent/capfleet failed: No such file or directory (errno \(ENOENT))")
        }
    }

    @Test func success_returnsTheCallsResult() throws {
        let descriptor = try systemCall("open", on: "/dev/null") { open("/dev/null", O_RDONLY) }
        defer { close(descriptor) }
        #expect(descriptor >= 0)
    }
}
