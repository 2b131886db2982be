import FleetCore
import FleetProtocol
import FleetStore
import Foundation
import Logging

/// Moments by rule (recordings.md, "Moments by rule"): reads the detection reports and sensor
/// samples the coordinator already relays, and takes a moment when a rule's book says so.
/// The shell of `MomentTriggerBook`: it takes no decision of its own across an await. A report
/// of a device no rule watches costs one dictionary lookup, so the cost per camera stays what
/// relaying its reports costs.
actor MomentTriggers {
    private let taker: MomentTaker
    private let store: FleetDatabase
    private let logger: Logger
    private var book = MomentTriggerBook()

    init(taker: MomentTaker, store: FleetDatabase, logger: Logger) {
        self.taker = taker
        self.store = store
        self.logger = logger
    }

    /// The stored rules in force (at start).
    func load() async throws {
        rulesChanged(to: try await store.momentRules())
    }

    /// The rules as stored now (after an operator changed one).
    func rulesChanged(to records: [MomentRuleRecord]) {
        var rules: [MomentRule] = []
        for record in records {
            guard let rule = record.rule else {
                logger.error(
                    "a stored moment rule has a condition this build does not know: it is not in force", metadata: ["rule": "\(record.name)"])
                continue
            }
            rules.append(rule)
        }
        book.replaceRules(with: rules)
    }

    /// The rules with a moment being taken now.
    func taking() -> Set<String> { Set(book.ruleNames.filter { book.isTaking($0) }) }

    /// Follows the fleet's node events until the feed ends.
    func follow(_ nodeEvents: AsyncStream<NodeEvent>) async {
        for await event in nodeEvents {
            switch event {
            case let .detection(report):
                guard report.fleetTimeNs != 0, book.watches(report.deviceID) else { continue }
                observe(
                    .detection(
                        deviceID: report.deviceID, fleetTimeNs: report.fleetTimeNs,
                        codes: report.objects.filter { $0.kind == .code }.map { .init(symbology: $0.symbology, value: $0.value) },
                        faces: report.objects.filter { $0.kind == .face }.count))
            case let .sensorData(batch):
                guard book.watches(batch.deviceID) else { continue }
                for reading in batch.readings where reading.fleetTimeNs != 0 {
                    var values: [String: Double] = [:]
                    for (channel, value) in zip(batch.channels, reading.values) { values[channel] = value }
                    observe(.sample(deviceID: batch.deviceID, fleetTimeNs: reading.fleetTimeNs, values: values, text: reading.text))
                }
            default:
                continue
            }
        }
    }

    private func observe(_ observation: MomentObservation) {
        for action in book.observed(observation) {
            switch action {
            case let .takeMoment(rule, instant, cause):
                logger.notice("a moment rule fired", metadata: ["rule": "\(rule.name)", "cause": "\(cause)", "instant.fleet_ns": "\(instant)"])
                Task { await self.take(rule, at: instant, cause: cause) }
            case let .missed(rule, instant, cause):
                let reason = "\(cause) at fleet time \(instant) while its last moment was still being taken"
                logger.warning(
                    "a moment rule fired while its last moment was being taken: not taken", metadata: ["rule": "\(rule)", "cause": "\(cause)"])
                Task { await self.record(rule, .missed(reason)) }
            }
        }
    }

    private func take(_ rule: MomentRule, at instant: UInt64, cause: String) async {
        let request = MomentTaker.Request(
            cameras: rule.momentCameras, all: rule.allCameras, beforeMs: rule.beforeMs, afterMs: rule.afterMs,
            name: "\(rule.name): \(cause)", instantFleetNs: instant, encoding: rule.jpeg ? .jpeg : .png, trigger: "rule \(rule.name)",
            cause: cause, rule: rule.name)
        do {
            let taken = try await taker.take(request, by: "rule \(rule.name)")
            logger.notice("a rule's moment was taken", metadata: ["rule": "\(rule.name)", "moment.id": "\(taken.moment.id)"])
        } catch {
            let reason = "\(cause) at fleet time \(instant): \(error)"
            logger.warning("a rule's moment could not be taken", metadata: ["rule": "\(rule.name)", "reason": "\(reason)"])
            await record(rule.name, .refused(reason))
        }
        book.momentEnded(rule: rule.name)
    }

    private func record(_ rule: String, _ outcome: MomentRuleOutcome) async {
        do {
            try await store.recordMomentRuleOutcome(rule, outcome)
        } catch {
            logger.error("what a moment rule did could not be recorded", metadata: ["rule": "\(rule)", "error": "\(error)"])
        }
    }
}

/// The one moment taker and the rules' triggers that share it, as the operator door needs them.
struct MomentTakerAndTriggers: Sendable {
    let taker: MomentTaker
    let triggers: MomentTriggers
}
