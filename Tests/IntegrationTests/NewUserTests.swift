import FleetTestSupport
import Foundation
import Testing

extension SecondLaneIntegrationTests {
    /// What a new user trips on, answered by the binary itself: each refusal says what to do,
    /// in a fraction of a second, without a fleet.
    @Suite struct NewUserTests {
        static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .path

        @Test func viewWithNoDisplay_failsAtOnce_sayingWhatElseToDo() throws {
            let started = Date()
            // No coordinator listens here: the refusal must come before any attempt to reach one.
            let result = try CapfleetBinary.run(
                ["view", "cam-1", "--coordinator", "127.0.0.1:9", "--timeout", "30"],
                environment: ["DISPLAY": "", "WAYLAND_DISPLAY": ""])
            #expect(Date().timeIntervalSince(started) < 5)
            #expect(result.status != 0)
            #expect(
                result.error.contains("no display") && result.error.contains("-o FILE") && result.error.contains("capfleet snapshot cam-1"),
                "\(result.error)")
        }

        @Test func aMistypedCommandOfAGroup_isNamed_withTheGroupsCommands() throws {
            let bogus = try CapfleetBinary.run(["consent", "bogus", "cam-1", "--reason", "x", "--coordinator", "127.0.0.1:9"])
            #expect(bogus.status != 0)
            #expect(
                bogus.error.contains("capfleet consent: there is no command 'bogus'")
                    && bogus.error.contains("grant, deny, revoke, restrict, history") && !bogus.error.contains("--reason"),
                "\(bogus.error)")
            // A real command's own mistake is still the parser's to say.
            let missing = try CapfleetBinary.run(["consent", "grant", "cam-1", "--coordinator", "127.0.0.1:9"])
            #expect(missing.status != 0)
            #expect(missing.error.contains("--reason") && !missing.error.contains("there is no command"), "\(missing.error)")
        }

        /// `--help` points at `man capfleet-…`; a source build gets the pages from the script
        /// scripts/dev.sh runs, into ~/.local/share/man (here a temporary home).
        @Test func theManualHelpPointsAt_isThereAfterTheSourceBuildsInstall() throws {
            let help = try CapfleetBinary.run(["--help"])
            let words = help.output.split(whereSeparator: \.isWhitespace).joined(separator: " ")  // the help wraps its lines
            #expect(
                words.contains("man capfleet-record-start") && words.contains("scripts/dev.sh") && words.contains("capfleet help record start"),
                "\(help.output)")
            let home = NSTemporaryDirectory() + "capfleet-home-\(UUID().uuidString.prefix(8))"
            defer { try? FileManager.default.removeItem(atPath: home) }
            let install = Process()
            install.executableURL = URL(fileURLWithPath: Self.repository + "/scripts/install-manual-and-completions.sh")
            install.arguments = [try CapfleetBinary.checked(), home, "/.local"]
            install.standardOutput = FileHandle.nullDevice
            try install.run()
            install.waitUntilExit()
            #expect(install.terminationStatus == 0)
            let page = home + "/.local/share/man/man1/capfleet-record-start.1.gz"
            #expect(FileManager.default.fileExists(atPath: page), "the page --help names is installed")
            let man = Process()
            man.executableURL = URL(fileURLWithPath: "/usr/bin/man")
            man.arguments = ["-M", home + "/.local/share/man", "-w", "capfleet-record-start"]
            let out = Pipe()
            man.standardOutput = out
            man.standardError = FileHandle.nullDevice
            if FileManager.default.isExecutableFile(atPath: "/usr/bin/man") {
                try man.run()
                let found = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                man.waitUntilExit()
                #expect(found.trimmingCharacters(in: .whitespacesAndNewlines) == page, "man finds it there: \(found)")
            }
            let dev = try String(contentsOfFile: Self.repository + "/scripts/dev.sh", encoding: .utf8)
            #expect(dev.contains(#"scripts/install-manual-and-completions.sh "$binary" "$HOME" /.local"#))
        }

        /// docs/tour.md, walked as a new user types it: every command is one the binary has,
        /// and no take starts on a camera another take still records.
        @Test func theTour_namesRealCommands_andStopsEachTakeBeforeTheNext() throws {
            let tour = try String(contentsOfFile: Self.repository + "/docs/tour.md", encoding: .utf8)
            var inCode = false
            var recording = false
            var commands: Set<[String]> = []
            for line in tour.split(separator: "\n", omittingEmptySubsequences: false) {
                if line.hasPrefix("```") { inCode.toggle(); continue }
                guard inCode, line.hasPrefix("capfleet ") else { continue }
                let words = line.split(separator: " ").dropFirst().prefix { $0.allSatisfy { $0.isLowercase || $0 == "-" } }.map(String.init)
                commands.insert(words)
                if words == ["record", "start"] {
                    #expect(!recording, "the tour starts a take on a camera it is recording: \(line)")
                    recording = true
                }
                if words == ["record", "stop"] { recording = false }
            }
            #expect(commands.count > 12, "the tour's commands were found: \(commands)")
            for words in commands.sorted(by: { $0.joined() < $1.joined() }) {
                let help = try CapfleetBinary.run(words + ["--help"])
                #expect(help.status == 0, "capfleet \(words.joined(separator: " ")) is not a command: \(help.error)")
            }
            #expect(!tour.contains("each frame's sequence"), "the metadata track has markers, not an entry per frame")
        }
    }
}
