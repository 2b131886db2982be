import FleetBus
import FleetCore
import FleetProtocol
import Foundation

/// A preview waiting for the PUSH socket.
struct PendingPreview {
    let header: Capfleet_V1_FrameHeader
    let jpeg: [UInt8]
    let statistics: DeviceStatistics
}

/// Previews waiting for the socket, one slot per device, newest wins; on the publisher thread.
/// They have a path of their own beside the full-rate frames: full-rate frames never displace
/// a preview, previews go out first whenever the socket takes messages, and whether full-rate
/// frames flow at all does not gate them.
struct PreviewSlots {
    private var waiting: [PendingPreview] = []

    var isEmpty: Bool { waiting.isEmpty }

    mutating func put(_ preview: PendingPreview) {
        if let index = waiting.firstIndex(where: { $0.header.deviceID == preview.header.deviceID }) {
            waiting[index].statistics.previewsSkipped.add(1, ordering: .relaxed)
            waiting[index] = preview
        } else {
            waiting.append(preview)
        }
    }

    /// Sends what the socket takes now, oldest device first.
    mutating func send(on socket: ZMQSocket) {
        while let next = waiting.first {
            var header = next.header
            header.sendMonotonicNs = MonotonicTime.now()
            do {
                let headerBytes: [UInt8] = try header.serializedBytes()
                guard try socket.send(headerBytes, more: true, dontWait: true) else { return }
                // Once the first part is queued libzmq accepts the rest of the message.
                _ = try socket.send(next.jpeg, dontWait: true)
                next.statistics.previewsSent.add(1, ordering: .relaxed)
            } catch {
                next.statistics.previewsFailed.add(1, ordering: .relaxed)
            }
            waiting.removeFirst()
        }
    }
}

extension FramePublisher {
    /// A device's newest preview (frames.md, "Previews"); replaces one of the same device still
    /// waiting. Called on the preview thread; never blocks.
    public func submitPreview(header: Capfleet_V1_FrameHeader, jpeg: [UInt8], statistics: DeviceStatistics) {
        let preview = PendingPreview(header: header, jpeg: jpeg, statistics: statistics)
        onPublisherThread { outbox, sockets in
            outbox.previews.put(preview)
            outbox.flush(sockets)
        }
    }
}
