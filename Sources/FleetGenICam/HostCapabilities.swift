import Foundation

/// What this process may do that GenICam streaming cares about.
enum HostCapabilities {
    /// CAP_NET_RAW is in the effective set (Aravis's packet socket needs it): bit 13 of
    /// /proc/self/status's CapEff.
    static var hasNetRaw: Bool {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("CapEff:") }),
            let mask = UInt64(line.dropFirst("CapEff:".count).trimmingCharacters(in: .whitespaces), radix: 16)
        else { return false }
        return mask & (1 << 13) != 0
    }
}
