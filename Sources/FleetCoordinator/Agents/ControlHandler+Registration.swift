import FleetBus
import FleetCore
import FleetProtocol
import FleetStore
import Foundation
import Logging

/// Enrollment and registration: a token spent on a node's key, a HELLO checked against the
/// fleet database and welcomed, and the policies the coordinator keeps pushed again.
extension ControlHandler {

    static func numbersAreFinite(_ device: Capfleet_V1_DeviceDescriptor) -> Bool {
        [device.activeFrameRate, device.activeMinFrameRate].allSatisfy(\.isFinite)
            && device.formats.allSatisfy { format in
                [format.fieldOfViewDegrees, format.maxZoomFactor, format.upscaleThresholdZoomFactor].allSatisfy(\.isFinite)
                    && format.frameRateRanges.allSatisfy { $0.minFps.isFinite && $0.maxFps.isFinite }
            }
    }

    /// Spends a use of an enrollment token on the agent's key, or says exactly why not. The
    /// same node and key again (its agent never heard the answer) get the same answer and
    /// spend nothing.
    func enroll(_ enroll: Capfleet_V1_Enroll, tokenKey: String, from routed: RoutedMessage) async {
        guard let nodeKey = CurvePublicKey(bytes: Array(enroll.nodePublicKey)), !enroll.nodeID.isEmpty, enroll.nodeID.count <= 128,
            enroll.requestedName.count <= 128
        else {
            refuse(routed, .undecodable, "Enroll needs a 32-byte node_public_key and a node_id (and a requested_name of at most 128 characters)")
            return
        }
        let now = clock.unixMilliseconds()
        let token = String(tokenKey.prefix(8))
        let (nodeID, peer) = (enroll.nodeID, routed.peer)
        let asked = enroll.requestedName.isEmpty ? "" : " (it asked to be \(enroll.requestedName))"
        let outcome: EnrollmentOutcome
        do {
            outcome = try await store.enroll(
                tokenKey: tokenKey, nodeKey: nodeKey.z85, nodeID: nodeID, requestedName: enroll.requestedName,
                at: now
            ) { outcome, facts in
                let left = facts.map { "; \($0.remaining) of \($0.uses) use(s) left" } ?? ""
                let (result, detail): (String, String) =
                    switch outcome {
                    case let .enrolled(name, use, uses):
                        (
                            "ok",
                            "enrolled as \(name) with key \(nodeKey.fingerprint)… using token \(token)… (use \(use) of \(uses)\(left)) from \(peer)"
                        )
                    case let .enrolledAgain(name):
                        (
                            "ok",
                            "enrolled again as \(name) with the same key \(nodeKey.fingerprint)… using token \(token)…: a repeat, no use spent\(left); from \(peer)"
                        )
                    case let .refused(refusal):
                        ("refused", "token \(token)… from \(peer)\(asked): \(Self.explain(refusal))\(left)")
                    }
                return AuditEntry(at: now, actor: "agent:\(nodeID)", action: "node.enroll", target: nodeID, outcome: result, detail: detail)
            }
        } catch {
            logger.error("enrollment failed", metadata: ["node.id": "\(nodeID)", "error": "\(error)"])
            reply(
                routed, .with { $0.enrolled = .with { $0.status = .failure(.internal, "the coordinator could not record the enrollment: \(error)") } }
            )
            return
        }
        switch outcome {
        case let .refused(refusal):
            rejections.reject(endpoint: Self.endpointName, reason: .badToken, peer: routed.peer, detail: Self.explain(refusal))
            reply(
                routed,
                .with {
                    $0.enrolled = .with {
                        $0.status = .failure(.permissionDenied, Self.explain(refusal))
                        $0.nodeID = nodeID
                    }
                })
        case let .enrolled(name, _, _), let .enrolledAgain(name):
            if case .enrolled = outcome {
                logger.notice("node enrolled", metadata: ["node.id": "\(nodeID)", "node.name": "\(name)", "peer": "\(routed.peer)"])
                events.emit(.nodeEnrolled, nodeID: nodeID, message: "\(name) enrolled from \(routed.peer) (key \(nodeKey.fingerprint)…)")
            } else {
                logger.info("a repeated enrollment answered as before", metadata: ["node.id": "\(nodeID)", "node.name": "\(name)"])
            }
            reply(
                routed,
                .with {
                    $0.enrolled = .with {
                        $0.status = .ok
                        $0.nodeID = nodeID
                        $0.nodeName = name
                    }
                })
        }
    }

