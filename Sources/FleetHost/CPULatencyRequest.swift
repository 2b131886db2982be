import FleetSystem
import Glibc

/// A Linux CPU latency QoS request (/dev/cpu_dma_latency), held while this object lives: no
/// CPU of this host sleeps in an idle state that takes longer than `microseconds` to wake
/// from. With 0, idle CPUs poll instead of halting.
///
/// Why a daemon asks for it: every clock probe is timestamped by a thread that was asleep
/// until the probe arrived, and a deep idle state (or a halted virtual CPU) adds tens of
/// microseconds before the timestamp, differently on each host and from one minute to the
/// next, which no exchange of timestamps can tell from a clock offset. The price is power:
/// chrony (`-P`) and linuxptp hosts are tuned the same way. Optional, off by default
/// (setting `cpu_latency_us`, clock.md "Host tuning").
public final class CPULatencyRequest: Sendable {
    public static let devicePath = "/dev/cpu_dma_latency"

    /// The limit asked for, µs.
    public let microseconds: Int32
    public let path: String
    private let descriptor: Int32

    /// Asks for the limit; the request ends when this object goes (or the process does: the
    /// kernel drops a request whose file is closed).
    public init(microseconds: Int32, path: String = CPULatencyRequest.devicePath) throws(CPULatencyRequestError) {
        precondition(microseconds >= 0, "a CPU latency limit is 0 µs or more")
        self.microseconds = microseconds
        self.path = path
        let opened: Int32
        do {
            opened = try systemCall("open", on: path) { open(path, O_WRONLY | O_CLOEXEC) }
        } catch {
            throw CPULatencyRequestError(path: path, microseconds: microseconds, cause: error)
        }
        var value = microseconds
        do throws(SystemCallError) {
            // The device takes the limit as a native 32-bit integer, whole or not at all.
            _ = try systemCall("write", on: path) { write(opened, &value, MemoryLayout<Int32>.size) }
        } catch {
            close(opened)
            throw CPULatencyRequestError(path: path, microseconds: microseconds, cause: error)
        }
        descriptor = opened
    }

    deinit { close(descriptor) }

    /// The limit in force now, from every request on this host (the kernel's aggregate; the
    /// device reads as it), µs; nil where it cannot be read.
    public static func current(path: String = devicePath) -> Int32? {
        let file = open(path, O_RDONLY | O_CLOEXEC)
        guard file >= 0 else { return nil }
        defer { close(file) }
        var value: Int32 = 0
        return read(file, &value, MemoryLayout<Int32>.size) == MemoryLayout<Int32>.size ? value : nil
    }
}

/// A CPU latency request the host refused: why, and what to do about it.
public struct CPULatencyRequestError: Error, CustomStringConvertible, Sendable, Equatable {
    public let path: String
    public let microseconds: Int32
    public let cause: SystemCallError

    public var description: String {
        let remedy =
            switch cause.errno {
            case EACCES, EPERM:
                "only root may write it by default: run the daemon as root, give its user write access to \(path) (a udev rule), or remove the setting cpu_latency_us"
            case ENOENT:
                "this kernel or container has no CPU latency QoS device (containers: pass it through with --device \(path)); remove the setting cpu_latency_us"
            default:
                "remove the setting cpu_latency_us to run without it"
            }
        return "cannot hold the CPU latency limit of \(microseconds) µs (setting cpu_latency_us): \(cause); \(remedy)"
    }
}
