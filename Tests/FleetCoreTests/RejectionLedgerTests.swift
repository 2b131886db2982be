import FleetCore
import Testing

@Suite struct RejectionLedgerTests {
    let minute: UInt64 = 60_000_000_000

    @Test func rejectionLedger_countsEveryRejectionButLogsOncePerPeerPerMinute() {
        var ledger = RejectionLedger()
        var logged: [Bool] = []
        logged.append(ledger.record(endpoint: "ingest", reason: "undecodable", peer: "10.0.0.1", at: 0))
        logged.append(ledger.record(endpoint: "ingest", reason: "undecodable", peer: "10.0.0.1", at: minute / 2))
        logged.append(ledger.record(endpoint: "ingest", reason: "undecodable", peer: "10.0.0.2", at: minute / 2))
        logged.append(ledger.record(endpoint: "ingest", reason: "wrong_part_count", peer: "10.0.0.1", at: minute / 2))
        logged.append(ledger.record(endpoint: "ingest", reason: "undecodable", peer: "10.0.0.1", at: minute + 1))
        #expect(logged == [true, false, true, true, true])
        #expect(ledger.count(endpoint: "ingest", reason: "undecodable") == 4)
        #expect(ledger.count(endpoint: "ingest", reason: "wrong_part_count") == 1)
        #expect(ledger.count(endpoint: "control", reason: "undecodable") == 0)
    }
}

@Suite struct SettingsFileTests {
    let keys = ["data_dir", "control_port"]

    @Test func settingsFile_readsKeysValuesAndComments() throws {
        let file = try SettingsFile(
            text: "# comment\n data_dir = /var/lib/capfleet  # trailing\n\ncontrol_port=7700\n", path: "c.conf", knownKeys: keys)
        #expect(file.value("data_dir", environment: [:]) == "/var/lib/capfleet")
        #expect(try file.integer("control_port", environment: [:]) == UInt16(7700))
    }

    @Test func settingsFile_keepsAHashInsideQuotes_andEndsTheLineAtOneOutside() throws {
        let text = """
            data_dir = "/srv/takes #2"   # the second array
            control_port = "7700" # "quoted" comment
            """
        let file = try SettingsFile(text: text, path: "c.conf", knownKeys: keys)
        #expect(file.value("data_dir", environment: [:]) == "/srv/takes #2")
        #expect(file.value("control_port", environment: [:]) == "7700")
        let unquoted = try SettingsFile(text: "data_dir = /srv/a#b", path: "c.conf", knownKeys: keys)
        #expect(unquoted.value("data_dir", environment: [:]) == "/srv/a", "outside quotes a # starts a comment, as documented")
    }

    @Test func settingsFile_environmentOverridesTheFile() throws {
        let file = try SettingsFile(text: "control_port = 7700", path: "c.conf", knownKeys: keys)
        #expect(try file.integer("control_port", environment: ["CAPFLEET_CONTROL_PORT": "7800"]) == UInt16(7800))
    }

    @Test func settingsFile_unknownKeyNamesTheLineAndTheKnownKeys() {
        #expect(throws: SettingsFile.ParseError.unknownKey(path: "c.conf", line: 2, key: "contrl_port", known: keys)) {
            try SettingsFile(text: "data_dir = x\ncontrl_port = 1", path: "c.conf", knownKeys: keys)
        }
    }

    @Test func settingsFile_badNumberSaysWhatIsExpected() throws {
        let file = try SettingsFile(text: "control_port = 99999", path: "c.conf", knownKeys: keys)
        #expect(throws: SettingsFile.ParseError.self) { try file.integer("control_port", environment: [:]) as UInt16? }
    }
}
