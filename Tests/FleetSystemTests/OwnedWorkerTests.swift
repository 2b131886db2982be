import Dispatch
import FleetSystem
import Glibc
import Synchronization
import Testing

@Suite struct OwnedWorkerTests {
    @Test func worker_handlesMessagesInOrderOnItsOwnThread() async {
        let seen = Mutex<[Int]>([])
        let onWorker = Mutex<Bool>(true)
        let holder = Mutex<OwnedThread?>(nil)
        let worker = OwnedWorker<Int>(name: "cf-test") { value in
            if let thread = holder.withLock({ $0 }), !thread.isCurrent { onWorker.withLock { $0 = false } }
            seen.withLock { $0.append(value) }
        }
        holder.withLock { $0 = worker.thread }
        for value in 0..<500 { worker.post(value) }
        await worker.stop()
        #expect(seen.withLock { $0 } == Array(0..<500))
        #expect(onWorker.withLock { $0 })
        #expect(worker.thread.isFinished)
    }

    @Test func stop_handlesEverythingQueuedThenRunsFinish() async {
        let finished = Mutex<[Int]?>(nil)
        let worker = OwnedWorker<Int>(
            name: "cf-test", state: { [Int]() },
            handle: { state, value in
                usleep(200)
                state.append(value)
            }, finish: { state in finished.withLock { $0 = state } })
        for value in 0..<50 { worker.post(value) }
        await worker.stop()
        #expect(finished.withLock { $0 } == Array(0..<50))
    }

    @Test func post_afterStopIsRefusedAndHandedToOnDrop() async {
        let dropped = Mutex<[Int]>([])
        let worker = OwnedWorker<Int>(name: "cf-test", onDrop: { value in dropped.withLock { $0.append(value) } }) { _ in }
        await worker.stop()
        #expect(worker.post(7) == false)
        #expect(dropped.withLock { $0 } == [7])
    }

    @Test func offer_dropOldestKeepsTheNewestWhenFull() async {
        let gate = DispatchGate()
        let seen = Mutex<[Int]>([])
        let dropped = Mutex<[Int]>([])
        let worker = OwnedWorker<Int>(
            name: "cf-test", capacity: 3, whenFull: .dropOldest,
            onDrop: { value in dropped.withLock { $0.append(value) } }
        ) { value in
            if value == 0 { gate.wait() }
            seen.withLock { $0.append(value) }
        }
        worker.post(0)
        while worker.queued > 0 { usleep(100) }  // the worker holds 0 and waits at the gate
        for value in 1...6 { #expect(worker.offer(value)) }
        gate.open()
        await worker.stop()
        #expect(dropped.withLock { $0 } == [1, 2, 3])
        #expect(seen.withLock { $0 } == [0, 4, 5, 6])
    }

    @Test func offer_refuseNewestSaysNoWhenFull() async {
        let gate = DispatchGate()
        let seen = Mutex<[Int]>([])
        let worker = OwnedWorker<Int>(name: "cf-test", capacity: 2, whenFull: .refuseNewest) { value in
            if value == 0 { gate.wait() }
            seen.withLock { $0.append(value) }
        }
        worker.post(0)
        while worker.queued > 0 { usleep(100) }
        #expect(worker.offer(1))
        #expect(worker.offer(2))
        #expect(worker.offer(3) == false)
        // `post` is for control messages: taken whatever the inbox holds.
        #expect(worker.post(4))
        gate.open()
        await worker.stop()
        #expect(seen.withLock { $0 } == [0, 1, 2, 4])
    }

    @Test func tick_runsWithoutMessages() async {
        let ticks = Atomic<Int>(0)
        let worker = OwnedWorker<Int>(
            name: "cf-test", tickNanoseconds: 5_000_000, state: { () }, handle: { _, _ in },
            onTick: { _ in ticks.add(1, ordering: .relaxed) })
        while ticks.load(ordering: .relaxed) < 3 { usleep(1000) }
        await worker.stop()
        let count = ticks.load(ordering: .relaxed)
        #expect(count >= 3)
    }
}

/// A one-shot gate a worker's handler waits at, so a test can fill the inbox meanwhile.
final class DispatchGate: Sendable {
    private let semaphore = DispatchSemaphore(value: 0)
    func wait() { semaphore.wait() }
    func open() { semaphore.signal() }
}
