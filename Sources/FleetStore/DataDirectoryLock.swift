import FleetSystem
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Whether a coordinator runs on a data directory: it holds an exclusive lock on
/// DATA/coordinator.lock for as long as it runs (the kernel drops it when the process dies,
/// however it dies). A second coordinator on the same directory, or a restore under a running
/// one, is refused instead of corrupting the fleet's state.
public final class DataDirectoryLock: Sendable {
    public let path: String
    private let descriptor: Int32

    private init(path: String, descriptor: Int32) {
        self.path = path
        self.descriptor = descriptor
    }

    /// Takes the lock, or throws at once if a running coordinator holds it.
    public static func acquire(dataDirectory: String) throws(StoreError) -> DataDirectoryLock {
        let path = dataDirectory + "/coordinator.lock"
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw StoreError.openFailed(path: path, underlying: SystemCallError(call: "open", target: path, errno: errno))
        }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            let reason =
                errno == EWOULDBLOCK
                ? "a coordinator is running on \(dataDirectory) (it holds \(path)); stop it first"
                : "cannot lock \(path): \(String(cString: strerror(errno)))"
            close(descriptor)
            throw StoreError.refused(reason: reason)
        }
        return DataDirectoryLock(path: path, descriptor: descriptor)
    }

    deinit {
        flock(descriptor, LOCK_UN)
        close(descriptor)
    }
}
