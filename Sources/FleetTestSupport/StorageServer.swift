import FleetBus
import FleetStorage
import Foundation

/// The studio's storage for a test: `rclone serve webdav` or `rclone serve sftp` on a free
/// port of 127.0.0.1, serving a folder of the test's, with a user and a password; or, as
/// root, the same in a private mount namespace on a tmpfs of a few MiB (a full destination).
public final class StorageServer: @unchecked Sendable {
    public let protocolName: String
    public let folder: String
    public let port: UInt16
    public let child: FleetChild
    public let scratch: String

    public init(_ protocolName: String, capacityBytes: Int? = nil) throws {
        self.protocolName = protocolName
        scratch = FileManager.default.temporaryDirectory.appendingPathComponent("capfleet-storage-\(UUID().uuidString)").path
        folder = scratch + "/served"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        port = try LoopbackPorts.free(1)[0]
        // No listing cached: a test changes the served folder behind the server's back (a
        // corrupted object), as another writer of a real store would.
        let serve = [
            "serve", protocolName, folder, "--addr", "127.0.0.1:\(port)", "--user", "studio", "--pass", Self.password, "--dir-cache-time", "0s",
        ]
        if let capacityBytes {
            // The tmpfs is seen by the server alone and goes with its mount namespace.
            child = try FleetChild(
                name: "storage", binary: "/usr/bin/unshare",
                arguments: [
                    "--mount", "--propagation", "private", "/bin/sh", "-c",
                    "mount -t tmpfs -o size=\(capacityBytes) tmpfs \"$0\" && exec /usr/bin/rclone \"$@\"", folder,
                ] + serve,
                output: .logFile(directory: scratch))
        } else {
            child = try FleetChild(name: "storage", binary: "/usr/bin/rclone", arguments: serve, output: .logFile(directory: scratch))
        }
    }

    /// The server as a destination named `name`, its takes under fleet/takes.
    public func destination(named name: String = "studio") throws -> StorageDestination {
        try StorageDestination(name: name, backend: protocolName, options: options, secrets: ["pass": Self.password], root: "fleet/takes")
    }

    public static let password = "s3cret w0rd"

    /// rclone's settings for it, the password aside.
    public var options: [String: String] {
        protocolName == "webdav"
            ? ["url": "http://127.0.0.1:\(port)", "vendor": "other", "user": "studio"] : ["host": "127.0.0.1", "port": "\(port)", "user": "studio"]
    }

    /// Waits until the server answers a look-up.
    public func ready(_ rclone: Rclone) async throws {
        var last: RcloneError?
        for _ in 0..<100 {
            do {
                _ = try rclone.size(of: "nothing-here")
                return
            } catch {
                last = error
            }
            guard child.isRunning else { throw StorageServerError("the storage server stopped: \(child.log)") }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw StorageServerError("the storage server does not answer after 10 s: \(last.map { "\($0)" } ?? "") \(child.log)")
    }

    deinit {
        child.kill()
        try? FileManager.default.removeItem(atPath: scratch)
    }
}

public struct StorageServerError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
