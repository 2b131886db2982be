/// How long the coordinator may take to answer each operator request (operator.md, "Time
/// limits"), and so how long a client should wait before it gives up. Most requests are
/// answered from the coordinator's memory and database at once; those that ask an agent wait
/// for its answer, and some wait for a fleet instant first. The CLI's waits come from here,
/// so they cannot fall short of what the coordinator really takes.
public enum OperatorReplyTime {
    /// What a client adds to the coordinator's own wait: the network, the handshake of a new
    /// connection and the coordinator's work. Also the whole wait for a request answered at once.
    public static let marginSeconds: Double = 3
    /// What the coordinator gives one agent to answer a command (commands.md).
    public static let agentCommandSeconds: Double = 3

    /// The longest the coordinator waits, on agents, frames or a fleet instant, before it
    /// answers `body`; 0 for a request it answers at once.
    public static func coordinatorWaitSeconds(for body: Capfleet_V1_OperatorRequest.OneOf_Body?) -> Double {
        guard let body else { return 0 }
        switch body {
        case .getLatestFrame:
            return 3
        case .changeFormat, .changeFrameRate, .changeZoom, .changeFocus, .setDropRecoveryPolicy, .changePressurePolicy, .changeAudioProcessing,
            .changeControl, .changeRegion, .changePreRoll:
            return agentCommandSeconds
        case .changeConsent:
            // The device's earlier push is answered first, so two in a row.
            return 2 * agentCommandSeconds
        case let .changeFrameAlignment(query):
            return agentCommandSeconds * Double(max(query.deviceIds.count, 1))
        case let .syncCheck(query):
            // Until the instant (from now: at most 60 s), then 2 s for the frame and 1 s more.
            let ahead = query.atFleetTimeNs != 0 ? 60 : (query.fromNowNs == 0 ? 1 : min(Double(query.fromNowNs) / 1e9, 60))
            return ahead + 3
        case let .syncAudit(query):
            // Every camera decodes for the audit's length, then answers (clock.md, "Auditing exposures").
            return SyncAuditLimits.seconds(query.seconds) + agentCommandSeconds
        case let .startRecording(query):
            return agentCommandSeconds * Double(max(query.deviceIds.count, 1))
        case let .stopRecording(query):
            // Its agents are told (a few seconds for one that is slow), then every part stored or wait_ms.
            let wait = query.waitMs == 0 ? 10 : min(Double(query.waitMs), 600_000) / 1000
            let ahead = query.fromNowNs == 0 ? 0 : Double(query.fromNowNs) / 1e9
            return ahead + wait + agentCommandSeconds
        case let .takeStill(query):
            // Until the instant, the bracket's pictures apart, then 30 s and 20 s a picture for
            // each camera to switch formats and encode (stills.md).
            let pictures = Double(max(query.bracketEv.count, 1))
            // An instant lies at most 60 s ahead; a client that names one by its fleet time is given the 60 s.
            let lead = query.atFleetTimeNs != 0 ? 60 : (query.fromNowNs == 0 ? 1 : min(Double(query.fromNowNs) / 1e9, 60))
            let interval = Double(query.bracketIntervalMs == 0 ? 300 : query.bracketIntervalMs) / 1000
            return lead + (pictures - 1) * interval + 30 + 20 * pictures
        case let .takeMoment(query):
            // Its take started (every camera's agent), its still (at the instant, then up to 50 s
            // for the pictures), then the take stopped `after` the instant and stored (60 s).
            let cameras = Double(max(query.deviceIds.count, 1))
            let lead = query.atFleetTimeNs != 0 ? 60.0 : 1.0
            let after = Double(query.afterMs == 0 ? 1_500 : min(query.afterMs, 60_000)) / 1000
            return agentCommandSeconds * cameras + lead + 50 + after + 60
        case .changeDetection:
            // The agent checks the face cascade is there to read: seconds on a slow host.
            return 10
        case .getFrameSets:
            // Every segment's metadata read back on the coordinator (recordings.md, "Frame sets").
            return 117
        case .verifyRecording:
            // A segment's file read back and hashed, here or on its agent: 30 s and 1 s per 64 MiB.
            return 177
        case .deleteRecording, .deleteStill:
            // Files removed from the coordinator's disk.
            return 27
        case .backupDatabase:
            // A new snapshot copies the whole database first.
            return 27
        case .listNodes, .listDevices, .getFormats, .getFleetStats, .getIngestStats, .forgetNode, .lockDevice, .unlockDevice,
            .getDevice, .endSession, .getEvents, .createEnrollment, .revokeNode, .addOperator, .removeOperator, .listOperators,
            .whoAmI, .getConsentHistory, .listRecordings, .getRecording, .readSegment, .noteRecording, .getPreview,
            .collectRecording, .offloadRecording, .listPreviews, .listEnrollments, .revokeEnrollment, .createDashboardSignIn,
            .listDashboardSessions, .endDashboardSession, .listStills, .getStill, .readStillFile, .setDeviceOptics, .listMoments,
            .changeMomentRule, .listMomentRules, .changeStorage, .listStorage:
            return 0
        }
    }

    /// How long a client should wait for the reply to `body`: the coordinator's wait and the margin.
    public static func clientTimeoutSeconds(for body: Capfleet_V1_OperatorRequest.OneOf_Body?) -> Double {
        coordinatorWaitSeconds(for: body) + marginSeconds
    }
}

/// How long an exposure audit runs (clock.md, "Auditing exposures"): `seconds` asked, 0 for
/// the default, at most a minute.
public enum SyncAuditLimits {
    public static let defaultSeconds: Double = 5
    public static let maximumSeconds: Double = 60
    public static let maximumDevices = 64

    public static func seconds(_ asked: UInt32) -> Double { asked == 0 ? defaultSeconds : min(Double(asked), maximumSeconds) }
}
