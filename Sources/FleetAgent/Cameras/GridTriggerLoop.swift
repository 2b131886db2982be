import FleetCapture
import FleetCore
import FleetSystem
import Foundation
import Logging
import Synchronization

/// The thread that fires a triggered camera's exposures at the slots of the fleet's grid
/// (proto-docs/clock.md, "Triggered cameras"): for each slot it converts the slot's fleet
/// time to CLOCK_MONOTONIC, sleeps to just before it, spins the last stretch, fires, and
/// tells the device's alignment how late the trigger left. One per triggered camera, for as
/// long as its stream runs; a grid set or cleared takes effect at the next slot.
final class GridTriggerLoop: Sendable {
    /// Fleet time now with CLOCK_MONOTONIC read with it; nil while the node's clock is not
    /// locked (a trigger placed by an unlocked clock lands anywhere).
    typealias LockedClock = @Sendable () -> (monotonic: UInt64, fleet: UInt64)?

    private struct Plan {
        /// The grid's origin (fleet ns); its interval is the camera's frame interval as it runs now.
        var origin: UInt64?
        var stopping = false
        /// Trigger mode as the camera has it now.
        var modeOn = false
    }
    /// How often a camera that could take triggers another way (its PTP locked or lost) is
    /// asked again.
    static let deliveryCheck: UInt64 = 2_000_000_000
    private let plan = Mutex(Plan())
    private let wake = DispatchSemaphore(value: 0)
    private let thread: OwnedThread
    /// Sleep until this far before the slot, then spin: the scheduler's wake-up is late by
    /// tens of microseconds on a loaded host, a spin by well under one.
    static let spin: UInt64 = 300_000

    init(
        deviceID: String, trigger: any SoftwareTrigger, alignment: FrameAlignmentState, clock: @escaping LockedClock,
        interval: @escaping @Sendable () -> UInt64, logger: Logger
    ) {
        thread = OwnedThread(name: "cf-trigger")
        thread.start { [self] in
            run(deviceID: deviceID, trigger: trigger, alignment: alignment, clock: clock, interval: interval, logger: logger)
        }
    }

    /// Fire on the slots of the grid from `origin` from the next one on; nil: stop firing and
    /// let the camera run free.
    func follow(origin: UInt64?) {
        plan.withLock { $0.origin = origin }
        wake.signal()
    }

    /// Ends the thread (the camera left in free-running mode) and waits for it. From a thread
    /// of one's own or the device's thread: at most a trigger's round trip.
    func stop() {
        plan.withLock { $0.stopping = true }
        wake.signal()
        thread.joinBlocking()
    }

    /// SCHED_FIFO for the calling thread; nil when taken, else why not and what to do.
    static func takeRealTimePriority() -> String? {
        var parameters = sched_param()
        parameters.sched_priority = realTimePriority
        let code = pthread_setschedparam(pthread_self(), Int32(SCHED_FIFO), &parameters)
        guard code != 0 else { return nil }
        return code == EPERM
            ? "real-time scheduling (SCHED_FIFO) needs CAP_SYS_NICE or an RLIMIT_RTPRIO of at least \(realTimePriority) (systemd: AmbientCapabilities=CAP_SYS_NICE or LimitRTPRIO=\(realTimePriority))"
            : "pthread_setschedparam(SCHED_FIFO) failed with error \(code)"
    }

    /// Above ordinary threads, below the kernel's own interrupt threads (50).
    static let realTimePriority: Int32 = 40

