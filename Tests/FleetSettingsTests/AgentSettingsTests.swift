import FleetCore
import FleetSettings
import Testing

@Suite struct AgentSettingsTests {
    @Test func agentSettings_withNothingWritten_reachTheCoordinatorOnThisMachine() throws {
        let settings = try AgentSettings.load(AgentFlags(), environment: ["HOME": "/home/cam"])
        #expect(settings.coordinator.description == "127.0.0.1:7600")
        #expect(settings.configuration.stateDirectory == "/home/cam/.local/state/capfleet/agent")
        #expect(settings.configuration.syntheticFormat.width == 640)
        #expect(settings.configuration.syntheticFrameRate == 15)
        #expect(settings.configuration.nodeClock == .system)
        #expect(settings.configuration.enrollmentToken == nil)
    }

    @Test func agentSettings_flagsBeatTheEnvironment_whichBeatsTheFile() throws {
        let fixture = try SettingsFixture()
        var flags = AgentFlags()
        flags.config = try fixture.file("agent.conf", "coordinator = file-host\nname = from-file\nenroll_token = file-token\n")
        let fromFile = try AgentSettings.load(flags, environment: ["HOME": "/h"])
        #expect(fromFile.coordinator.description == "file-host:7600")
        #expect(fromFile.configuration.nodeName == "from-file")
        #expect(fromFile.configuration.stateDirectory == "/h/.local/state/capfleet/agent-from-file")
        #expect(fromFile.configuration.enrollmentToken == "file-token")

        let fromEnvironment = try AgentSettings.load(flags, environment: ["CAPFLEET_COORDINATOR": "env-host:7700", "HOME": "/h"])
        #expect(fromEnvironment.coordinator.description == "env-host:7700")

        flags.coordinator = "[::1]:7800"
        flags.name = "flagged"
        let fromFlags = try AgentSettings.load(flags, environment: ["CAPFLEET_COORDINATOR": "env-host:7700", "HOME": "/h"])
        #expect(fromFlags.coordinator.host == "::1")
        #expect(fromFlags.coordinator.port == 7800)
        #expect(fromFlags.configuration.nodeName == "flagged")
    }

    @Test func agentSettings_anEmptyNameOrStateDirectory_leavesTheDefault() throws {
        let fixture = try SettingsFixture()
        var flags = AgentFlags()
        flags.config = try fixture.file("agent.conf", "name = \"\"\nstate_dir = \"\"\n")
        let settings = try AgentSettings.load(flags, environment: ["XDG_STATE_HOME": "/state"])
        #expect(settings.configuration.nodeName == nil)
        #expect(settings.configuration.stateDirectory == "/state/capfleet/agent")
    }

    @Test func agentSettings_anUnreadableCoordinatorAddress_saysHowToWriteIt() throws {
        var flags = AgentFlags()
        flags.coordinator = "fleet:http"
        let error = #expect(throws: SettingsError.self) { try AgentSettings.load(flags, environment: [:]) }
        #expect(error?.description == "cannot read the coordinator address fleet:http: write HOST or HOST:PORT")
        let empty = #expect(throws: SettingsError.self) { try AgentSettings.load(AgentFlags(), environment: ["CAPFLEET_COORDINATOR": ""]) }
        #expect(empty?.description == "cannot read the coordinator address : write HOST or HOST:PORT")
    }

    @Test func agentSettings_aFormatThatCannotBeRead_saysHowToWriteIt() throws {
        var flags = AgentFlags()
        flags.format = "1280x720"
        let error = #expect(throws: SettingsError.self) { try AgentSettings.load(flags, environment: [:]) }
        #expect(error?.description == "cannot read the format 1280x720: write WIDTHxHEIGHT:FOURCC, e.g. 1280x720:NV12")
        flags.format = "1280x720:nv12"
        let format = try #require(try AgentSettings.load(flags, environment: [:]).configuration.deviceFormat)
        #expect(format.width == 1280 && format.height == 720 && format.pixelFormat == PixelFormat("NV12"))
    }

