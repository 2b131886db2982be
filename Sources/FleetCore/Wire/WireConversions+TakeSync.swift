import FleetProtocol

extension TakeRequirements {
    public init(wire: Capfleet_V1_TakeRequirements) {
        self.init(maxSpreadNs: wire.maxSpreadNs, noDrops: wire.noDrops, clocksLocked: wire.clocksLocked, inPhase: wire.inPhase)
    }

    public var wire: Capfleet_V1_TakeRequirements {
        .with {
            $0.maxSpreadNs = maxSpreadNs
            $0.noDrops = noDrops
            $0.clocksLocked = clocksLocked
            $0.inPhase = inPhase
        }
    }
}

extension TakeSyncVerdict.Outcome {
    public var wire: Capfleet_V1_TakeSyncReport.Verdict {
        switch self {
        case .recording: .recording
        case .reported: .reported
        case .certified: .certified
        case .failed: .failed
        }
    }

    public init?(wire: Capfleet_V1_TakeSyncReport.Verdict) {
        switch wire {
        case .recording: self = .recording
        case .reported: self = .reported
        case .certified: self = .certified
        case .failed: self = .failed
        default: return nil
        }
    }
}

extension MagnitudeHistogram {
    /// Unsigned figures (|phase|, spreads) as AuditFigures.
    public var wire: Capfleet_V1_AuditFigures {
        .with {
            $0.medianNs = Int64(clamping: median)
            $0.p99Ns = Int64(clamping: p99)
            $0.maxNs = Int64(clamping: max)
            $0.samples = UInt32(clamping: count)
        }
    }
}

extension TakeSyncLedger {
    /// The take's report as the wire carries it (TakeInfo.sync_report): the verdict on what
    /// was reported so far, or the final one once `ended`.
    public func report(ended: Bool) -> Capfleet_V1_TakeSyncReport {
        let verdict = verdict(ended: ended)
        return .with { report in
            report.verdict = verdict.outcome.wire
            report.failures = verdict.failures
            report.requirements = requirements.wire
            report.phaseSpread = spread.wire
            if let audit { report.audit = audit }
            report.cameras = orderedCameras.map { camera in
                .with {
                    $0.deviceID = camera.deviceID
                    $0.nodeID = camera.nodeID
                    if camera.reports > 0 {
                        $0.worstSync = camera.worstSync
                        $0.worstAlignment = camera.worstAlignment
                        $0.steered = camera.steeredThroughout
                    }
                    $0.maxUncertaintyNs = camera.maxUncertaintyNs
                    $0.phaseMedianNs = camera.phases.median
                    $0.phaseP99Ns = camera.phases.p99
                    $0.outOfPhaseNs = camera.outOfPhaseNs
                    $0.framesExpected = camera.framesExpected
                    $0.framesCaptured = camera.framesCaptured
                    $0.drops = camera.drops.wire
                    // Negative: the agent never said how full its take's write queue got.
                    $0.writerHeadroom = camera.writerHeadroom ?? -1
                    $0.statusReports = camera.reports
                    $0.exposureTiming = camera.exposureTiming
                }
            }
        }
    }
}
