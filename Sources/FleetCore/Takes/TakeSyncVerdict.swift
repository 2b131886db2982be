import FleetProtocol

/// What a take must keep to to be certified (operator.proto, TakeRequirements); nothing
/// asked: the take is only reported.
public struct TakeRequirements: Sendable, Equatable {
    /// The cameras' spread (p99) at most this; 0 asks nothing.
    public var maxSpreadNs: UInt64
    public var noDrops: Bool
    public var clocksLocked: Bool
    public var inPhase: Bool

    public init(maxSpreadNs: UInt64 = 0, noDrops: Bool = false, clocksLocked: Bool = false, inPhase: Bool = false) {
        self.maxSpreadNs = maxSpreadNs
        self.noDrops = noDrops
        self.clocksLocked = clocksLocked
        self.inPhase = inPhase
    }

    public var asksAnything: Bool { maxSpreadNs > 0 || noDrops || clocksLocked || inPhase }
}

/// A take's verdict: recording, reported (nothing asked), certified, or failed with one
/// reason per requirement not met, each naming the camera (or node) and the figure.
public struct TakeSyncVerdict: Sendable, Equatable {
    public enum Outcome: String, Sendable {
        case recording, reported, certified, failed
    }

    public var outcome: Outcome
    public var failures: [String]

    public init(outcome: Outcome, failures: [String] = []) {
        self.outcome = outcome
        self.failures = failures
    }

    static func judge(_ ledger: TakeSyncLedger, ended: Bool) -> TakeSyncVerdict {
        let asked = ledger.requirements
        let failures = Self.failures(ledger)
        guard ended else { return TakeSyncVerdict(outcome: .recording, failures: failures) }
        guard asked.asksAnything else { return TakeSyncVerdict(outcome: .reported) }
        return TakeSyncVerdict(outcome: failures.isEmpty ? .certified : .failed, failures: failures)
    }

    /// Each requirement not met (so far), in a fixed order: cameras unheard, spread, drops, clocks, phase.
    static func failures(_ ledger: TakeSyncLedger) -> [String] {
        let asked = ledger.requirements
        guard asked.asksAnything else { return [] }
        let cameras = ledger.orderedCameras
        var failures: [String] = []
        for camera in cameras where camera.reports == 0 {
            failures.append("\(camera.deviceID) sent no status during the take: nothing shows what it kept")
        }
        let heard = cameras.filter { $0.reports > 0 }
        if asked.maxSpreadNs > 0, heard.count >= 2 {
            for camera in heard where camera.phases.count == 0 {
                failures.append("\(camera.deviceID) had no place on the alignment grid: its spread against the others is unknown (capfleet align)")
            }
            if ledger.spread.count == 0, heard.allSatisfy({ $0.phases.count > 0 }) {
                failures.append("no report had two cameras' phases at once: the spread is unknown")
            } else if ledger.spread.p99 > asked.maxSpreadNs {
                failures.append(
                    "exposure spread p99 \(Self.spoken(ledger.spread.p99)) above the \(Self.spoken(asked.maxSpreadNs)) asked (by the cameras' phases at each report)"
                )
            }
        }
        if asked.noDrops {
            for camera in heard where camera.drops.total > 0 {
                failures.append(
                    "\(camera.deviceID) dropped \(camera.drops.total) frame\(camera.drops.total == 1 ? "" : "s") (\(Self.reasons(camera.drops)))")
            }
        }
        if asked.clocksLocked {
            var nodes: [String: (state: Capfleet_V1_ClockState.Sync, ns: UInt64)] = [:]
            for camera in heard where camera.worstSync != .locked {
                let known = nodes[camera.nodeID]
                nodes[camera.nodeID] = (
                    camera.worstSync.goodness < (known?.state.goodness ?? 4) ? camera.worstSync : known!.state,
                    Swift.max(known?.ns ?? 0, camera.notLockedNs)
                )
            }
            for (node, figure) in nodes.sorted(by: { $0.key < $1.key }) {
                failures.append("node \(node)'s clock was \(figure.state.name ?? "not reported") for \(Self.spoken(figure.ns))")
            }
        }
        if asked.inPhase {
            for camera in heard {
                if !camera.steeredThroughout {
                    failures.append(
                        "\(camera.deviceID) was not steered (\(camera.worstAlignment.name ?? "no alignment")): it cannot be held in phase")
                } else if camera.outOfPhaseNs > 0 {
                    failures.append("\(camera.deviceID) out of phase for \(Self.spoken(camera.outOfPhaseNs))")
                }
            }
        }
        return failures
    }

    static func reasons(_ drops: DropTally) -> String {
        [("late", drops.late), ("out of buffers", drops.outOfBuffers), ("discontinuity", drops.discontinuity), ("encoder late", drops.encoderLate)]
            .filter { $0.1 > 0 }.map { "\($0.0) \($0.1)" }.joined(separator: ", ")
    }

    /// A duration or spread as people read it: 4.2 s, 1.8 ms, 350 µs, 80 ns.
    public static func spoken(_ ns: UInt64) -> String {
        func trimmed(_ value: Double) -> String {
            let tenths = UInt64((value * 10).rounded())
            return tenths % 10 == 0 ? "\(tenths / 10)" : "\(tenths / 10).\(tenths % 10)"
        }
        if ns >= 1_000_000_000 { return trimmed(Double(ns) / 1e9) + " s" }
        if ns >= 1_000_000 { return trimmed(Double(ns) / 1e6) + " ms" }
        if ns >= 1_000 { return trimmed(Double(ns) / 1e3) + " µs" }
        return "\(ns) ns"
    }
}
