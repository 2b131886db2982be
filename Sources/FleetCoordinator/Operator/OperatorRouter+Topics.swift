import FleetProtocol
import FleetStore

/// The handlers behind the operator door, one per topic; each holds only what its own
/// requests use.
struct OperatorHandlers: Sendable {
    /// Nodes, devices, formats, statistics, events, who am I.
    let listings: FleetListingHandler
    /// Previews, snapshots and the dashboard's live view.
    let frames: FrameHandler
    /// Format, rate, zoom, focus, leases, policies, alignment, sync checks, detection, optics.
    let devices: DeviceHandler
    /// Takes started, stopped, noted, listed, shown, collected.
    let takes: TakeHandler
    /// A take's files: deleted, verified, read for export.
    let recordingFiles: RecordingFilesHandler
    let stills: StillHandler
    /// Moments: a still and a take around it.
    let moments: MomentHandler
    /// Rules that take moments when something happens.
    let momentRules: MomentRuleHandler
    /// Where takes are offloaded to.
    let storage: StorageHandler
    /// Operators and enrollment tokens.
    let access: AccessHandler
    /// Revoking and forgetting nodes.
    let nodeAccess: NodeAccessHandler
    /// The dashboard's sign-in links and sessions.
    let dashboardAccess: DashboardAccessHandler
    let consent: ConsentHandler
    let backup: BackupHandler
}