    private func run(
        deviceID: String, trigger: any SoftwareTrigger, alignment: FrameAlignmentState, clock: LockedClock,
        interval: () -> UInt64, logger: Logger
    ) {
        let spin = Self.spin
        // A trigger is a deadline: ahead of the agent's other threads (previews, encoders) when
        // the host allows it. The sleep and the short spin keep it off the CPU otherwise.
        if let refusal = Self.takeRealTimePriority() {
            logger.warning(
                "triggers run at normal priority, so a busy host makes them late: \(refusal)", metadata: ["device.id": "\(deviceID)"])
        }
        var missedWhileUnlocked = false
        var refusing = false
        var delivery = TriggerDelivery.software(actionUnavailable: "")
        var deliveryCheckedAt: UInt64 = 0
        while true {
            let (origin, stopping, modeOn) = plan.withLock { ($0.origin, $0.stopping, $0.modeOn) }
            let wanted = origin != nil && !stopping
            // A PTP camera locking (or its lock lost) changes how its triggers are best sent.
            var redeliver = false
            if wanted, modeOn, MonotonicTime.now() &- deliveryCheckedAt > Self.deliveryCheck {
                deliveryCheckedAt = MonotonicTime.now()
                let now = trigger.deliveryNow
                redeliver = now.isScheduled != delivery.isScheduled
                if !redeliver, now != delivery {
                    delivery = now
                    alignment.triggerModeSet(now)
                }
            }
            if wanted != modeOn || redeliver {
                do throws(CaptureError) {
                    let set = try trigger.setTriggerMode(wanted)
                    plan.withLock { $0.modeOn = wanted }
                    if wanted {
                        delivery = set
                        deliveryCheckedAt = MonotonicTime.now()
                        alignment.triggerModeSet(set)
                    }
                    logger.notice("trigger mode", metadata: ["device.id": "\(deviceID)", "mode": "\(wanted ? set.description : "free-running")"])
                } catch {
                    logger.error("cannot change the camera's trigger mode", metadata: ["device.id": "\(deviceID)", "error": "\(error)"])
                    alignment.triggerModeFailed(error.description)
                    if stopping { return }
                    // Asked again when the grid changes; meanwhile it runs as it was.
                    plan.withLock { $0.origin = nil }
                    continue
                }
            }
            if stopping { return }
            // A change of the camera's frame rate changes the grid's interval from the next slot.
            guard let origin, case let grid = FrameGrid(origin: origin, interval: interval()), grid.interval > 0 else {
                _ = wake.wait(timeout: .now() + .seconds(1))
                continue
            }
            guard let now = clock() else {
                // Each slot passes untriggered until the clock locks again.
                if !missedWhileUnlocked { logger.warning("triggers wait for the node's clock to lock", metadata: ["device.id": "\(deviceID)"]) }
                missedWhileUnlocked = true
                alignment.triggerMissed()
                _ = wake.wait(timeout: .now() + .nanoseconds(Int(min(grid.interval, 1_000_000_000))))
                continue
            }
            missedWhileUnlocked = false
            // A scheduled action command leaves `lead` ahead of its slot and needs no spin: it
            // carries the slot's time, so only its arrival before that time matters.
            let lead: UInt64? = if case let .scheduledAction(lead) = delivery { lead } else { nil }
            let schedule = lead.map { GridTriggerSchedule(grid: grid, lead: $0 + 2_000_000) } ?? GridTriggerSchedule(grid: grid)
            let slot = schedule.nextSlot(nowMonotonic: now.monotonic, nowFleet: now.fleet)
            let departure = slot.monotonic - (lead ?? 0)
            let margin = lead == nil ? spin : 0
            // A change of grid or a stop wakes the sleep; the slot is then planned again.
            if departure > MonotonicTime.now() + margin {
                let sleep = departure - margin - MonotonicTime.now()
                if wake.wait(timeout: .now() + .nanoseconds(Int(min(sleep, UInt64(Int.max))))) == .success { continue }
            }
            if lead == nil { while MonotonicTime.now() < slot.monotonic {} }
            let verdict =
                lead.map { schedule.actionVerdict(nowMonotonic: MonotonicTime.now(), dueMonotonic: slot.monotonic, lead: $0) }
                ?? schedule.verdict(nowMonotonic: MonotonicTime.now(), dueMonotonic: slot.monotonic)
            switch verdict {
            case let .fire(lateness):
                do throws(CaptureError) {
                    try trigger.fire(dueMonotonic: slot.monotonic)
                    alignment.triggerFired(slotFleet: slot.fleet, lateness: lateness, interval: grid.interval)
                    refusing = false
                } catch {
                    alignment.triggerMissed(error: error.description)
                    // Once per run of refusals (a camera gone refuses every slot until it is back).
                    if !refusing { logger.warning("the camera refused a trigger", metadata: ["device.id": "\(deviceID)", "error": "\(error)"]) }
                    refusing = true
                }
            case .missed:
                alignment.triggerMissed()
            }
        }
    }
}
