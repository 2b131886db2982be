/// The software triggers sent to a camera whose frames have not come back yet, for pairing
/// each frame with the trigger that started it (`CameraClockMapping.addTrigger`). Frames come
/// back in the order their triggers went out, so a frame's trigger is the latest one sent
/// before the frame's exposure; those sent before it will never start a frame (theirs was lost
/// or the camera took two triggers as one) and are let go.
public struct TriggersInFlight: Sendable {
    /// Host CLOCK_MONOTONIC ns of each trigger sent, oldest first.
    private var sent: [UInt64] = []
    public let capacity: Int

    public init(capacity: Int = 64) {
        self.capacity = max(capacity, 1)
    }

    public var count: Int { sent.count }

    public mutating func recordSent(_ instantNs: UInt64) {
        sent.append(instantNs)
        if sent.count > capacity { sent.removeFirst(sent.count - capacity) }
    }

    /// The trigger of a frame exposed at about `exposureNs` (host clock, as well as it is
    /// known): the latest sent at or before `exposureNs + toleranceNs`, taken out with every
    /// older one; nil when none was (a frame that was not triggered, or arrived first).
    public mutating func pair(exposureNs: UInt64, toleranceNs: UInt64) -> UInt64? {
        let limit = exposureNs &+ toleranceNs
        guard let index = sent.lastIndex(where: { $0 <= limit }) else { return nil }
        let instant = sent[index]
        sent.removeFirst(index + 1)
        return instant
    }

    /// A trigger that never went out (the camera refused the write).
    public mutating func forget(_ instantNs: UInt64) { sent.removeAll { $0 == instantNs } }

    public mutating func removeAll() { sent.removeAll() }
}