    static func explain(_ refusal: EnrollmentRefusal) -> String {
        let format = { (ms: Int64) in Date(timeIntervalSince1970: Double(ms) / 1000).formatted(.iso8601) }
        return switch refusal {
        case .unknownToken: "this coordinator never issued that token (forged, or from another coordinator)"
        case let .expired(at): "the token expired at \(format(at)); ask an admin for a new one (capfleet enroll --name NAME)"
        case let .revoked(at, by): "the token was revoked at \(format(at)) by \(by); ask an admin for a new one"
        case let .alreadyUsed(1, at, nodeID):
            "the token was already used at \(format(at)) by node \(nodeID); tokens work once, ask an admin for a new one"
        case let .alreadyUsed(uses, at, nodeID):
            "all \(uses) uses of the token are spent (the last at \(format(at)) by node \(nodeID)); ask an admin for a new one (capfleet enroll --uses N --name-prefix PREFIX)"
        case let .usedByThisNodeBefore(at, name, keyRevoked: true):
            "this node enrolled with this token at \(format(at)) as \(name), and an admin revoked it since; only a new token brings it back"
        case let .usedByThisNodeBefore(at, name, keyRevoked: false):
            "this node enrolled with this token at \(format(at)) as \(name), with another key; a token admits a node once: an admin must revoke the node (capfleet nodes revoke \(name)) and make a new token"
        case let .nodeAlreadyEnrolled(nodeID):
            "node \(nodeID) is enrolled with another key; an admin must revoke it first (capfleet nodes revoke \(nodeID))"
        case .keyAlreadyKnown: "this key was enrolled before; the agent must make a fresh key pair to enroll again"
        case let .invalidName(name): "the name \(name) (capfleet agent --name) is not a node name: \(AccessNames.rule)"
        case let .nameTaken(name, owner):
            "the name \(name) (capfleet agent --name) is taken by node \(owner); start the agent with another --name, or without one to be named by the token's prefix"
        }
    }

