import FleetCore
import FleetProtocol
import FleetStore
import Foundation

/// Takes moments (recordings.md, "Moments"): the fleet's Live Photo. One instant, a still of
/// every camera named at it (from each stream as it runs, so nothing switches format) and a
/// take from `before` it (the cameras' pre-roll) to `after` it, linked in the index. The
/// operator's `take_moment` (`MomentHandler`) and rules (`MomentTriggers`) take theirs here.
struct MomentTaker: Sendable {
    let store: FleetDatabase
    let takes: TakeDirector
    let stills: StillDirector
    let clock: CoordinatorClock

    static let defaultSideMs = MomentRule.defaultSideMs
    static let maximumSideMs = MomentRule.maximumSideMs

    /// A moment to take: the operator's (`take_moment`) or a rule's (`MomentTriggers`).
    struct Request: Sendable {
        /// Empty with `all`.
        var cameras: [String]
        var all: Bool
        var beforeMs: UInt32
        var afterMs: UInt32
        var name: String
        /// Nil: the coordinator's lead time from now. A rule's lies in the past: the frame
        /// that showed what it waits for.
        var instantFleetNs: UInt64?
        var encoding: Capfleet_V1_StillEncoding
        var trigger: String = "operator"
        var cause: String = ""
        /// The rule whose figures count it.
        var rule: String?
    }

    struct Refusal: Error, CustomStringConvertible {
        let code: Capfleet_V1_StatusCode
        let description: String
    }

    struct Taken: Sendable {
        let moment: MomentRecord
        let take: TakeRecord
        let still: StillEntry
    }

    /// Takes the moment: its take started in the cameras' pre-roll, the still at the instant,
    /// the take stopped `after` it and stored, the moment indexed and audited. Refused (and
    /// nothing left running) when any of it cannot be done.
    func take(_ request: Request, by holder: String) async throws -> Taken {
        let (before, after) = (request.beforeMs, request.afterMs)
        guard before <= Self.maximumSideMs, after <= Self.maximumSideMs else {
            throw Refusal(code: .badRequest, description: "a moment reaches at most \(Self.maximumSideMs / 1000) s either side of its instant")
        }
        let cameras = request.all ? try await authorizedCameras() : request.cameras
        guard !cameras.isEmpty else { throw Refusal(code: .unavailable, description: "no camera is online with its consent granted") }
        let id = Self.momentID(at: Date(timeIntervalSince1970: Double(clock.unixMilliseconds()) / 1000))
        let name = request.name.isEmpty ? id : request.name
        let now = clock.fleetNow()
        let instant = request.instantFleetNs ?? now + UInt64(takes.configuration.recordLeadMilliseconds) * 1_000_000
        if instant < now { try await checkReach(of: cameras, back: now - instant + UInt64(before) * 1_000_000, moment: name) }
        let take: TakeRecord
        do {
            take = try await takes.start(deviceIDs: cameras, name: name, at: instant, fromNow: 0, preRollMs: Int(before), by: holder)
        } catch let refusal as TakeRefusal {
            throw Refusal(code: refusal.code, description: "moment \(name): \(refusal.message)")
        }
        // The pictures at the instant, from the streams the take records (a past instant's
        // from what each camera's agent kept).
        let still: StillEntry
        do {
            still = try await stills.take(
                .with {
                    $0.deviceIds = cameras
                    $0.atFleetTimeNs = instant
                    $0.streamingFormat = true
                    $0.encoding = request.encoding
                    $0.name = name
                }, by: holder)
        } catch let refusal as StillRefusal {
            var reason = "moment \(name): no still, so no moment (its take \(take.id) is stopped): \(refusal.description)"
            do {
                _ = try await takes.stop(takeID: take.id, at: nil, wait: .seconds(30), by: holder)
            } catch {
                reason += "; stopping the take failed too: \(error) (capfleet record stop \(take.id))"
            }
            throw Refusal(code: refusal.code, description: reason)
        }
        let stopAt = instant + UInt64(after) * 1_000_000
        let stopped = try await takes.stop(takeID: take.id, at: stopAt, wait: .milliseconds(Int64(after) + 60_000), by: holder)
        let moment = MomentRecord(
            id: id, name: name, instantFleetNs: instant, beforeMs: Int(before), afterMs: Int(after), takeId: take.id, stillId: still.still.id,
            devices: cameras, createdAt: clock.unixMilliseconds(), createdBy: holder, trigger: request.trigger, cause: request.cause)
        try await store.saveMoment(
            moment,
            audit: AuditEntry(
                at: moment.createdAt, actor: holder, action: "moment.take", target: id, outcome: "ok",
                detail:
                    "\(cameras.joined(separator: ", ")) at fleet time \(instant), \(before) ms before to \(after) ms after: take \(take.id), still \(still.still.id)"
                    + (request.cause.isEmpty ? "" : "; \(request.trigger) saw \(request.cause)")),
            rule: request.rule)
        return Taken(moment: moment, take: stopped, still: still)
    }

    /// A moment whose instant has passed starts further back than its `before`: every camera's
    /// agent must keep that far (with a tenth of a second for the command to reach it).
    private func checkReach(of cameras: [String], back: UInt64, moment name: String) async throws {
        let needed = Int((back + 100_000_000) / 1_000_000)
        for camera in cameras {
            let kept = try await store.preRoll(deviceID: camera)?.milliseconds ?? 0
            guard kept >= needed else {
                let seconds = (needed + 999) / 1000
                throw Refusal(
                    code: .badRequest,
                    description:
                        "moment \(name): its instant is past, so \(camera) must keep \(needed) ms of pre-roll and keeps \(kept == 0 ? "none" : "\(kept) ms"): capfleet preroll \(camera) \(seconds)s"
                )
            }
        }
    }

    /// The online cameras whose consent is granted: what `--all` records.
    private func authorizedCameras() async throws -> [String] {
        var cameras: [String] = []
        for device in try await store.devices() where SourceKind(rawValue: device.kind)?.isCamera ?? true {
            guard await takes.agents.isOnline(device.nodeId),
                try await store.consent(deviceID: device.id)?.consentState.allowsRealFrames == true
            else { continue }
            cameras.append(device.id)
        }
        return cameras.sorted()
    }

    /// Moment ids sort by time and say when: moment-20261129-221500-3f2a.
    static func momentID(at date: Date) -> String { TimestampedID.make("moment", at: date) }
}