    @Test func agentSettings_aSpoolBelow16MiB_isRefused() throws {
        let fixture = try SettingsFixture()
        var flags = AgentFlags()
        flags.config = try fixture.file("agent.conf", "record_spool_memory_mb = 8\n")
        let error = #expect(throws: SettingsError.self) { try AgentSettings.load(flags, environment: [:]) }
        #expect(error?.description == "record_spool_memory_mb must be at least 16")
        let disk = try AgentSettings.load(AgentFlags(), environment: ["CAPFLEET_RECORD_SPOOL_DISK_MB": "100"])
        #expect(disk.configuration.recordSpoolDiskBytes == 100 << 20)
    }

    @Test func agentSettings_previews_areOnAt320PixelsOnceASecond_unlessTheFileOrEnvironmentSaysOtherwise() throws {
        let defaults = try AgentSettings.load(AgentFlags(), environment: [:]).configuration.preview
        #expect(defaults == PreviewSettings(enabled: true, width: 320, framesPerSecond: 1, quality: 70))
        let fixture = try SettingsFixture()
        var flags = AgentFlags()
        flags.config = try fixture.file("agent.conf", "preview_width = 160\npreview_fps = 0.5\npreview_quality = 90\n")
        let set = try AgentSettings.load(flags, environment: ["CAPFLEET_PREVIEW": "off"]).configuration.preview
        #expect(set == PreviewSettings(enabled: false, width: 160, framesPerSecond: 0.5, quality: 90))
        let tooFast = #expect(throws: SettingsError.self) { try AgentSettings.load(AgentFlags(), environment: ["CAPFLEET_PREVIEW_FPS": "100"]) }
        #expect(tooFast?.description == "preview_fps must be from 0.05 to 30.0 previews a second, not 100.0")
        let unreadable = #expect(throws: SettingsError.self) { try AgentSettings.load(AgentFlags(), environment: ["CAPFLEET_PREVIEW": "maybe"]) }
        #expect(unreadable?.description == "cannot read preview = maybe: write on or off")
    }

    @Test func agentSettings_pressureSampledFasterThan50ms_isRefused() throws {
        var flags = AgentFlags()
        flags.pressureIntervalMilliseconds = 10
        let error = #expect(throws: SettingsError.self) { try AgentSettings.load(flags, environment: [:]) }
        #expect(error?.description == "--pressure-interval-ms must be at least 50")
    }

    @Test func agentSettings_aTestClockSkew_comesFromTheFlagOrTheEnvironment() throws {
        let skewed = try AgentSettings.load(AgentFlags(), environment: ["CAPFLEET_TEST_CLOCK_SKEW": "+3.2s,+40ppm"])
        #expect(skewed.configuration.nodeClock == NodeClock(offset: 3_200_000_000, driftPPM: 40))
        var flags = AgentFlags()
        flags.testClockSkew = "garbage"
        let error = #expect(throws: SettingsError.self) { try AgentSettings.load(flags, environment: [:]) }
        #expect(error?.description.hasPrefix("cannot read the clock skew garbage: write an offset and/or a drift") == true)
    }

    @Test func agentSettings_checkReport_endsWithTheCoordinatorAndTheState() throws {
        var flags = AgentFlags()
        flags.stateDirectory = "/var/lib/capfleet-agent"
        let environment = ["CAPFLEET_COORDINATOR": "fleet.example:7600"]
        let report = try AgentSettings.load(flags, environment: environment).checkReport(environment: environment)
        #expect(report.first == "coordinator = fleet.example:7600   (environment CAPFLEET_COORDINATOR)")
        #expect(report.count == AgentSettingKeys.all.count + 1)
        #expect(report.last == "settings OK: coordinator fleet.example:7600, state /var/lib/capfleet-agent")
    }

    @Test func agentSettings_theShippedExample_loads() throws {
        var flags = AgentFlags()
        flags.config = SettingsFixture.shipped("agent.conf")
        let settings = try AgentSettings.load(flags, environment: ["HOME": "/h"])
        #expect(settings.configuration.pressureThresholds.samplesToFall >= 1)
    }
}
