import FleetCoordinator
import FleetCore
import FleetSettings
import Foundation
import Testing

@Suite struct CoordinatorSettingsTests {
    @Test func httpPort_isTheDashboardsAndMetricsPort_andMetricsPortStillNamesIt() throws {
        #expect(try CoordinatorSettings.load(file: nil, environment: ["CAPFLEET_HTTP_PORT": "8080"]).configuration.metricsPort == 8080)
        #expect(try CoordinatorSettings.load(file: nil, environment: ["CAPFLEET_METRICS_PORT": "9090"]).configuration.metricsPort == 9090)
        #expect(try CoordinatorSettings.load(file: nil, environment: ["CAPFLEET_HTTP_PORT": "off"]).configuration.metricsPort == nil)
        #expect(
            try CoordinatorSettings.load(file: nil, environment: ["CAPFLEET_HTTP_PORT": "8080", "CAPFLEET_METRICS_PORT": "8080"])
                .configuration.metricsPort == 8080)
        let error = #expect(throws: SettingsError.self) {
            try CoordinatorSettings.load(file: nil, environment: ["CAPFLEET_HTTP_PORT": "8080", "CAPFLEET_METRICS_PORT": "9090"])
        }
        #expect(error?.description.contains("set only http_port") == true, "\(String(describing: error))")
    }

    /// The environment outranks the file whichever name each uses (a deployment's variable
    /// over the packaged file's http_port), and the HTTP bind and TLS settings are read.
    @Test func theHTTPPortFromTheEnvironment_outranksTheFile_underEitherName() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("capfleet-settings-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = directory + "/coordinator.conf"
        try "http_port = 7604\n".write(toFile: file, atomically: true, encoding: .utf8)
        #expect(try CoordinatorSettings.load(file: file, environment: ["CAPFLEET_METRICS_PORT": "9091"]).configuration.metricsPort == 9091)
        #expect(try CoordinatorSettings.load(file: file, environment: [:]).configuration.metricsPort == 7604)
        #expect(try CoordinatorSettings.load(file: file, environment: [:]).configuration.httpBind == "127.0.0.1")
        #expect(try CoordinatorSettings.load(file: file, environment: ["CAPFLEET_HTTP_BIND": "0.0.0.0"]).configuration.httpBind == "0.0.0.0")
        let certificate = directory + "/cert.pem"
        try "not checked here\n".write(toFile: certificate, atomically: true, encoding: .utf8)
        let tls = try CoordinatorSettings.load(
            file: file, environment: ["CAPFLEET_HTTP_TLS_CERT": certificate, "CAPFLEET_HTTP_TLS_KEY": certificate])
        #expect(tls.configuration.httpTLS == HTTPTLSFiles(certificatePath: certificate, keyPath: certificate))
        let missing = #expect(throws: SettingsError.self) {
            try CoordinatorSettings.load(
                file: file, environment: ["CAPFLEET_HTTP_TLS_CERT": certificate, "CAPFLEET_HTTP_TLS_KEY": directory + "/none.pem"])
        }
        #expect(missing?.description.contains("http_tls_key names") == true, "\(String(describing: missing))")
    }

    @Test func coordinatorSettings_withNothingWritten_areTheDefaults() throws {
        let settings = try CoordinatorSettings.load(file: nil, environment: [:])
        #expect(settings.configuration.dataDirectory == "capfleet-data")
        #expect(settings.configuration.bindHost == "*")
        #expect(settings.configuration.controlPort == 7600)
        #expect(settings.configuration.operatorPort == 7602)
        #expect(settings.configuration.metricsPort == 7604)
        #expect(settings.configuration.segmentSeconds == 300)
        #expect(settings.configuration.retention == RetentionPolicy())
    }

    @Test func coordinatorSettings_environmentBeatsTheFile_andDataFlagBeatsBoth() throws {
        let fixture = try SettingsFixture()
        let path = try fixture.file("coordinator.conf", "data_dir = /from/file\ncontrol_port = 7000\nbind = 10.0.0.1 # a comment\n")
        let settings = try CoordinatorSettings.load(
            file: path, dataOverride: nil,
            environment: ["CAPFLEET_CONTROL_PORT": "7700", "CAPFLEET_DATA_DIR": "/from/env"])
        #expect(settings.configuration.dataDirectory == "/from/env")
        #expect(settings.configuration.controlPort == 7700)
        #expect(settings.configuration.bindHost == "10.0.0.1")
        let flagged = try CoordinatorSettings.load(file: path, dataOverride: "/from/flag", environment: ["CAPFLEET_DATA_DIR": "/from/env"])
        #expect(flagged.configuration.dataDirectory == "/from/flag")
    }

    @Test func coordinatorSettings_rejectsUnknownKeyNamingTheFile() throws {
        let fixture = try SettingsFixture()
        let path = try fixture.file("typo.conf", "# settings\ncontrol_port = 7600\ncontol_port = 7700\n")
        let error = #expect(throws: SettingsFile.ParseError.self) { try CoordinatorSettings.load(file: path, environment: [:]) }
        #expect(
            error?.description.hasPrefix("\(path):3: unknown setting `contol_port`; known settings: data_dir, bind, control_port") == true,
            "\(String(describing: error))")
    }

    @Test func coordinatorSettings_aFileThatCannotBeRead_saysToCheckThePath() throws {
        let error = #expect(throws: SettingsError.self) { try CoordinatorSettings.load(file: "/nonexistent/coordinator.conf", environment: [:]) }
        #expect(error?.description == "cannot read the settings file /nonexistent/coordinator.conf: check the path")
    }

    @Test func coordinatorSettings_aPortThatIsNoNumber_namesTheSettingAndTheRange() throws {
        let error = #expect(throws: SettingsFile.ParseError.self) {
            try CoordinatorSettings.load(file: nil, environment: ["CAPFLEET_OPERATOR_PORT": "seventy"])
        }
        #expect(error?.description == "setting operator_port = seventy is not valid: expected an integer from 0 to 65535")
    }

    @Test func coordinatorSettings_clockProbeBudget_isReadAndChecked() throws {
        #expect(try CoordinatorSettings.load(file: nil, environment: [:]).configuration.clockProbeBudget == 400)
        let settings = try CoordinatorSettings.load(file: nil, environment: ["CAPFLEET_CLOCK_PROBE_BUDGET": "100"])
        #expect(settings.configuration.clockProbeBudget == 100)
        let error = #expect(throws: SettingsError.self) { try CoordinatorSettings.load(file: nil, environment: ["CAPFLEET_CLOCK_PROBE_BUDGET": "0"]) }
        #expect(error?.description == "clock_probe_budget must be at least 1 round trip a second, not 0")
    }

    @Test func coordinatorSettings_metricsPortOff_turnsTheEndpointOff() throws {
        let settings = try CoordinatorSettings.load(file: nil, environment: ["CAPFLEET_METRICS_PORT": "off"])
        #expect(settings.configuration.metricsPort == nil)
    }

    @Test func coordinatorSettings_retention_isReadInGiBAndDays() throws {
        let settings = try CoordinatorSettings.load(
            file: nil,
            environment: [
                "CAPFLEET_RETENTION_BUDGET_GB": "1.5",
                "CAPFLEET_RETENTION_DAYS": "2",
            ])
        #expect(settings.configuration.retention == RetentionPolicy(budgetBytes: 3 << 29, maximumAgeSeconds: 172_800))
        let error = #expect(throws: SettingsError.self) { try CoordinatorSettings.load(file: nil, environment: ["CAPFLEET_RETENTION_DAYS": "-1"]) }
        #expect(error?.description == "retention_days must be a number of days (0 = keep forever), not -1")
    }

    @Test func coordinatorSettings_segmentsShorterThanASecond_areRefused() throws {
        let error = #expect(throws: SettingsError.self) { try CoordinatorSettings.load(file: nil, environment: ["CAPFLEET_SEGMENT_SECONDS": "0"]) }
        #expect(error?.description == "segment_seconds must be at least 1")
    }

    @Test func coordinatorSettings_aWebhookOutsideTheLocalNetwork_isRefusedBeforeStart() throws {
        let error = #expect(throws: SettingsError.self) {
            try CoordinatorSettings.load(file: nil, environment: ["CAPFLEET_ALERT_WEBHOOK": "http://8.8.8.8/hook"])
        }
        #expect(
            error?.description.hasPrefix("alert_webhook: the webhook host 8.8.8.8 is 8.8.8.8, outside this machine and its local network") == true)
        let local = try CoordinatorSettings.load(file: nil, environment: ["CAPFLEET_ALERT_WEBHOOK": "http://127.0.0.1:9000/hook"])
        #expect(local.configuration.alerts.webhook?.description.contains("127.0.0.1") == true)
    }

    @Test func coordinatorSettings_alertLimits_mustLetAlertsThrough() throws {
        let cases = [
            ("CAPFLEET_ALERT_INTERVAL_S", "0", "alert_interval_s must be at least 1: it is what keeps a flapping node from flooding the pager"),
            ("CAPFLEET_ALERT_BURST", "0", "alert_burst must be at least 1"),
            ("CAPFLEET_ALERT_PRESSURE_LEVEL", "nominal", "alert_pressure_level nominal: write fair, serious, critical or shutdown"),
            ("CAPFLEET_ALERT_DROP_SHARE", "1.5", "alert_drop_share 1.5: write a fraction above 0 and at most 1, e.g. 0.05 for 5 %"),
        ]
        for (variable, value, message) in cases {
            let error = #expect(throws: SettingsError.self) { try CoordinatorSettings.load(file: nil, environment: [variable: value]) }
            #expect(error?.description == message, "\(variable)=\(value)")
        }
        let serious = try CoordinatorSettings.load(file: nil, environment: ["CAPFLEET_ALERT_PRESSURE_LEVEL": "critical"])
        #expect(serious.configuration.alerts.pressureLevel == .critical)
    }

    @Test func coordinatorSettings_checkReport_saysWhereEachValueComesFrom() throws {
        let fixture = try SettingsFixture()
        let path = try fixture.file("coordinator.conf", "data_dir = /srv/fleet\nbind = 10.0.0.1\n")
        let environment = ["CAPFLEET_CONTROL_PORT": "7700"]
        let report = try CoordinatorSettings.load(file: path, environment: environment).checkReport(environment: environment)
        #expect(report.count == CoordinatorSettings.keys.count + 1)
        #expect(
            report.prefix(4) == [
                "data_dir = /srv/fleet   (file)", "bind = 10.0.0.1   (file)",
                "control_port = 7700   (environment CAPFLEET_CONTROL_PORT)", "ingest_port   (default)",
            ])
        #expect(report.last == "settings OK: data /srv/fleet, bind 10.0.0.1, control port 7700")
    }

    @Test func coordinatorSettings_theShippedExample_loads() throws {
        let settings = try CoordinatorSettings.load(file: SettingsFixture.shipped("coordinator.conf"), environment: [:])
        #expect(settings.configuration.dataDirectory == "/var/lib/capfleet")
        #expect(settings.checkReport(environment: [:]).allSatisfy { !$0.contains("(environment") })
    }
}