extension OperatorRouter {
    /// The request, already authorised, to the handler of its topic; the payload is the
    /// frame a snapshot sends after the reply.
    func dispatch(
        _ body: Capfleet_V1_OperatorRequest.OneOf_Body, of request: Capfleet_V1_OperatorRequest, by account: OperatorRecord,
        as caller: OperatorCaller, into reply: inout Capfleet_V1_OperatorReply
    ) async throws -> [UInt8]? {
        let who = caller.actor
        let handlers = self.handlers
        switch body {
        // Fleet listings: nothing here changes the fleet.
        case .listNodes:
            try await handlers.listings.listNodes(into: &reply)
        case let .listDevices(query):
            try await handlers.listings.listDevices(query, into: &reply)
        case let .getFormats(query):
            try await handlers.listings.formats(of: query.deviceID, into: &reply)
        case .getFleetStats:
            await handlers.listings.fleetStats(into: &reply)
        case .getIngestStats:
            handlers.listings.ingestStats(into: &reply)
        case let .getDevice(query):
            try await handlers.listings.deviceDetails(query.deviceID, into: &reply)
        case let .getEvents(query):
            handlers.listings.events(query, into: &reply)
        case .listOperators:
            try await handlers.listings.listOperators(into: &reply)
        case .whoAmI:
            handlers.listings.whoAmI(account, into: &reply)
        case let .getLatestFrame(query):
            return await handlers.frames.nextFrame(of: query.deviceID, into: &reply)
        case let .getPreview(query):
            handlers.frames.preview(of: query.deviceID, into: &reply)
        case let .listPreviews(query):
            handlers.frames.listPreviews(nodeID: query.nodeID.isEmpty ? nil : query.nodeID, into: &reply)

        // Devices and their configuration.
        case let .changeFormat(query):
            try await handlers.devices.changeFormat(query, by: who, into: &reply)
        case let .changeFrameRate(query):
            try await handlers.devices.changeFrameRate(query, by: who, into: &reply)
        case let .changeZoom(query):
            try await handlers.devices.changeZoom(query, by: who, into: &reply)
        case let .changeFocus(query):
            try await handlers.devices.changeFocus(query, by: who, into: &reply)
        case let .lockDevice(query):
            try await handlers.devices.lock(query, by: who, session: request.sessionID, into: &reply)
        case let .unlockDevice(query):
            try await handlers.devices.unlock(query, by: who, into: &reply)
        case .endSession:
            await leases.endSession(request.sessionID)
            reply.status = .ok
        case let .setDropRecoveryPolicy(query):
            try await handlers.devices.setDropRecovery(query, by: who, into: &reply)
        case let .changePressurePolicy(query):
            try await handlers.devices.changePressurePolicy(query, by: who, into: &reply)
        case let .changeFrameAlignment(query):
            try await handlers.devices.changeFrameAlignment(query, by: who, into: &reply)
        case let .syncCheck(query):
            try await handlers.devices.syncCheck(query, into: &reply)
        case let .syncAudit(query):
            try await handlers.devices.syncAudit(query, into: &reply)
        case let .changeDetection(query):
            try await handlers.devices.changeDetection(query, by: who, into: &reply)
        case let .setDeviceOptics(query):
            try await handlers.devices.setDeviceOptics(query, by: who, into: &reply)
        case let .changeAudioProcessing(query):
            try await handlers.devices.changeAudioProcessing(query, by: who, into: &reply)
        case let .changeControl(query):
            try await handlers.devices.changeControl(query, by: who, into: &reply)
        case let .changeRegion(query):
            try await handlers.devices.changeRegion(query, by: who, into: &reply)
        case let .changePreRoll(query):
            try await handlers.devices.changePreRoll(query, by: who, into: &reply)
        case let .takeMoment(query):
            try await handlers.moments.takeMoment(query, by: who, into: &reply)
        case .listMoments:
            try await handlers.moments.listMoments(into: &reply)
        case let .changeMomentRule(query):
            try await handlers.momentRules.change(query, by: who, into: &reply)
        case .listMomentRules:
            try await handlers.momentRules.list(into: &reply)
        case let .changeStorage(query):
            try await handlers.storage.change(query, by: who, into: &reply)
        case .listStorage:
            try await handlers.storage.list(into: &reply)

        // Takes and their files.
        case let .startRecording(query):
            try await handlers.takes.startRecording(query, by: who, into: &reply)
        case let .stopRecording(query):
            try await handlers.takes.stopRecording(query, by: who, into: &reply)
        case let .noteRecording(query):
            try await handlers.takes.noteRecording(query, by: who, into: &reply)
        case .listRecordings:
            try await handlers.takes.listRecordings(into: &reply)
        case let .getRecording(query):
            try await handlers.takes.showRecording(query.takeID, into: &reply)
        case let .collectRecording(query):
            try await handlers.takes.collectRecording(query.takeID, by: who, into: &reply)
        case let .offloadRecording(query):
            try await handlers.takes.offloadRecording(query, by: who, into: &reply)
        case let .deleteRecording(query):
            try await handlers.recordingFiles.deleteRecording(query.takeID, by: who, into: &reply)
        case let .verifyRecording(query):
            try await handlers.recordingFiles.verifyRecording(query, into: &reply)
        case let .readSegment(query):
            try await handlers.recordingFiles.readSegment(query, into: &reply)
        case let .getFrameSets(query):
            try await handlers.recordingFiles.frameSets(query, into: &reply)

        // Stills.
        case let .takeStill(query):
            try await handlers.stills.takeStill(query, by: who, into: &reply)
        case .listStills:
            try await handlers.stills.listStills(into: &reply)
        case let .getStill(query):
            try await handlers.stills.showStill(query.stillID, into: &reply)
        case let .deleteStill(query):
            try await handlers.stills.deleteStill(query.stillID, by: who, into: &reply)
        case let .readStillFile(query):
            try await handlers.stills.readStillFile(query, into: &reply)

        // Access and consent.
        case let .createEnrollment(query):
            try await handlers.access.createEnrollment(query, by: who, into: &reply)
        case let .listEnrollments(query):
            try await handlers.access.listEnrollments(query, into: &reply)
        case let .revokeEnrollment(query):
            try await handlers.access.revokeEnrollment(query, by: who, into: &reply)
        case let .addOperator(query):
            try await handlers.access.addOperator(query, by: who, into: &reply)
        case let .removeOperator(query):
            try await handlers.access.removeOperator(query.name, by: who, into: &reply)
        case let .revokeNode(query):
            try await handlers.nodeAccess.revoke(query, by: who, into: &reply)
        case let .forgetNode(query):
            try await handlers.nodeAccess.forget(query.nodeID, by: who, into: &reply)
        case let .createDashboardSignIn(query):
            try await handlers.dashboardAccess.createDashboardSignIn(query, by: account, actor: who, into: &reply)
        case let .listDashboardSessions(query):
            try await handlers.dashboardAccess.listDashboardSessions(query, into: &reply)
        case let .endDashboardSession(query):
            try await handlers.dashboardAccess.endDashboardSession(query, by: who, into: &reply)
        case let .changeConsent(query):
            try await handlers.consent.changeConsent(query, by: account, actor: who, into: &reply)
        case let .getConsentHistory(query):
            try await handlers.consent.consentHistory(of: query.deviceID, into: &reply)
        case let .backupDatabase(query):
            try await handlers.backup.backupDatabase(query, by: who, into: &reply)
        }
        return nil
    }
}
