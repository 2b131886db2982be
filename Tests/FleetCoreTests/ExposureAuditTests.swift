import FleetCore
import FleetProtocol
import Testing

@Suite struct ExposureAuditTests {
    static let here = "5b1f3c2e-9a0d-4e6f-8b7a-0c1d2e3f4a5b"
    static let elsewhere = "0e0e0e0e-1111-4222-8333-444455556666"
    /// Fleet time = CLOCK_MONOTONIC + 1.7e18 on the coordinator's machine.
    let truth = ExposureAudit.Truth(bootID: here, fleetEpochOffset: 1_700_000_000_000_000_000)
    let origin: UInt64 = 1_700_000_000_000_000_000
    let interval: UInt64 = 40_000_000  // 25 fps

    /// A camera that read frames `sequences`, each exposed `phase` ns after its slot and
    /// stamped `stampError` ns off the truth, its timecode in this machine's monotonic clock.
    func answer(
        _ deviceID: String, sequences: Range<UInt64> = 0..<10, phase: Int64 = 0, stampError: (UInt64) -> Int64 = { _ in 0 },
        bootID: String = here, grid: Bool = true
    ) -> ExposureAudit.Answer {
        let samples = sequences.map { sequence -> Capfleet_V1_ExposureSample in
            let fleet = UInt64(Int64(origin + 100 * interval + sequence * interval) + phase)
            return .with {
                $0.sequence = sequence
                $0.clock = .hostMonotonic
                $0.timecodeBootID = bootID
                $0.timecodeNs = fleet - truth.fleetEpochOffset
                $0.stampedFleetNs = UInt64(Int64(fleet) + stampError(sequence))
                $0.uncertaintyNs = 50_000 + sequence
            }
        }
        return ExposureAudit.Answer(
            deviceID: deviceID, nodeID: "node-\(deviceID)", status: .ok,
            samples: .with {
                $0.samples = samples
                $0.framesSeen = UInt64(samples.count) + 2
                $0.framesDecoded = UInt64(samples.count) + 1
                $0.framesSkipped = 1
                $0.framesWithoutTimecode = 1
                $0.frameRate = 25
                $0.exposureSeconds = 0.01
                $0.gridOriginFleetNs = grid ? origin : 0
            })
    }

    func result(_ answers: [ExposureAudit.Answer]) -> Capfleet_V1_SyncAuditResult {
        ExposureAudit.result(of: answers, truth: truth, start: 1, end: 2)
    }

    @Test func stampOffsetIsStampedMinusTrue() {
        let audit = result([answer("cam-1", stampError: { Int64($0) * 1_000 - 3_000 })])
        let camera = audit.cameras[0]
        #expect(camera.status.isOK)
        #expect(camera.framesRead == 10)
        #expect(camera.framesSeen == 12)
        // Errors −3 µs … +6 µs: median (nearest rank) +1 µs, p99 and max the largest magnitude.
        #expect(camera.stampOffset.medianNs == 1_000)
        #expect(camera.stampOffset.maxNs == 6_000)
        #expect(camera.stampOffset.p99Ns == 6_000)
        #expect(camera.stampOffset.samples == 10)
        #expect(camera.stampUncertaintyNs == 50_009)
        #expect(audit.resolutionNs == 0)
        #expect(audit.clock == .hostMonotonic)
    }

    @Test func p99AndMaxKeepTheSignOfTheLargestMagnitude() {
        let figures = AuditFigures.signed([10, -500, 20, 30])
        #expect(figures.maxNs == -500)
        #expect(figures.p99Ns == -500)
        #expect(figures.medianNs == 10)
    }

    @Test func truePhaseIsTheExposureAgainstTheDevicesGrid() {
        let audit = result([answer("cam-1", phase: -2_500_000)])
        #expect(audit.cameras[0].truePhase.medianNs == 2_500_000)
        #expect(audit.cameras[0].truePhase.samples == 10)
        let ungridded = result([answer("cam-1", phase: -2_500_000, grid: false)])
        #expect(ungridded.cameras[0].truePhase.samples == 0)
    }

