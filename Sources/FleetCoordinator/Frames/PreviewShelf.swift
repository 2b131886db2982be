import FleetCore
import FleetProtocol
import Foundation
import Synchronization

/// The latest preview of every device (frames.md, "Previews"), as the ingest thread accepted
/// it: a JPEG of a few kilobytes and its header per device, replaced by the next one, kept in
/// memory only. Counted apart from full-rate frames, which previews never add to.
public final class PreviewShelf: Sendable {
    public struct Shelved: Sendable {
        public let header: Capfleet_V1_FrameHeader
        public let jpeg: Data
        public let receivedUnixMilliseconds: Int64
    }

    private struct Entry {
        var latest: Shelved?
        var received: UInt64 = 0
        var firstArrival: UInt64
        /// Monotonic arrival times within the rate's window, oldest first.
        var arrivals: [UInt64] = []
    }

    /// Previews per second are counted over this long: at one a second, a one-second count
    /// would jump between 0 and 2.
    static let rateWindowNanoseconds: UInt64 = 10_000_000_000
    private let entries = Mutex<[String: Entry]>([:])

    public init() {}

    /// Keeps `jpeg` as the device's latest preview. Ingest thread.
    func keep(header: Capfleet_V1_FrameHeader, jpeg: Data, atUnixMilliseconds now: Int64, monotonic: UInt64) {
        entries.withLock { table in
            var entry = table[header.deviceID] ?? Entry(firstArrival: monotonic)
            entry.latest = Shelved(header: header, jpeg: jpeg, receivedUnixMilliseconds: now)
            entry.received += 1
            entry.arrivals.append(monotonic)
            entry.arrivals.removeFirst(entry.arrivals.prefix { monotonic - $0 > Self.rateWindowNanoseconds }.count)
            table[header.deviceID] = entry
        }
    }

    public func latest(of deviceID: String) -> Shelved? { entries.withLock { $0[deviceID]?.latest } }

    /// Every device's latest preview.
    public func all() -> [String: Shelved] { entries.withLock { $0.compactMapValues(\.latest) } }

    public struct Rate: Sendable {
        public let received: UInt64
        public let perSecond: Double
        public let lastUnixMilliseconds: Int64
    }

    /// Previews received per device, how many a second over the last 10 s, and when the last came.
    public func rates(atMonotonic now: UInt64) -> [String: Rate] {
        entries.withLock { table in
            table.mapValues { entry in
                let recent = entry.arrivals.filter { now >= $0 && now - $0 <= Self.rateWindowNanoseconds }.count
                // Until the window has filled, over the time since the first preview.
                let seconds = Double(min(Self.rateWindowNanoseconds, max(1_000_000_000, now &- entry.firstArrival))) / 1e9
                return Rate(
                    received: entry.received, perSecond: Double(recent) / seconds,
                    lastUnixMilliseconds: entry.latest?.receivedUnixMilliseconds ?? 0)
            }
        }
    }

    public func forget(deviceIDs: [String]) {
        entries.withLock { table in for id in deviceIDs { table[id] = nil } }
    }
}

extension PreviewShelf.Shelved {
    /// As an operator reply carries it, with its age at `now`.
    func wire(atUnixMilliseconds now: Int64) -> Capfleet_V1_DevicePreview {
        .with {
            $0.header = header
            $0.jpeg = jpeg
            $0.receivedUnixMs = receivedUnixMilliseconds
            $0.ageMs = UInt64(max(0, now - receivedUnixMilliseconds))
        }
    }
}