    func register(_ hello: Capfleet_V1_Hello, from routed: RoutedMessage) async {
        guard hello.protocolVersion == WireDefaults.protocolMajor else {
            rejections.reject(
                endpoint: Self.endpointName, reason: .incompatibleVersion, peer: routed.peer,
                detail: "node \(hello.nodeID) speaks protocol \(hello.protocolVersion.rawValue)")
            reply(
                routed,
                .with {
                    $0.welcome = .with {
                        $0.status = .failure(
                            .incompatible,
                            "this coordinator speaks protocol version \(WireDefaults.protocolMajor.rawValue) (any minor); the agent sent \(hello.protocolVersion.rawValue). Upgrade the older of the two."
                        )
                        $0.coordinatorID = coordinatorID
                        $0.protocolVersion = WireDefaults.protocolMajor
                    }
                })
            return
        }
        guard !hello.nodeID.isEmpty, hello.devices.allSatisfy({ !$0.deviceID.isEmpty }) else {
            refuse(routed, .undecodable, "HELLO without a node id or with a device without an id")
            return
        }
        for device in hello.devices {
            if let problem = DeviceIdentityRule.problem(with: device.deviceID, kind: SourceKind(wire: device.kind) ?? .v4l2) {
                refuse(routed, .invalidDeviceID, "HELLO refused as a whole: \(problem) (device-model.md, \"Stable device ids\")")
                return
            }
        }
        // SQLite stores NaN as NULL, which no longer reads back as a number: refuse it here.
        guard hello.devices.allSatisfy(Self.numbersAreFinite) else {
            refuse(routed, .invalidFormat, "HELLO with a frame rate, field of view or zoom factor that is not a finite number")
            return
        }
        // Decided here, before any await: an operator removing the node excludes its HELLO.
        let ticket: NodeSessionBook.RegistrationTicket
        switch book.hello(
            nodeID: hello.nodeID, agentInstance: hello.agentInstance, helloFingerprint: Self.fingerprint(of: hello),
            routingID: routed.routingID, now: clock.monotonicNow())
        {
        case let .register(issued):
            ticket = issued
        case .refuseWhileRemoving:
            reply(
                routed,
                .with {
                    $0.welcome = .with {
                        $0.status = .failure(
                            .unavailable, "node \(hello.nodeID) is being removed from the fleet by an operator; ask again in a moment")
                        $0.coordinatorID = coordinatorID
                        $0.protocolVersion = WireDefaults.protocolMajor
                    }
                })
            return
        case .awaitRegistration:
            logger.debug("a repeated HELLO waits for the registration under way", metadata: ["node.id": "\(hello.nodeID)"])
            return
        case .welcomeAgain:
            logger.debug("a repeated HELLO of a registered node: welcomed again", metadata: ["node.id": "\(hello.nodeID)"])
            reply(routed, welcome(.ok))
            return
        }
        // Repeats of this HELLO that arrived meanwhile get the same answer.
        var answered: Capfleet_V1_CoordinatorMessage?
        func answer(_ message: Capfleet_V1_CoordinatorMessage) {
            answered = message
            reply(routed, message)
        }
        defer {
            let waiting = book.endRegistration(ticket)
            if let answered, let bytes: [UInt8] = try? answered.serializedBytes() {
                for routingID in waiting { endpoint.reply(to: routingID, parts: [bytes]) }
            }
        }
        // The node is called what the admin named it at enrollment; the devices it lists must
        // not be another online node's (checked against the store: no answer, no registration).
        let enrolledName: String?
        var storedOwners: [(deviceID: String, owner: String)] = []
        do {
            enrolledName = try await store.liveNodeKey(hello.nodeID)?.name
            for device in hello.devices {
                if let owner = try await store.device(device.deviceID)?.nodeId { storedOwners.append((device.deviceID, owner)) }
            }
        } catch {
            logger.error("registration failed", metadata: ["node.id": "\(hello.nodeID)", "error": "\(error)"])
            answer(
                .with {
                    $0.welcome = .with {
                        $0.status = .failure(.internal, "the coordinator could not read the fleet database to register this node: \(error)")
                        $0.coordinatorID = coordinatorID
                    }
                })
            return
        }
        let registration = NodeRegistration(
            nodeID: hello.nodeID, name: enrolledName ?? hello.nodeName, hostname: hello.hostname, softwareVersion: hello.softwareVersion,
            address: routed.peer,
            devices: hello.devices.map { device in
                NodeRegistration.Device(
                    description: DeviceDescription(wire: device),
                    activeFormatIndex: Int(device.activeFormatIndex), activeFrameRate: device.activeFrameRate)
            }, encoders: hello.encoders.compactMap(HostEncoder.init(wire:)))
        // A camera may move to another host (its id is stable), but not while the node that
        // has it is online: a node's key must not let it take another node's camera. Decided
        // after the reads, on who is online now.
        if let (deviceID, owner) = storedOwners.first(where: { $0.owner != hello.nodeID && book.isOnline($0.owner) }) {
            rejections.reject(
                endpoint: Self.endpointName, reason: .wrongIdentity, peer: routed.peer,
                detail: "node \(hello.nodeID) registered device \(deviceID), which online node \(owner) has")
            answer(
                .with {
                    $0.welcome = .with {
                        $0.status = .failure(
                            .permissionDenied,
                            "device \(deviceID) belongs to node \(owner), which is online; a camera can move to another node only while its old node is offline"
                        )
                        $0.coordinatorID = coordinatorID
                        $0.protocolVersion = WireDefaults.protocolMajor
                    }
                })
            return
        }
        do {
            let outcome = try await store.registerNode(registration, at: clock.unixMilliseconds())
            // The first report after a restart (of either side) is compared with the state stored before.
            clockWatch.registered(hello.nodeID, stored: try await store.clock(nodeID: hello.nodeID)?.wire.sync)
            var restartedDevices: [String] = []
            // What the devices captured before this coordinator started (read once per HELLO).
            let storedCaptures = try await store.captureCounts()
            for device in hello.devices {
                try await store.saveDescriptor(deviceID: device.deviceID, bytes: Data(try device.serializedBytes() as [UInt8]))
                let stored = try await store.device(device.deviceID)
                if ingest.admit(
                    deviceID: device.deviceID, nodeID: hello.nodeID, agentInstance: hello.agentInstance,
                    resumingFrames: UInt64(stored?.framesReceived ?? 0), bytes: UInt64(stored?.bytesReceived ?? 0),
                    captures: storedCaptures[device.deviceID])
                {
                    restartedDevices.append(device.deviceID)
                }
            }
            if !restartedDevices.isEmpty {
                events.emit(
                    .agentRestarted, nodeID: hello.nodeID,
                    message:
                        "agent process \(hello.agentInstance) replaced the one before: sequence numbers and drop counts of \(restartedDevices.joined(separator: ", ")) start over (a restart, not a gap)"
                )
            }
            // Commands that went to an earlier agent process of this node are answered now.
            let sessionActions = book.registered(
                nodeID: hello.nodeID, agentInstance: hello.agentInstance,
                helloFingerprint: Self.fingerprint(of: hello), routingID: routed.routingID,
                now: clock.monotonicNow())
            answerInNodesPlace(sessionActions)
            answer(welcome(.ok))
            logger.info(
                "node registered",
                metadata: [
                    "node.id": "\(hello.nodeID)", "node.name": "\(hello.nodeName)",
                    "devices": "\(hello.devices.count)", "peer": "\(routed.peer)",
                ])
            events.emit(
                .nodeRegistered, nodeID: hello.nodeID, message: "\(hello.nodeName) registered \(hello.devices.count) device(s) from \(routed.peer)")
            for deviceID in outcome.addedDeviceIDs {
                events.emit(.deviceAdded, nodeID: hello.nodeID, deviceID: deviceID, message: "new device \(deviceID)")
            }
            if sessionActions.contains(.cameOnline(nodeID: hello.nodeID)) {
                events.emit(.nodeOnline, nodeID: hello.nodeID, message: "\(hello.nodeName) is online")
            }
            // Policies and frame alignment live in the coordinator: a restarted agent gets them again.
            let nodeID = hello.nodeID
            let deviceIDs = hello.devices.map(\.deviceID)
            // Live flow tells it which devices' frames are wanted; takes, which parts it records.
            nodeEvents.publish(.registered(nodeID: nodeID, deviceIDs: deviceIDs))
            let cameraIDs = Set(hello.devices.filter { SourceKind(wire: $0.kind)?.isCamera == true }.map(\.deviceID))
            Task { await self.pushPolicies(nodeID: nodeID, deviceIDs: deviceIDs, cameraIDs: cameraIDs) }
        } catch {
            logger.error("registration failed", metadata: ["node.id": "\(hello.nodeID)", "error": "\(error)"])
            answer(
                .with {
                    $0.welcome = .with {
                        $0.status = .failure(.internal, "the coordinator could not record the registration: \(error)")
                        $0.coordinatorID = coordinatorID
                    }
                })
        }
    }

