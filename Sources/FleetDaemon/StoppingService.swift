import ServiceLifecycle

/// One part of a daemon that holds something open from its assembly to its shutdown (a
/// bound endpoint and the loop serving it, a writer's threads, a sampler) as a service in
/// the daemon's group. Its work, if it has any, runs until graceful shutdown; then the part
/// stops what it holds.
///
/// A part listed after the parts it uses is stopped before them: the group signals its
/// services last first and waits for each to end before it signals the next. So where a
/// part stands in its daemon's list is its shutdown order, and no other list is kept.
public struct StoppingService: Service, CustomStringConvertible {
    public let name: String
    private let work: (@Sendable () async throws -> Void)?
    private let stop: @Sendable () async -> Void

    /// - Parameters:
    ///   - work: what the part does while the daemon runs (serving its endpoint). It is
    ///     cancelled at graceful shutdown, before `stop`, and awaited after it: a loop that
    ///     only ends once its endpoint closes ends then.
    ///   - stop: what shutting the part down takes (closing a socket, finishing segments).
    ///     It also runs when the part is cancelled or its work ends first: whatever way the
    ///     group ends, no thread of the part outlives it.
    public init(_ name: String, run work: (@Sendable () async throws -> Void)? = nil, stop: @escaping @Sendable () async -> Void) {
        self.name = name
        self.work = work
        self.stop = stop
    }

    public var description: String { name }

    public func run() async throws {
        guard let work else {
            await untilShutdown()
            await stop()
            return
        }
        let outcome: Result<Void, any Error> = await withTaskGroup(of: Ending.self) { group in
            group.addTask {
                do {
                    try await work()
                    return .workEnded(.success(()))
                } catch {
                    return .workEnded(.failure(error))
                }
            }
            group.addTask {
                await untilShutdown()
                return .shutdown
            }
            // Either way the other task is cancelled: the work at shutdown, the wait for
            // shutdown when the work ended by itself.
            let first = await group.next() ?? .shutdown
            group.cancelAll()
            await stop()
            switch first {
            case let .workEnded(result):
                return result
            case .shutdown:
                while let next = await group.next() {
                    if case let .workEnded(result) = next { return result }
                }
                return .success(())
            }
        }
        try outcome.get()
    }

    private enum Ending: Sendable {
        case workEnded(Result<Void, any Error>)
        case shutdown
    }
}

/// Returns at graceful shutdown or when the task is cancelled, which for a part both mean
/// that it is time to stop.
func untilShutdown() async {
    do {
        try await gracefulShutdown()
    } catch {
        // CancellationError, the only error gracefulShutdown() throws: stop as well.
    }
}
