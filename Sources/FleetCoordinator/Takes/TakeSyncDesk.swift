import FleetCore
import FleetProtocol
import FleetStore
import Foundation
import Logging

/// The shell around each take's `TakeSyncLedger` (recordings.md, "Sync and integrity"): it
/// feeds the ledgers the agents' status reports as the control dialog hears them (never a
/// frame, so a camera costs the same whatever its pixel rate), and stores each take's report
/// once it ended, with an audit entry. It decides nothing itself: the ledger judges.
actor TakeSyncDesk {
    let store: FleetDatabase
    let events: FleetEvents
    let clock: CoordinatorClock
    let logger: Logger
    private var ledgers: [String: TakeSyncLedger] = [:]
    /// A take's report is stored this long after its stop even if a camera never reported
    /// again (its node went silent): the report then says what was heard.
    static let closeAfterNs: UInt64 = 5_000_000_000

    init(store: FleetDatabase, events: FleetEvents, clock: CoordinatorClock, logger: Logger) {
        self.store = store
        self.events = events
        self.clock = clock
        self.logger = logger
    }

    /// A take started, or goes on after a coordinator restart (its figures then start again
    /// from the first report heard).
    func began(
        takeID: String, start: UInt64, devices: [(deviceID: String, nodeID: String)], requirements: TakeRequirements, stop: UInt64? = nil,
        resumedAt: UInt64? = nil
    ) {
        var ledger = TakeSyncLedger(start: start, deviceIDs: devices, requirements: requirements)
        if let stop { ledger.stop(at: stop) }
        if let resumedAt { ledger.resume(at: resumedAt) }
        ledgers[takeID] = ledger
    }

    func stopped(takeID: String, at stop: UInt64) { ledgers[takeID]?.stop(at: stop) }

    /// A take that did not start after all: nothing to report.
    func forget(takeID: String) { ledgers[takeID] = nil }

    /// The figures so far of a take still recording; nil once its report is stored.
    func liveReport(takeID: String) -> Capfleet_V1_TakeSyncReport? {
        guard var report = ledgers[takeID]?.report(ended: false) else { return nil }
        report.gridOriginFleetNs = clock.gridOrigin
        return report
    }

    /// An exposure audit ended: the takes it overlapped keep its figures in their reports.
    func audited(_ result: Capfleet_V1_SyncAuditResult) {
        for takeID in ledgers.keys { ledgers[takeID]?.audited(result) }
    }

    /// A node's status, heard at `at` (fleet ns).
    func observe(_ samples: [TakeSyncSample], at: UInt64) async {
        guard !ledgers.isEmpty else { return }
        for takeID in ledgers.keys.sorted() {
            ledgers[takeID]?.observe(samples, at: at)
        }
        await closeEnded(now: at)
    }

    /// Stores the report of every take whose cameras all reported after its stop, or whose
    /// stop is `closeAfterNs` past.
    func closeEnded(now: UInt64) async {
        for (takeID, ledger) in ledgers.sorted(by: { $0.key < $1.key }) {
            guard let stop = ledger.stop, ledger.isComplete || now >= stop.addingSaturated(Self.closeAfterNs) else { continue }
            await close(takeID, ledger)
        }
    }

    private func close(_ takeID: String, _ ledger: TakeSyncLedger) async {
        let verdict = ledger.verdict(ended: true)
        var report = ledger.report(ended: true)
        // Frame sets place their slots against the grid the cameras were steered to.
        report.gridOriginFleetNs = clock.gridOrigin
        let detail = Self.summary(verdict)
        let bytes: Data
        do {
            bytes = try report.serializedBytes()
        } catch {
            logger.error("cannot encode a take's sync report", metadata: ["take.id": "\(takeID)", "error": "\(error)"])
            ledgers[takeID] = nil
            return
        }
        do {
            try await store.recordTakeSyncReport(
                takeID: takeID, verdict: verdict.outcome, report: bytes, at: clock.unixMilliseconds(),
                audit: AuditEntry(
                    at: clock.unixMilliseconds(), actor: "coordinator", action: "recording.sync", target: takeID,
                    outcome: verdict.outcome == .failed ? "failed" : "ok", detail: detail))
            try await store.recordTakeEvent(
                TakeEventRecord(takeId: takeID, fleetNs: ledger.stop ?? clock.fleetNow(), kind: "sync_report", detail: Self.json(verdict)))
        } catch StoreError.notFound {
            // Deleted before its report was due: there is nothing left to report on.
            ledgers[takeID] = nil
            logger.notice("a take was deleted before its sync report was stored", metadata: ["take.id": "\(takeID)"])
            return
        } catch {
            // Kept: the next status tries again.
            logger.error("cannot store a take's sync report", metadata: ["take.id": "\(takeID)", "error": "\(error)"])
            return
        }
        ledgers[takeID] = nil
        logger.notice("take sync report", metadata: ["take.id": "\(takeID)", "verdict": "\(verdict.outcome.rawValue)", "detail": "\(detail)"])
        events.emit(.recording, message: "take \(takeID) \(detail)")
    }

    static func summary(_ verdict: TakeSyncVerdict) -> String {
        switch verdict.outcome {
        case .certified: "certified: every requirement met"
        case .failed: "failed: " + verdict.failures.joined(separator: "; ")
        case .reported: "reported (no requirements asked)"
        case .recording: "recording"
        }
    }

    static func json(_ verdict: TakeSyncVerdict) -> String {
        let object: [String: Any] = ["verdict": verdict.outcome.rawValue, "failures": verdict.failures]
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) else { return "{}" }
        return String(decoding: data, as: UTF8.self)
    }
}
