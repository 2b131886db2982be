/// When a triggered camera's next exposure should start, and what became of a trigger
/// (proto-docs/clock.md, "Triggered cameras"): pure arithmetic on the fleet's grid, so the
/// trigger thread only sleeps, spins and fires.
public struct GridTriggerSchedule: Sendable, Equatable {
    public var grid: FrameGrid
    /// How far ahead of now the next slot must be for the thread to make it: less than this
    /// and it takes the one after (a sleep and a spin need some room).
    public var lead: UInt64
    /// A trigger that would leave later than this after its slot is not fired: a frame that
    /// far from its slot is worse than a missing one, which the take's ledger counts.
    public var giveUpAfter: UInt64

    public init(grid: FrameGrid, lead: UInt64 = 2_000_000, giveUpAfter: UInt64? = nil) {
        self.grid = grid
        self.lead = lead
        // A quarter of a slot by default: later than that it is nearer a wrong slot's trigger.
        self.giveUpAfter = giveUpAfter ?? max(grid.interval / 4, 1)
    }

    /// The next slot at least `lead` after now, in fleet time and on CLOCK_MONOTONIC (read as
    /// `nowMonotonic` when fleet time read `nowFleet`; within a frame interval the clocks'
    /// rates differ by parts per million, far below a trigger's lateness).
    public func nextSlot(nowMonotonic: UInt64, nowFleet: UInt64) -> (fleet: UInt64, monotonic: UInt64) {
        let interval = max(grid.interval, 1)
        let earliest = nowFleet + lead
        let slot: UInt64
        if earliest <= grid.origin {
            // Before the origin the grid runs on backwards.
            slot = grid.origin - (grid.origin - earliest) / interval * interval
        } else {
            let since = earliest - grid.origin
            slot = grid.origin + (since + interval - 1) / interval * interval
        }
        return (slot, nowMonotonic + (slot - nowFleet))
    }

    /// What to do once the thread is awake at `nowMonotonic` for a slot due at `dueMonotonic`.
    public enum Verdict: Sendable, Equatable {
        /// Fire: it leaves `lateness` ns after its instant.
        case fire(lateness: UInt64)
        /// Too late for this slot: count it missed and wait for the next.
        case missed(lateness: UInt64)
    }

    public func verdict(nowMonotonic: UInt64, dueMonotonic: UInt64) -> Verdict {
        let lateness = nowMonotonic > dueMonotonic ? nowMonotonic - dueMonotonic : 0
        return lateness > giveUpAfter ? .missed(lateness: lateness) : .fire(lateness: lateness)
    }

    /// A scheduled action command must reach the camera before its action time: one leaving
    /// less than this before it is not sent (the camera would act late, or refuse a time past).
    public static let actionMinimumAhead: UInt64 = 1_000_000

    /// What to do once the thread is awake at `nowMonotonic` to send the scheduled action
    /// command for a slot due at `dueMonotonic`, planned to leave `lead` before it; lateness is
    /// counted from that planned departure.
    public func actionVerdict(nowMonotonic: UInt64, dueMonotonic: UInt64, lead: UInt64) -> Verdict {
        let departure = dueMonotonic > lead ? dueMonotonic - lead : 0
        let lateness = nowMonotonic > departure ? nowMonotonic - departure : 0
        guard nowMonotonic &+ Self.actionMinimumAhead <= dueMonotonic else { return .missed(lateness: lateness) }
        return .fire(lateness: lateness)
    }
}