@Suite struct CPULatencySettingTests {
    @Test func cpuLatency_isOffUnlessWritten_andTakesMicrosecondsOrOff() throws {
        #expect(try CoordinatorSettings.load(file: nil, environment: [:]).cpuLatencyLimit == nil)
        #expect(try CoordinatorSettings.load(file: nil, environment: ["CAPFLEET_CPU_LATENCY_US": "0"]).cpuLatencyLimit == 0)
        #expect(try CoordinatorSettings.load(file: nil, environment: ["CAPFLEET_CPU_LATENCY_US": "off"]).cpuLatencyLimit == nil)
        let fixture = try SettingsFixture()
        let path = try fixture.file("agent.conf", "cpu_latency_us = 20\n")
        var flags = AgentFlags()
        flags.config = path
        flags.stateDirectory = fixture.directory
        #expect(try AgentSettings.load(flags, environment: [:]).cpuLatencyLimit == 20)
        #expect(try AgentSettings.load(flags, environment: ["CAPFLEET_CPU_LATENCY_US": "off"]).cpuLatencyLimit == nil)
    }

    @Test func cpuLatency_thatIsNoLimit_namesTheSettingAndWhatToWrite() throws {
        for text in ["-1", "fast", "2000000"] {
            let error = #expect(throws: SettingsError.self) {
                try CoordinatorSettings.load(file: nil, environment: ["CAPFLEET_CPU_LATENCY_US": text])
            }
            #expect(
                error?.description
                    == "cannot read cpu_latency_us = \(text): write off, or the longest CPU wake-up allowed in µs from 0 (idle CPUs poll) to 1000000")
        }
    }
}
