import FleetCore
import FleetStorage
import FleetTestSupport
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// One segment offloaded with Debian's rclone to a real server (`rclone serve webdav|sftp`):
/// sent, proved by SHA-256, never sent twice when whole, sent again when corrupted or cut
/// short, and a full destination said as such.
@Suite struct SegmentUploaderTests {
    /// A file of `bytes` random bytes in a folder of its own, and its SHA-256.
    static func segment(_ bytes: Int) throws -> (path: String, sha256: String) {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("capfleet-segment-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let path = folder + "/cam-0001.mkv"
        let random = try #require(FileHandle(forReadingAtPath: "/dev/urandom"))
        try random.readData(ofLength: bytes).write(to: URL(fileURLWithPath: path))
        return (path, try sha256(path))
    }

    /// sha256sum's answer: the test's own check, apart from what rclone says.
    static func sha256(_ path: String) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/sha256sum")
        process.arguments = [path]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let said = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(String(decoding: said, as: UTF8.self).prefix(64))
    }

    static let remotePath = "fleet/takes/take-1/cam/cam-0001.mkv"

    @Test(arguments: ["webdav", "sftp"])
    func aSegment_isSentProvedAndNeverSentTwice(protocolName: String) async throws {
        let server = try StorageServer(protocolName)
        let rclone = try Rclone(destination: try server.destination())
        try await server.ready(rclone)
        let file = try Self.segment(3 << 20)
        let uploader = SegmentUploader(rclone: rclone, bytesPerSecond: 0)
        let first = uploader.offload(file: file.path, sizeBytes: 3 << 20, sha256: file.sha256, to: Self.remotePath)
        #expect(first.outcome == .verified(sentBytes: 3 << 20, proof: .readBack), "\(first)")
        let stored = server.folder + "/" + Self.remotePath
        #expect(try Self.sha256(stored) == file.sha256, "the served folder holds the very bytes")
        // Asked again (a report lost, an agent restarted): proved where it is, not sent.
        let again = uploader.offload(file: file.path, sizeBytes: 3 << 20, sha256: file.sha256, to: Self.remotePath)
        #expect(again.outcome == .verified(sentBytes: 0, proof: .readBack), "\(again)")
    }

    @Test func aCorruptedCopy_isFoundRemovedAndSentAgain() async throws {
        let server = try StorageServer("webdav")
        let rclone = try Rclone(destination: try server.destination())
        try await server.ready(rclone)
        let file = try Self.segment(1 << 20)
        let uploader = SegmentUploader(rclone: rclone, bytesPerSecond: 0)
        _ = uploader.offload(file: file.path, sizeBytes: 1 << 20, sha256: file.sha256, to: Self.remotePath)
        // One byte flipped where it is stored: the same size, other bytes.
        let stored = server.folder + "/" + Self.remotePath
        var bytes = try Data(contentsOf: URL(fileURLWithPath: stored))
        bytes[4096] ^= 0xFF
        try bytes.write(to: URL(fileURLWithPath: stored))
        let report = uploader.offload(file: file.path, sizeBytes: 1 << 20, sha256: file.sha256, to: Self.remotePath)
        #expect(report.outcome == .verified(sentBytes: 1 << 20, proof: .readBack), "\(report)")
        #expect(report.replacedCorruptCopy?.contains(file.sha256) == true, "\(report)")
        #expect(try Self.sha256(stored) == file.sha256)
    }

    @Test func aCopyCutShort_isSentWhole() async throws {
        let server = try StorageServer("webdav")
        let rclone = try Rclone(destination: try server.destination())
        try await server.ready(rclone)
        let file = try Self.segment(2 << 20)
        let uploader = SegmentUploader(rclone: rclone, bytesPerSecond: 0)
        _ = uploader.offload(file: file.path, sizeBytes: 2 << 20, sha256: file.sha256, to: Self.remotePath)
        let stored = server.folder + "/" + Self.remotePath
        #expect(truncate(stored, 1 << 20) == 0)
        let report = uploader.offload(file: file.path, sizeBytes: 2 << 20, sha256: file.sha256, to: Self.remotePath)
        #expect(report.outcome == .verified(sentBytes: 2 << 20, proof: .readBack), "\(report)")
        #expect(try Self.sha256(stored) == file.sha256)
    }

