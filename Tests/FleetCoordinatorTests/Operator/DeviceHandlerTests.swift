import FleetCore
import FleetProtocol
import Foundation
import Testing

@testable import FleetCoordinator
@testable import FleetStore

/// The devices handler on an in-memory store with played agents: what it refuses before any
/// command goes out, what it stores and audits, and how the lease decides who may change.
@Suite(.timeLimit(.minutes(1))) struct DeviceHandlerTests {
    @Test func aZoomOutsideTheActiveFormatsRange_isRefusedAndAudited_andNoCommandGoesOut() async throws {
        let bed = try await OperatorBed()
        try await bed.lock("cam-1", by: "otto")
        var reply = Capfleet_V1_OperatorReply()
        try await bed.handlers.devices.changeZoom(
            .with {
                $0.deviceID = "cam-1"
                $0.factor = 8
            }, by: "otto", into: &reply)
        #expect(reply.status.code == .unsupported)
        #expect(reply.status.reason == "device cam-1: zoom 8x is outside the active format's range 1x-4x")
        let audit = try await bed.audit("device.zoom")
        #expect(audit.map(\.outcome) == ["refused"])
        #expect(audit.first?.actor == "otto")
        #expect(await bed.agents.sent(to: "cam-1").isEmpty)
        await bed.close()
    }

    @Test func aZoomInRange_isCommanded_auditedAndAnsweredWithTheDevice() async throws {
        let bed = try await OperatorBed()
        try await bed.lock("cam-1", by: "otto")
        var reply = Capfleet_V1_OperatorReply()
        try await bed.handlers.devices.changeZoom(
            .with {
                $0.deviceID = "cam-1"
                $0.factor = 2
                $0.rampRate = 1
            }, by: "otto", into: &reply)
        #expect(reply.status.code == .ok, "\(reply.status)")
        #expect(reply.zoomFactor == 2)
        #expect(reply.devices.map(\.deviceID) == ["cam-1"])
        #expect(try await bed.audit("device.zoom").map(\.detail) == ["ramp to 2x at 1/s"])
        guard case let .setZoom(sent)? = await bed.agents.sent(to: "cam-1").first else {
            Issue.record("the agent must be told to zoom")
            return
        }
        #expect(sent.factor == 2 && sent.rampRate == 1)
        await bed.close()
    }

    @Test func aRampFasterThanSixteenPowersOfTwo_isABadRequest() async throws {
        let bed = try await OperatorBed()
        try await bed.lock("cam-1", by: "otto")
        var reply = Capfleet_V1_OperatorReply()
        try await bed.handlers.devices.changeZoom(
            .with {
                $0.deviceID = "cam-1"
                $0.factor = 2
                $0.rampRate = 17
            }, by: "otto", into: &reply)
        #expect(reply.status.code == .badRequest)
        #expect(reply.status.reason == "a ramp rate is 0 (jump) or up to 16 powers of two per second")
        await bed.close()
    }

    @Test func aChangeUnderAnotherOperatorsLease_isRefusedNamingTheHolder_andAudited() async throws {
        let bed = try await OperatorBed()
        var locked = Capfleet_V1_OperatorReply()
        try await bed.handlers.devices.lock(
            .with {
                $0.deviceID = "cam-1"
                $0.seconds = 60
            }, by: "ana", session: nil, into: &locked)
        #expect(locked.status.code == .ok, "\(locked.status)")
        #expect(locked.devices.first?.leaseHolder == "ana")

        var reply = Capfleet_V1_OperatorReply()
        try await bed.handlers.devices.changeFrameRate(
            .with {
                $0.deviceID = "cam-1"
                $0.framesPerSecond = 10
            }, by: "otto", into: &reply)
        #expect(reply.status.code == .permissionDenied)
        #expect(reply.status.reason.contains("ana"), "\(reply.status.reason)")
        #expect(try await bed.audit("device.frame_rate").map(\.outcome) == ["refused"])
        #expect(await bed.agents.sent(to: "cam-1").isEmpty)

        // Once ana lets go, otto's change goes through.
        var unlocked = Capfleet_V1_OperatorReply()
        try await bed.handlers.devices.unlock(.with { $0.deviceID = "cam-1" }, by: "ana", into: &unlocked)
        #expect(unlocked.status.code == .ok)
        try await bed.lock("cam-1", by: "otto")
        reply = Capfleet_V1_OperatorReply()
        try await bed.handlers.devices.changeFrameRate(
            .with {
                $0.deviceID = "cam-1"
                $0.framesPerSecond = 10
            }, by: "otto", into: &reply)
        #expect(reply.status.code == .ok, "\(reply.status)")
        #expect(reply.activeFrameRate == 10)
        #expect(try await bed.store.device("cam-1")?.activeFrameRate == 10)
        await bed.close()
    }

    @Test func aFrameRateOutsideTheActiveFormat_isRefusedWithItsRanges() async throws {
        let bed = try await OperatorBed()
        try await bed.lock("cam-1", by: "otto")
        var reply = Capfleet_V1_OperatorReply()
        try await bed.handlers.devices.changeFrameRate(
            .with {
                $0.deviceID = "cam-1"
                $0.framesPerSecond = 60
            }, by: "otto", into: &reply)
        #expect(reply.status.code == .unsupported)
        #expect(reply.status.reason == "device cam-1: 60 fps is outside the active format 64x48 YUYV 1-30fps; its ranges: 1-30 fps")
        #expect(try await bed.audit("device.frame_rate").map(\.outcome) == ["refused"])
        await bed.close()
    }

    @Test func aFormatByIndex_isCommandedAndStored_anUnknownPresetIsABadRequest() async throws {
        let bed = try await OperatorBed()
        try await bed.lock("cam-1", by: "otto")
        var reply = Capfleet_V1_OperatorReply()
        try await bed.handlers.devices.changeFormat(
            .with {
                $0.deviceID = "cam-1"
                $0.formatIndex = 1
            }, by: "otto", into: &reply)
        #expect(reply.status.code == .ok, "\(reply.status)")
        #expect(try await bed.store.device("cam-1")?.activeFormatPosition == 1)
        #expect(try await bed.audit("device.format").map(\.detail) == ["128x96 MJPG 5-15fps"])

        var preset = Capfleet_V1_OperatorReply()
        try await bed.handlers.devices.changeFormat(
            .with {
                $0.deviceID = "cam-1"
                $0.preset = "bogus"
            }, by: "otto", into: &preset)
        #expect(preset.status.code == .badRequest)
        #expect(preset.status.reason.hasPrefix("no preset bogus; presets: "))
        await bed.close()
    }

    @Test func aRequestForAnUnknownDevice_isNotFoundPointingAtTheListing() async throws {
        let bed = try await OperatorBed()
        var reply = Capfleet_V1_OperatorReply()
        try await bed.handlers.devices.changeFocus(.with { $0.deviceID = "cam-9" }, by: "otto", into: &reply)
        #expect(reply.status.code == .notFound)
        #expect(reply.status.reason == "no device cam-9; see capfleet devices")
        await bed.close()
    }

    @Test func aDropRecoveryPolicyForAnOfflineNode_isStoredAndSaysWhenItArrives() async throws {
        let bed = try await OperatorBed(online: false)
        try await bed.lock("cam-2", by: "otto")
        var reply = Capfleet_V1_OperatorReply()
        try await bed.handlers.devices.setDropRecovery(
            .with {
                $0.deviceID = "cam-2"
                $0.policy = .with {
                    $0.enabled = true
                    $0.minimumFps = 5
                }
            }, by: "otto", into: &reply)
        #expect(reply.status.code == .ok)
        #expect(reply.status.reason == "stored; node node-a is offline and gets the policy when it registers")
        #expect(reply.devices.first?.dropRecovery.enabled == true)
        let audit = try await bed.audit("device.policy")
        #expect(audit.map(\.outcome) == ["ok"])
        #expect(audit.first?.detail.hasPrefix("drop recovery on: down to 5 fps") == true)
        #expect(await bed.agents.sent(to: "cam-2").isEmpty)
        await bed.close()
    }

    @Test func aPressurePolicyBelowFair_orWithoutARate_isABadRequest() async throws {
        let bed = try await OperatorBed()
        try await bed.lock("cam-1", by: "otto")
        var nominal = Capfleet_V1_OperatorReply()
        try await bed.handlers.devices.changePressurePolicy(
            .with {
                $0.deviceID = "cam-1"
                $0.policy = .with {
                    $0.enabled = true
                    $0.level = .nominal
                    $0.frameRate = 5
                }
            }, by: "otto", into: &nominal)
        #expect(nominal.status.code == .badRequest)
        #expect(nominal.status.reason == "a pressure policy acts at fair, serious, critical or shutdown")
        var rateless = Capfleet_V1_OperatorReply()
        try await bed.handlers.devices.changePressurePolicy(
            .with {
                $0.deviceID = "cam-1"
                $0.policy = .with {
                    $0.enabled = true
                    $0.level = .serious
                }
            }, by: "otto", into: &rateless)
        #expect(rateless.status.reason == "a pressure policy needs the frame rate to hold the device to (above 0)")
        #expect(try await bed.audit("device.policy").isEmpty)
        await bed.close()
    }

    @Test func aPressurePolicyOnline_isStoredThenPushed() async throws {
        let bed = try await OperatorBed()
        try await bed.lock("cam-1", by: "otto")
        var reply = Capfleet_V1_OperatorReply()
        try await bed.handlers.devices.changePressurePolicy(
            .with {
                $0.deviceID = "cam-1"
                $0.policy = .with {
                    $0.enabled = true
                    $0.level = .serious
                    $0.frameRate = 5
                }
            }, by: "otto", into: &reply)
        #expect(reply.status.code == .ok, "\(reply.status)")
        #expect(try await bed.audit("device.policy").map(\.outcome) == ["ok"])
        #expect(try await bed.audit("device.policy.push").map(\.outcome) == ["ok"])
        guard case .setPressurePolicy? = await bed.agents.sent(to: "cam-1").first else {
            Issue.record("the agent must be told the policy")
            return
        }
        await bed.close()
    }

    @Test func frameAlignmentAnAgentRefuses_isOKWithItsReason_andAuditedAsFailed() async throws {
        let bed = try await OperatorBed()
        try await bed.lock("cam-1", by: "otto")
        try await bed.lock("cam-2", by: "otto")
        await bed.agents.refuse("cam-2", reason: "the driver has no frame interval control")
        var reply = Capfleet_V1_OperatorReply()
        try await bed.handlers.devices.changeFrameAlignment(
            .with {
                $0.deviceIds = ["cam-1", "cam-2"]
                $0.enabled = true
            }, by: "otto", into: &reply)
        #expect(reply.status.code == .ok)
        #expect(reply.status.reason == "cam-2: the driver has no frame interval control")
        let audit = try await bed.audit("device.frame_alignment")
        #expect(audit.map(\.target) == ["cam-1", "cam-2"])
        #expect(audit.map(\.outcome) == ["ok", "failed"])
        #expect(audit.first?.detail == "aligned to the fleet-time grid from 1700000000000000000")
        await bed.close()
    }

    @Test func aSyncCheck_namesNoDevicesIsABadRequest_andReportsWhoDidNotAnswer() async throws {
        let bed = try await OperatorBed()
        var none = Capfleet_V1_OperatorReply()
        try await bed.handlers.devices.syncCheck(.init(), into: &none)
        #expect(none.status.code == .badRequest)
        #expect(none.status.reason == "name the devices to compare")

        // The played agents answer OK without a frame: neither counts as answered.
        var reply = Capfleet_V1_OperatorReply()
        try await bed.handlers.devices.syncCheck(.with { $0.deviceIds = ["cam-2", "cam-1"] }, into: &reply)
        #expect(reply.status.code == .ok)
        #expect(reply.status.reason == "2 of 2 devices did not answer")
        #expect(reply.syncCheck.entries.map(\.deviceID) == ["cam-2", "cam-1"])
        await bed.close()
    }

    @Test func aSyncAudit_asksEveryCameraForTheSameSeconds_andComparesWithThisMachinesClock() async throws {
        let bed = try await OperatorBed()
        // cam-1 films this machine's clock: exposures at 1.000 s, 1.040 s … monotonic, stamped 3 µs late.
        await bed.agents.audits(
            "cam-1",
            reading: .with {
                $0.samples = (0..<5).map { index in
                    .with {
                        $0.sequence = UInt64(index)
                        $0.clock = .hostMonotonic
                        $0.timecodeBootID = OperatorBed.bootID
                        $0.timecodeNs = 1_000_000_000 + UInt64(index) * 40_000_000
                        $0.stampedFleetNs = OperatorBed.fleetEpochOffset + $0.timecodeNs + 3_000
                        $0.uncertaintyNs = 20_000
                    }
                }
                $0.framesSeen = 5
                $0.framesDecoded = 5
                $0.frameRate = 25
            })
        await bed.agents.audits(
            "cam-2",
            reading: .with {
                $0.framesSeen = 25
                $0.framesDecoded = 25
                $0.framesWithoutTimecode = 25
                $0.frameRate = 25
            })
        var reply = Capfleet_V1_OperatorReply()
        try await bed.handlers.devices.syncAudit(
            .with {
                $0.deviceIds = ["cam-2", "cam-1"]
                $0.seconds = 120
            }, into: &reply)
        #expect(reply.status.code == .ok)
        #expect(reply.status.reason == "1 of 2 cameras have no figures: see each one's status")
        let cameras = reply.syncAudit.cameras
        #expect(cameras.map(\.deviceID) == ["cam-2", "cam-1"])
        #expect(cameras[0].status.reason.hasPrefix("no timecode in view: 25 frames decoded, none showed one"))
        #expect(cameras[1].status.isOK)
        #expect(cameras[1].stampOffset.medianNs == 3_000)
        #expect(cameras[1].stampUncertaintyNs == 20_000)
        #expect(reply.syncAudit.clock == .hostMonotonic)
        for deviceID in ["cam-1", "cam-2"] {
            let sent = await bed.agents.sent(to: deviceID)
            guard case let .auditExposures(request)? = sent.last else {
                Issue.record("\(deviceID) was not asked to audit: \(sent)")
                continue
            }
            #expect(request.durationMs == 60_000, "an audit lasts at most a minute")
        }
        await bed.close()
    }

    @Test func aSyncAudit_refusesNoCamerasAndTheSameCameraTwice() async throws {
        let bed = try await OperatorBed()
        var none = Capfleet_V1_OperatorReply()
        try await bed.handlers.devices.syncAudit(.init(), into: &none)
        #expect(none.status.code == .badRequest)
        var twice = Capfleet_V1_OperatorReply()
        try await bed.handlers.devices.syncAudit(.with { $0.deviceIds = ["cam-1", "cam-1"] }, into: &twice)
        #expect(twice.status.code == .badRequest)
        #expect(await bed.agents.sent(to: "cam-1").isEmpty)
        await bed.close()
    }

    @Test func detectionAnAgentRefuses_isItsRefusal_andNothingIsStored() async throws {
        let bed = try await OperatorBed()
        try await bed.lock("cam-1", by: "otto")
        await bed.agents.refuse("cam-1", reason: "no barcode scanner on this host")
        var reply = Capfleet_V1_OperatorReply()
        try await bed.handlers.devices.changeDetection(
            .with {
                $0.deviceID = "cam-1"
                $0.settings = .with { $0.codes = ["qr"] }
            }, by: "otto", into: &reply)
        #expect(reply.status.code == .unsupported)
        #expect(reply.status.reason == "no barcode scanner on this host")
        #expect(try await bed.store.detection(deviceID: "cam-1") == nil)
        #expect(try await bed.audit("device.detection").map(\.outcome) == ["failed"])
        await bed.close()
    }

    @Test func optics_areStoredAndAuditedWithoutALease() async throws {
        let bed = try await OperatorBed()
        var locked = Capfleet_V1_OperatorReply()
        try await bed.handlers.devices.lock(.with { $0.deviceID = "cam-1" }, by: "ana", session: nil, into: &locked)
        var reply = Capfleet_V1_OperatorReply()
        try await bed.handlers.devices.setDeviceOptics(
            .with {
                $0.deviceID = "cam-1"
                $0.optics = .with { $0.fieldOfViewDegrees = 70 }
            }, by: "otto", into: &reply)
        #expect(reply.status.code == .ok, "\(reply.status)")
        #expect(reply.optics.changedBy == "otto")
        #expect(try await bed.store.optics(deviceID: "cam-1")?.optics.fieldOfViewDegrees == 70)
        #expect(try await bed.audit("device.optics").map(\.actor) == ["otto"])
        await bed.close()
    }

    @Test func aControl_isCheckedAgainstTheStoredDescription_thenSetUnderTheLease_andTheValueReadBackStored() async throws {
        let bed = try await OperatorBed()
        let gain = Capfleet_V1_DeviceControl.with {
            $0.id = 0x0098_0913
            $0.name = "Gain"
            $0.type = "integer"
            $0.minimum = 0
            $0.maximum = 100
            $0.step = 1
            $0.hasValue_p = true
            $0.value = 10
        }
        let descriptor = Capfleet_V1_DeviceDescriptor.with {
            $0.deviceID = "cam-1"
            $0.controls = [gain]
        }
        try await bed.store.saveDescriptor(deviceID: "cam-1", bytes: Data(try descriptor.serializedBytes() as [UInt8]))
        func change(_ id: UInt32, _ value: Int64) async throws -> Capfleet_V1_OperatorReply {
            var reply = Capfleet_V1_OperatorReply()
            try await bed.handlers.devices.changeControl(
                .with {
                    $0.deviceID = "cam-1"
                    $0.controlID = id
                    $0.value = value
                }, by: "otto", into: &reply)
            return reply
        }
        let unleased = try await change(0x0098_0913, 51)
        #expect(unleased.status.code != .ok, "\(unleased.status)")
        try await bed.lock("cam-1", by: "otto")
        let unknown = try await change(0x0098_0900, 1)
        #expect(unknown.status.code == .badRequest && unknown.status.reason.contains("it has gain (0x00980913)"), "\(unknown.status)")
        let outside = try await change(0x0098_0913, 101)
        #expect(outside.status.code == .badRequest && outside.status.reason == "cam-1: 101 is outside Gain's range 0…100", "\(outside.status)")
        #expect(await bed.agents.sent(to: "cam-1").isEmpty, "nothing out of range reaches the agent")

        let set = try await change(0x0098_0913, 51)
        #expect(set.status.code == .ok && set.control.value == 50, "what the agent read back: \(set)")
        let stored = try Capfleet_V1_DeviceDescriptor(serializedBytes: try #require(try await bed.store.descriptor(deviceID: "cam-1")))
        #expect(stored.controls.first?.value == 50)
        #expect(try await bed.audit("device.control").filter { $0.outcome == "ok" }.map(\.detail) == ["gain = 51 (read back 50)"])
        await bed.close()
    }

    @Test func aRegionOfInterest_isAGenICamCamerasOnly_movedUnderTheLease_andAuditedWithTheWindowAsPlaced() async throws {
        let bed = try await OperatorBed()
        let window = VideoFormat(pixelFormat: .grey, width: 640, height: 480, frameRateRanges: [.init(min: 1, max: 30)])
        _ = try await bed.store.registerNode(
            NodeRegistration(
                nodeID: "node-a", name: "alpha", hostname: "a", softwareVersion: "test", address: "127.0.0.1",
                devices: [
                    .init(
                        description: DeviceDescription(deviceID: "cam-1", name: "cam-1", driver: "test", kind: .synthetic, formats: [window]),
                        activeFormatIndex: 0, activeFrameRate: 30),
                    .init(
                        description: DeviceDescription(
                            deviceID: "genicam-A-B-1", name: "gc", driver: "aravis GigEVision", kind: .genicam, formats: [window]),
                        activeFormatIndex: 0, activeFrameRate: 30),
                ]), at: 2)
        func move(_ device: String, centred: Bool = false, _ left: Int32 = 0, _ top: Int32 = 0) async throws -> Capfleet_V1_OperatorReply {
            var reply = Capfleet_V1_OperatorReply()
            try await bed.handlers.devices.changeRegion(
                .with {
                    $0.deviceID = device
                    $0.centred = centred
                    ($0.left, $0.top) = (left, top)
                }, by: "otto", into: &reply)
            return reply
        }
        try await bed.lock("cam-1", by: "otto")
        let synthetic = try await move("cam-1", 10, 10)
        #expect(synthetic.status.code == .badRequest && synthetic.status.reason.contains("crops through zoom"), "\(synthetic.status)")
        let unleased = try await move("genicam-A-B-1", 101, 202)
        #expect(unleased.status.code != .ok, "\(unleased.status)")
        try await bed.lock("genicam-A-B-1", by: "otto")
        let negative = try await move("genicam-A-B-1", -4, 0)
        #expect(negative.status.code == .badRequest, "\(negative.status)")
        #expect(await bed.agents.sent(to: "genicam-A-B-1").isEmpty, "a corner left of the sensor never reaches the agent")
        let placed = try await move("genicam-A-B-1", 101, 202)
        #expect(placed.status.code == .ok && [placed.region.left, placed.region.top] == [100, 200], "what the agent placed: \(placed)")
        let centred = try await move("genicam-A-B-1", centred: true)
        #expect(centred.region.left == 704 && centred.region.top == 784)
        #expect(
            try await bed.audit("device.region").filter { $0.outcome == "ok" }.map(\.detail) == [
                "at 101,202: 640x480 at 100,200", "centred: 640x480 at 704,784",
            ])
        await bed.close()
    }

    @Test func aPreRoll_isSetUnderTheLease_storedForTheNextRegistration_andAudited() async throws {
        let bed = try await OperatorBed()
        func change(_ milliseconds: UInt32, budget: UInt64 = 0) async throws -> Capfleet_V1_OperatorReply {
            var reply = Capfleet_V1_OperatorReply()
            try await bed.handlers.devices.changePreRoll(
                .with {
                    $0.deviceID = "cam-1"
                    $0.milliseconds = milliseconds
                    $0.budgetBytes = budget
                }, by: "otto", into: &reply)
            return reply
        }
        let unleased = try await change(5_000)
        #expect(unleased.status.code != .ok, "\(unleased.status)")
        try await bed.lock("cam-1", by: "otto")
        let tooLong = try await change(61_000)
        #expect(tooLong.status.code == .badRequest && tooLong.status.reason.contains("60 s"), "\(tooLong.status)")
        let tiny = try await change(5_000, budget: 1000)
        #expect(tiny.status.code == .badRequest && tiny.status.reason.contains("1 MiB"), "\(tiny.status)")
        #expect(await bed.agents.sent(to: "cam-1").isEmpty, "nothing refused reaches the agent")
        let set = try await change(5_000, budget: 64 << 20)
        #expect(set.status.code == .ok && set.preRoll.milliseconds == 5_000 && set.preRoll.keptNs == 1_000_000_000, "\(set)")
        #expect(try await bed.store.preRoll(deviceID: "cam-1")?.settings == PreRollSettings(seconds: 5, budgetBytes: 64 << 20))
        let defaulted = try await change(2_500)
        #expect(defaulted.preRoll.budgetBytes == UInt64(PreRollSettings.defaultBudgetBytes), "a budget of 0 is the default: \(defaulted)")
        let off = try await change(0)
        #expect(off.status.code == .ok)
        #expect(try await bed.store.preRoll(deviceID: "cam-1")?.settings.isOn == false)
        #expect(
            try await bed.audit("device.pre_roll").filter { $0.outcome == "ok" }.map(\.detail) == [
                "5.0 s within 64 MiB", "2.5 s within 256 MiB", "off",
            ])
        await bed.close()
    }
}
