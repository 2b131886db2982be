import Logging
import ServiceLifecycle
import Synchronization
import Testing

@testable import FleetDaemon

/// A daemon's beat on a clock the test advances: ticks come when the clock reaches the
/// interval, never before, and graceful shutdown ends the beat without cutting a tick short.
@Suite(.timeLimit(.minutes(1))) struct PeriodicServiceTests {
    final class Ticks: Sendable {
        private let count = Mutex(0)
        var value: Int { count.withLock { $0 } }
        func record() { count.withLock { $0 += 1 } }
    }

    let logger = Logger(label: "capfleet.test")

    @Test func beat_ticksOnceEachTimeTheClockReachesTheInterval_andStopsAtGracefulShutdown() async throws {
        let clock = ManualClock()
        let ticks = Ticks()
        let beat = PeriodicService("status report", every: .seconds(1), clock: clock) { ticks.record() }
        let group = ServiceGroup(services: [beat], gracefulShutdownSignals: [], logger: logger)
        try await withThrowingTaskGroup(of: Void.self) { running in
            running.addTask { try await group.run() }
            await clock.waitForSleeps(1)
            clock.advance(by: .milliseconds(999))
            #expect(ticks.value == 0, "no tick before a whole interval has passed")
            #expect(clock.sleeping == 1, "the beat still waits for its first interval")

            clock.advance(by: .milliseconds(1))
            await clock.waitForSleeps(2)
            #expect(ticks.value == 1)
            for beatNumber in 2...4 {
                clock.advance(by: .seconds(1))
                await clock.waitForSleeps(beatNumber + 1)
                #expect(ticks.value == beatNumber, "one tick per interval the clock advanced")
            }

            await group.triggerGracefulShutdown()
            try await running.next()
            #expect(ticks.value == 4, "no tick after graceful shutdown")
            #expect(clock.sleeping == 0, "the wait for the next beat ended with the service")
        }
    }

    @Test func beat_thatStartsAtOnce_ticksBeforeItsFirstInterval() async throws {
        let clock = ManualClock()
        let ticks = Ticks()
        let housekeeping = PeriodicService("housekeeping", every: .seconds(5), clock: clock, firstTick: .atStart) { ticks.record() }
        let group = ServiceGroup(services: [housekeeping], gracefulShutdownSignals: [], logger: logger)
        try await withThrowingTaskGroup(of: Void.self) { running in
            running.addTask { try await group.run() }
            await clock.waitForSleeps(1)
            #expect(ticks.value == 1, "the first tick came before the clock moved")
            clock.advance(by: .seconds(5))
            await clock.waitForSleeps(2)
            #expect(ticks.value == 2)
            await group.triggerGracefulShutdown()
            try await running.next()
        }
    }

    @Test func tickUnderWayAtGracefulShutdown_runsToItsEnd_andNoOtherStarts() async throws {
        let clock = ManualClock()
        let ticks = Ticks()
        let sawCancellation = Mutex(false)
        // The tick waits until graceful shutdown has reached its service, so that shutdown
        // surely comes while it is under way.
        let (shutdownReached, reach) = AsyncStream.makeStream(of: Void.self)
        let (started, tickStarted) = AsyncStream.makeStream(of: Void.self)
        let flush = PeriodicService("counter flush", every: .seconds(1), clock: clock, firstTick: .atStart) {
            tickStarted.yield()
            await withGracefulShutdownHandler {
                for await _ in shutdownReached { break }
            } onGracefulShutdown: {
                reach.yield()
            }
            sawCancellation.withLock { $0 = Task.isCancelled }
            ticks.record()
        }
        let group = ServiceGroup(services: [flush], gracefulShutdownSignals: [], logger: logger)
        try await withThrowingTaskGroup(of: Void.self) { running in
            running.addTask { try await group.run() }
            for await _ in started { break }
            await group.triggerGracefulShutdown()
            try await running.next()
        }
        #expect(ticks.value == 1, "the tick under way finished")
        #expect(sawCancellation.withLock { $0 } == false, "graceful shutdown did not cancel the tick under way")
        #expect(clock.sleepsBegun == 0, "no wait for another beat began")
    }
}