    /// The WELCOME of a registered node: where its frames, clock probes and recordings go.
    func welcome(_ status: Capfleet_V1_Status) -> Capfleet_V1_CoordinatorMessage {
        .with {
            $0.welcome = .with {
                $0.status = status
                $0.coordinatorID = coordinatorID
                $0.frameIngestPort = UInt32(configuration.frameIngestPort)
                $0.clockPort = UInt32(configuration.clockPort)
                $0.recordPort = UInt32(recordPort)
                $0.heartbeatIntervalMs = configuration.heartbeatIntervalMilliseconds
                $0.heartbeatLiveness = configuration.heartbeatLiveness
                $0.statusHeartbeats = true
                $0.protocolVersion = WireDefaults.protocolMajor
            }
        }
    }

    /// What a HELLO says of the node and its devices, without the time it was sent: the same
    /// process saying the same thing again is a repeat, not a new registration.
    static func fingerprint(of hello: Capfleet_V1_Hello) -> Int {
        var hasher = Hasher()
        hasher.combine(hello.nodeName)
        hasher.combine(hello.hostname)
        hasher.combine(hello.softwareVersion)
        hasher.combine(hello.protocolMinor)
        for device in hello.devices { hasher.combine((try? device.serializedBytes() as [UInt8]) ?? []) }
        for encoder in hello.encoders { hasher.combine((try? encoder.serializedBytes() as [UInt8]) ?? []) }
        return hasher.finalize()
    }