    /// A destination with 1 MiB of room asked to hold 3 MiB: a failure that says so, which
    /// the agent keeps its copy on.
    @Test func aFullDestination_isAFailureThatSaysSo() async throws {
        guard getuid() == 0 else {
            print("storage full: not run, a tmpfs of its own needs root (CI runs as root)")
            return
        }
        let server = try StorageServer("sftp", capacityBytes: 1 << 20)
        let rclone = try Rclone(destination: try server.destination())
        try await server.ready(rclone)
        let file = try Self.segment(3 << 20)
        let report = SegmentUploader(rclone: rclone, bytesPerSecond: 0).offload(
            file: file.path, sizeBytes: 3 << 20, sha256: file.sha256, to: Self.remotePath)
        print("storage full: \(report.outcome)")
        guard case .failed(let reason, let full) = report.outcome else {
            Issue.record("3 MiB fit in 1 MiB: \(report)")
            return
        }
        #expect(full, "the destination is said to be full: \(reason)")
        #expect(FileManager.default.fileExists(atPath: file.path), "the local copy stays")
    }

    /// rclone runs through a script that counts its runs: each segment after the first costs
    /// a look, a copy and a read back, not a question the store has already answered.
    @Test func aStoreWithoutChecksums_isAskedOnce() async throws {
        let server = try StorageServer("webdav")
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("capfleet-rclone-count-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let runs = folder + "/runs"
        try "#!/bin/sh\necho \"$*\" >> \(runs)\nexec /usr/bin/rclone \"$@\"\n".write(toFile: folder + "/rclone", atomically: true, encoding: .utf8)
        #expect(chmod(folder + "/rclone", 0o755) == 0)
        let rclone = try Rclone(destination: try server.destination(), path: folder)
        try await server.ready(rclone)
        func counted() throws -> [String] {
            ((try? String(contentsOfFile: runs, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
        }
        let uploader = SegmentUploader(rclone: rclone, bytesPerSecond: 0)
        var before = try counted().count
        for number in 1...3 {
            let file = try Self.segment(256 << 10)
            let report = uploader.offload(file: file.path, sizeBytes: 256 << 10, sha256: file.sha256, to: "fleet/take/cam/cam-000\(number).mkv")
            #expect(report.outcome == .verified(sentBytes: 256 << 10, proof: .readBack), "\(report)")
            let all = try counted()
            let these = all[before...]
            before = all.count
            #expect(these.filter { $0.contains("hashsum") && !$0.contains("--download") }.count == (number == 1 ? 1 : 0), "\(these)")
            #expect(these.count == (number == 1 ? 4 : 3), "segment \(number): \(these)")
        }
    }

    @Test func withoutRclone_theErrorSaysHowToInstallIt() throws {
        let destination = try StorageDestination(name: "nas", backend: "local", options: [:], secrets: [:], root: "")
        #expect(throws: RcloneError.missing) { try Rclone(destination: destination, path: "/nonexistent") }
        #expect(RcloneError.missing.description.contains("apt-get install rclone"))
    }

    @Test func aDestination_isRefusedWithWhatToDo() {
        #expect(throws: StorageDestinationError.badName("a b")) {
            try StorageDestination(name: "a b", backend: "s3", options: [:], secrets: [:], root: "")
        }
        #expect(throws: StorageDestinationError.unknownBackend("nfs4")) {
            try StorageDestination(name: "nas", backend: "nfs4", options: [:], secrets: [:], root: "")
        }
        #expect(throws: StorageDestinationError.givenTwice("pass")) {
            try StorageDestination(name: "nas", backend: "sftp", options: ["pass": "x"], secrets: ["pass": "y"], root: "")
        }
        #expect(StorageDestinationError.unknownBackend("nfs4").description.contains("webdav"))
    }
}
