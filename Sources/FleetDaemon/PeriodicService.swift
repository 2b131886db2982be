import ServiceLifecycle

/// Work a daemon does on a beat (expiring silent nodes, publishing status, housekeeping
/// recordings) as a part of its service group.
///
/// The beat comes from a clock the part is given, so a test decides when a tick is due
/// instead of sleeping through real intervals. The interval runs from the end of one tick
/// to the start of the next: a slow tick delays the beat, and missed beats are not caught
/// up in a burst.
public struct PeriodicService: Service, CustomStringConvertible {
    /// When the first tick comes.
    public enum FirstTick: Sendable {
        /// As soon as the part runs (housekeeping that a restart should not postpone).
        case atStart
        /// One interval after the part runs.
        case afterInterval
    }

    public let name: String
    private let interval: Duration
    private let clock: any Clock<Duration>
    private let firstTick: FirstTick
    private let tick: @Sendable () async -> Void

    public init(
        _ name: String, every interval: Duration, clock: any Clock<Duration> = ContinuousClock(),
        firstTick: FirstTick = .afterInterval, tick: @escaping @Sendable () async -> Void
    ) {
        precondition(interval > .zero, "\(name): a beat needs an interval above zero, not \(interval)")
        self.name = name
        self.interval = interval
        self.clock = clock
        self.firstTick = firstTick
        self.tick = tick
    }

    public var description: String { name }

    /// Ticks until graceful shutdown or cancellation. Graceful shutdown ends the wait for
    /// the next beat; a tick under way then runs to its end (a store write is not cut short
    /// by a shutdown that has time for it), and none starts after it. Cancellation reaches
    /// a tick under way like any other task's.
    public func run() async throws {
        if firstTick == .atStart, !stopping {
            await tick()
        }
        while !stopping {
            do {
                try await cancelWhenGracefulShutdown { [clock, interval] in
                    try await clock.sleep(for: interval)
                }
            } catch {
                // The wait was cancelled: by graceful shutdown or by the group.
                return
            }
            guard !stopping else { return }
            await tick()
        }
    }

    private var stopping: Bool { Task.isCancelled || Task.isShuttingDownGracefully }
}
