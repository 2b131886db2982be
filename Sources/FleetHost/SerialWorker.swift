import FleetCore
import Foundation
import Synchronization

/// A thread of its own that handles queued items one at a time, in order: for work that
/// blocks (running a program, posting to a webhook) and must never hold up its callers.
/// The queue is bounded: when it is full the oldest item is dropped and handed to `onDrop`,
/// so the newest news gets through. `stop` handles what is queued, then ends the thread.
public final class SerialWorker<Item: Sendable>: Sendable {
    private let queue = Mutex<[Item]>([])
    private let available = DispatchSemaphore(value: 0)
    private let stopped = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)
    private let capacity: Int
    private let onDrop: @Sendable (Item) -> Void
    private let handle: @Sendable (Item) -> Void

    /// `name` is the thread's name (at most 15 bytes, e.g. "cf-alerts").
    public init(name: String, capacity: Int, onDrop: @escaping @Sendable (Item) -> Void = { _ in },
                handle: @escaping @Sendable (Item) -> Void) {
        self.capacity = capacity
        self.onDrop = onDrop
        self.handle = handle
        let thread = Thread { [self] in
            ThreadName.set(name)
            run()
        }
        thread.name = name
        thread.start()
    }

    private func run() {
        defer { finished.signal() }
        while true {
            available.wait()
            while let item = queue.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) { handle(item) }
            if stopped.load(ordering: .acquiring) { return }
        }
    }

    /// Queues an item; never blocks.
    public func enqueue(_ item: Item) {
        let capacity = self.capacity
        let dropped: Item? = queue.withLock { pending in
            pending.append(item)
            return pending.count > capacity ? pending.removeFirst() : nil
        }
        if let dropped { onDrop(dropped) } else { available.signal() }
    }

    public func stop() {
        guard !stopped.exchange(true, ordering: .acquiringAndReleasing) else { return }
        available.signal()
        finished.wait()
    }
}