    func pushPolicies(nodeID: String, deviceIDs: [String], cameraIDs: Set<String>) async {
        // Consent first: the agent enforces what it last stored meanwhile (fail-closed), and a
        // device it never heard of stays not determined until it hears otherwise.
        for deviceID in deviceIDs {
            // Unread, the device stays fail-closed (not determined) and someone hears why.
            let record = await policyRead("consent", of: deviceID, nodeID: nodeID) { try await $0.consent(deviceID: deviceID) } ?? nil
            let answer = await command(
                .setConsent(
                    .with {
                        $0.state = (record?.consentState ?? .notDetermined).wire
                        $0.reason = record?.reason ?? ""
                        $0.changedUnixMs = record?.changedAt ?? 0
                    }), deviceID: deviceID, nodeID: nodeID)
            if answer.status.code != .ok {
                logger.warning("cannot push consent", metadata: ["device.id": "\(deviceID)", "reason": "\(answer.status.reason)"])
            }
        }
        for deviceID in deviceIDs {
            if let record = await policyRead("pressure policy", of: deviceID, nodeID: nodeID, { try await $0.pressurePolicy(deviceID: deviceID) })
                ?? nil,
                record.enabled,
                let level = PressureLevel(rawValue: record.level)
            {
                let policy = PressurePolicy(isEnabled: true, level: level, frameRate: record.frameRate)
                let answer = await command(.setPressurePolicy(.with { $0.policy = policy.wire() }), deviceID: deviceID, nodeID: nodeID)
                if answer.status.code != .ok {
                    logger.warning("cannot restore the pressure policy", metadata: ["device.id": "\(deviceID)", "reason": "\(answer.status.reason)"])
                }
            }
            guard
                let record = await policyRead(
                    "drop-recovery policy", of: deviceID, nodeID: nodeID, { try await $0.dropRecoveryPolicy(deviceID: deviceID) }) ?? nil,
                record.enabled
            else { continue }
            let policy = DropRecoveryPolicy(
                isEnabled: true, minimumFramesPerSecond: record.minimumFps, lateDropShare: record.lateDropShare,
                quietIntervalsToRestore: record.quietSeconds)
            let answer = await command(.setDropRecovery(.with { $0.policy = policy.wire }), deviceID: deviceID, nodeID: nodeID)
            if answer.status.code != .ok {
                logger.warning(
                    "cannot restore the drop-recovery policy", metadata: ["device.id": "\(deviceID)", "reason": "\(answer.status.reason)"])
            }
        }
        for deviceID in deviceIDs {
            // What each device's agent looks for, as last set, with framing as the fleet's control says.
            let detection =
                await policyRead("detection settings", of: deviceID, nodeID: nodeID, { try await $0.detection(deviceID: deviceID) }) ?? nil
            let wanted = configuration.framingPolicy.effective(detection?.settings).flatMap { settings in
                // The policy frames cameras only: streams and microphones have no faces.
                settings.isOn && (detection != nil || cameraIDs.contains(deviceID)) ? settings : nil
            }
            await restore(
                "detection", wanted.map { settings in .setDetection(.with { $0.settings = settings.wire }) }, deviceID: deviceID, nodeID: nodeID)
            // Each camera's pre-roll, as last set.
            let preRoll = await policyRead("pre-roll", of: deviceID, nodeID: nodeID, { try await $0.preRoll(deviceID: deviceID) }) ?? nil
            await restore(
                "pre-roll",
                preRoll.flatMap { record in
                    record.settings.isOn ? .setPreRoll(record.settings.command) : nil
                }, deviceID: deviceID, nodeID: nodeID)
            // Each microphone's processing, as last set.
            let processing =
                await policyRead("audio processing", of: deviceID, nodeID: nodeID, { try await $0.audioProcessing(deviceID: deviceID) }) ?? nil
            await restore(
                "audio processing",
                processing.flatMap { record in record.settings.isOn ? .setAudioProcessing(.with { $0.processing = record.settings.wire }) : nil },
                deviceID: deviceID, nodeID: nodeID)
        }
        // Alignment on or off as last set; on, with this run's grid (the origin an earlier
        // coordinator chose lies in another fleet time).
        for deviceID in deviceIDs {
            guard
                let setting = await policyRead("frame alignment", of: deviceID, nodeID: nodeID, { try await $0.frameAlignment(deviceID: deviceID) })
                    ?? nil
            else { continue }
            let answer = await command(
                .setFrameAlignment(
                    .with {
                        $0.enabled = setting.enabled
                        $0.gridOriginFleetNs = fleetTime.alignmentGridOrigin
                        $0.triggerLine = setting.triggerLine
                        $0.lineSourceDeviceID = setting.lineSourceDeviceId
                        $0.outputLine = setting.outputLine
                    }), deviceID: deviceID, nodeID: nodeID)
            if answer.status.code != .ok {
                logger.warning("cannot restore frame alignment", metadata: ["device.id": "\(deviceID)", "reason": "\(answer.status.reason)"])
            }
        }
    }

    /// Pushes a stored setting again (nil: nothing to push); an agent that refuses it keeps
    /// what it has, and the refusal is logged.
    private func restore(_ what: String, _ action: Capfleet_V1_Command.OneOf_Action?, deviceID: String, nodeID: String) async {
        guard let action else { return }
        let answer = await command(action, deviceID: deviceID, nodeID: nodeID)
        if answer.status.code != .ok {
            logger.warning("cannot restore \(what)", metadata: ["device.id": "\(deviceID)", "reason": "\(answer.status.reason)"])
        }
    }

    /// A device's stored setting, to push again; a read the store refuses is logged as an
    /// error, and the setting is not pushed (the agent keeps what it has; consent stays
    /// fail-closed).
    func policyRead<T: Sendable>(
        _ what: String, of deviceID: String, nodeID: String,
        _ read: @Sendable (FleetDatabase) async throws -> T
    ) async -> T? {
        do {
            return try await read(store)
        } catch {
            logger.error(
                "cannot read a device's setting to push it again", metadata: ["device.id": "\(deviceID)", "setting": "\(what)", "error": "\(error)"])
            return nil
        }
    }
}