    @Test func spreadIsAcrossCamerasReadInTheSameInterval() {
        let audit = result([
            answer("cam-1", sequences: 0..<10, phase: 1_000), answer("cam-2", sequences: 0..<10, phase: 4_000),
            answer("cam-3", sequences: 5..<8, phase: -2_000),
        ])
        #expect(audit.exposureSpread.samples == 10)
        // Intervals 5–7 hold all three cameras (6 µs apart), the others two (3 µs).
        #expect(audit.exposureSpread.maxNs == 6_000)
        #expect(audit.exposureSpread.medianNs == 3_000)
        #expect(audit.cameras.allSatisfy { $0.status.isOK })
        #expect(ExposureAudit.status(of: audit).reason.isEmpty)
    }

    @Test func framesOfDifferentIntervalsAreNotPaired() {
        // cam-2 read only the frames cam-1 missed: no interval holds both.
        let audit = result([answer("cam-1", sequences: 0..<5), answer("cam-2", sequences: 5..<10)])
        #expect(audit.exposureSpread.samples == 0)
    }

    @Test func oneCameraHasNoSpread() {
        #expect(result([answer("cam-1")]).exposureSpread.samples == 0)
    }

    @Test func aCameraWithoutATimecodeInViewSaysSoAndHasNoFigures() {
        var blind = answer("cam-2", sequences: 0..<0)
        blind.samples!.framesSeen = 50
        blind.samples!.framesDecoded = 48
        let audit = result([answer("cam-1"), blind])
        let camera = audit.cameras[1]
        #expect(camera.status.code == .unavailable)
        #expect(camera.status.reason.hasPrefix("no timecode in view: 48 frames decoded, none showed one"))
        #expect(camera.status.reason.contains("--synthetic-overlay timecode@"))
        #expect(!camera.hasStampOffset)
        #expect(camera.framesRead == 0)
        #expect(audit.exposureSpread.samples == 0)
        #expect(ExposureAudit.status(of: audit).reason == "1 of 2 cameras have no figures: see each one's status")
    }

    @Test func anotherMachinesClockIsNotComparedWithFleetTime() {
        let audit = result([answer("cam-1", bootID: Self.elsewhere)])
        let camera = audit.cameras[0]
        #expect(camera.status.code == .unsupported)
        #expect(camera.status.reason.contains("another machine's clock (boot id \(Self.elsewhere)"))
        #expect(!camera.hasStampOffset)
    }

    @Test func aCameraThatCapturedNothingOrDecodedNothingSaysWhich() {
        var idle = answer("cam-1", sequences: 0..<0)
        idle.samples!.framesSeen = 0
        idle.samples!.framesDecoded = 0
        #expect(result([idle]).cameras[0].status.reason.contains("captured no frame during the audit"))
        var busy = answer("cam-1", sequences: 0..<0)
        busy.samples!.framesSeen = 30
        busy.samples!.framesDecoded = 0
        busy.samples!.framesSkipped = 30
        #expect(result([busy]).cameras[0].status.reason.contains("decoded none (30 skipped"))
    }

    @Test func anAgentsRefusalIsPassedOn() {
        let refused = ExposureAudit.Answer(
            deviceID: "cam-1", nodeID: "n", status: .failure(.unavailable, "node n did not answer in time"), samples: nil)
        #expect(result([refused]).cameras[0].status.reason == "node n did not answer in time")
    }

    @Test func aDisplaysRefreshIsTheResolution() {
        var shown = answer("cam-1")
        for index in shown.samples!.samples.indices {
            shown.samples!.samples[index].clock = .fleet
            shown.samples!.samples[index].timecodeNs += truth.fleetEpochOffset
            shown.samples!.samples[index].displayRefreshMhz = 60_000
        }
        let audit = result([shown])
        #expect(audit.clock == .fleet)
        #expect(audit.resolutionNs == 16_666_666)
        #expect(audit.cameras[0].stampOffset.maxNs == 0)
    }
}
