import FleetClient
import FleetProtocol
import Foundation
import Testing

/// The `--json` views name their fields in CodingKeys (FleetTables no longer converts every key
/// at encode time). A field whose name was left in camelCase would differ from what the
/// encoder's own snake_case conversion makes of it, so each view, filled so that its optional
/// fields are present, must come out the same with and without that conversion.
@Suite struct JSONViewNamesTests {
    static func snakeCased(_ value: some Encodable) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.keyEncodingStrategy = .convertToSnakeCase
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    static func expectSnakeCase(_ value: some Encodable, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let written = try FleetTables.json(value)
        #expect(written == (try snakeCased(value)), "a field is not named in snake_case:\n\(written)", sourceLocation: sourceLocation)
        let lines = try FleetTables.jsonLine(value)
        #expect(!lines.contains("\n") && lines.count < written.count)
    }

    static let format = Capfleet_V1_VideoFormat.with {
        $0.pixelFormat = "YUYV"; $0.width = 1920; $0.height = 1080; $0.fieldOfViewDegrees = 70; $0.maxZoomFactor = 4
        $0.upscaleThresholdZoomFactor = 2; $0.bitDepth = 8
        $0.frameRateRanges = [
            .with {
                $0.minFps = 1; $0.maxFps = 30
            }
        ]
    }

    static let device = Capfleet_V1_DeviceInfo.with {
        $0.deviceID = "syn-1"; $0.nodeID = "node-1"; $0.name = "front"; $0.driver = "synthetic"; $0.online = true
        $0.activeFormat = format; $0.activeFrameRate = 30; $0.formatCount = 1; $0.activeMinFrameRate = 15
        $0.leaseHolder = "ana"; $0.leaseExpiresUnixMs = 1_700_000_000_000
        $0.interruption = .with {
            $0.reason = Capfleet_V1_InterruptionReason(rawValue: 1) ?? .none; $0.message = "unplugged"; $0.sinceUnixMs = 5
        }
        $0.focus = .with {
            $0.lensPosition = 0.5; $0.pointOfInterestX = 0.5; $0.pointOfInterestY = 0.5
        }
        $0.zoomFactor = 2
        $0.dropRecovery = .with {
            $0.enabled = true; $0.minimumFps = 15; $0.lateDropShare = 0.1; $0.quietSeconds = 5
        }
        $0.pressurePolicy = .with {
            $0.enabled = true; $0.frameRate = 15
        }
        $0.consentReason = "asked"; $0.liveConsumers = ["viewers"]; $0.liveFlow = true
        $0.alignment = .with {
            $0.state = Capfleet_V1_FrameAlignment.State(rawValue: 2) ?? .unspecified; $0.phaseNs = 10; $0.gridOriginFleetNs = 20
        }
    }

    @Test func devicesWithFormats_andDeviceDetails_areSnakeCase() throws {
        try Self.expectSnakeCase([JSONViews.Device(Self.device, formats: [Self.format, Self.format])])
        try Self.expectSnakeCase(JSONViews.DeviceDetails(Self.device))
        #expect(try FleetTables.json(JSONViews.Device(Self.device)).contains("\"upscale_threshold_zoom_factor\" : 2"))
    }

    @Test func nodesClocksPressureAndStats_areSnakeCase() throws {
        let node = Capfleet_V1_NodeInfo.with {
            $0.nodeID = "node-1"; $0.name = "a"; $0.softwareVersion = "1.0"; $0.deviceCount = 2
            $0.clock = .with {
                $0.sync = Capfleet_V1_ClockState.Sync(rawValue: 3) ?? .unspecified; $0.offsetNs = 5; $0.driftPpm = 1.5
                $0.uncertaintyNs = 7; $0.roundTripNs = 80; $0.coordinatorID = "c"; $0.wallClockOffsetNs = 9; $0.reportedUnixMs = 11
            }
        }
        try Self.expectSnakeCase([JSONViews.Node(node)])
        try Self.expectSnakeCase([JSONViews.Clock(node)])
        let status = Capfleet_V1_NodeStatus.with {
            $0.nodeID = "node-1"; $0.name = "a"
        }
        try Self.expectSnakeCase(
            JSONViews.Pressure(
                status,
                report: .with {
                    $0.cpuStallPercent = 1; $0.memoryStallPercent = 2; $0.ioStallPercent = 3; $0.hottestCelsius = 60; $0.hottestZone = "cpu"
                    $0.batteryPercent = 50; $0.lowestDiskFree = 0.5; $0.dropRate = 0.01; $0.sendQueueFill = 0.2
                }))
        try Self.expectSnakeCase(
            JSONViews.DeviceStats(
                .with {
                    $0.deviceID = "syn-1"; $0.alignment = Self.device.alignment
                }, trouble: ["late"]))
    }

    @Test func takesAndEnrollmentTokens_areSnakeCase() throws {
        let take = Capfleet_V1_TakeInfo.with {
            $0.id = "t1"; $0.error = "disk full"; $0.stopFleetNs = 9; $0.collectError = "offline"; $0.store = "agents"
            $0.devices = [
                .with {
                    $0.deviceID = "syn-1"; $0.frames = 3; $0.pixelFormat = "YUYV"; $0.endReason = "stopped"
                    $0.encoder = "libx264"; $0.sourcePixelFormat = "YUYV"
                }
            ]
            $0.segments = [
                .with {
                    $0.deviceID = "syn-1"; $0.frames = 3; $0.collectedPath = "/x"
                }
            ]
            $0.events = [
                .with {
                    $0.deviceID = "syn-1"; $0.kind = "zoom"
                }
            ]
        }
        try Self.expectSnakeCase(RecordingViews.Take(take, detailed: true))
        try Self.expectSnakeCase(
            EnrollmentViews.Token(
                .with {
                    $0.tokenKey = "k"; $0.namePrefix = "cam-"; $0.enrollments = [.init()]
                }))
    }

    @Test func aNumberJSONCannotCarry_isAnErrorNamingTheView_notAnEmptyList() {
        let broken = JSONViews.Device(Self.device, formats: [.with { $0.maxZoomFactor = .nan }])
        #expect {
            _ = try FleetTables.json([broken])
        } throws: { error in
            let description = String(describing: error)
            return error is JSONOutputError && description.contains("Device") && description.contains("bug to report")
        }
    }
}
