import FleetCore

/// A PTP camera's clock as its agent sees it: the camera's PTP state, as last read, and the
/// check of the host's clock against the camera's from the frames (`PTPHostClockCheck`). While
/// the camera is locked and the host's clock keeps its time, frames are placed by the host's
/// clock and triggers go out as scheduled action commands; otherwise `refusal` says why not.
struct PTPClockState: Sendable {
    var status: String?
    private(set) var check = PTPHostClockCheck()
    private(set) var verdict = PTPHostClockCheck.Verdict.unknown
    private var second: UInt64 = 0
    let offsets: [Int64]

    init(status: String?, kernelTAIOffsetSeconds: Int64) {
        self.status = status
        offsets = PTPHostClockCheck.timescaleOffsets(kernelTAIOffsetSeconds: kernelTAIOffsetSeconds)
    }

    var isLocked: Bool { status.map { GenICamScheduledActions.lockedStates.contains($0) } ?? false }

    /// Camera time minus host CLOCK_REALTIME while the host's clock places the frames; else nil.
    var timescaleOffset: Int64? {
        guard isLocked, case let .agrees(offset, _) = verdict else { return nil }
        return offset
    }

    /// Feeds a frame; the verdict is taken again once a second. The offset to place it by, if any.
    mutating func add(cameraNs: UInt64, arrivalRealtimeNs: UInt64) -> Int64? {
        check.add(cameraNs: cameraNs, arrivalRealtimeNs: arrivalRealtimeNs)
        let now = arrivalRealtimeNs / 1_000_000_000
        if now != second {
            second = now
            verdict = check.verdict(offsets: offsets)
        }
        return timescaleOffset
    }

    mutating func reset() {
        check.reset()
        verdict = .unknown
    }

    /// Why the camera's PTP clock does not place its frames nor take actions; nil when it does.
    var refusal: String? {
        guard let status else { return "its PTP state cannot be read" }
        guard isLocked else {
            return
                "its PTP state is \(status), not locked to a grandmaster (Slave, or Master of its domain): enable PTP on it and check the network's grandmaster"
        }
        switch verdict {
        case .unknown:
            return "the host's clock is not yet checked against the camera's: that takes two seconds of frames"
        case let .disagrees(shortestDelay):
            return
                "the host's clock does not keep the camera's PTP time: by it, frames arrive \(Double(shortestDelay) / 1e6) ms after their exposure, which no timescale explains; run ptp4l and phc2sys on the host in the camera's PTP domain (proto-docs/clock.md, \"Scheduled action commands\")"
        case .agrees:
            return nil
        }
    }
}
