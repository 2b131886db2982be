/// Growing delay between reconnection attempts: doubles from `initial` up to `maximum`
/// and starts over after a success, so a fleet does not hammer a coordinator that is
/// coming back up.
public struct ReconnectBackoff: Sendable {
    public let initialNanoseconds: UInt64
    public let maximumNanoseconds: UInt64
    private var next: UInt64

    public init(initialNanoseconds: UInt64 = 250_000_000, maximumNanoseconds: UInt64 = 8_000_000_000) {
        self.initialNanoseconds = initialNanoseconds
        self.maximumNanoseconds = maximumNanoseconds
        self.next = initialNanoseconds
    }

    /// The delay before the next attempt; each call doubles the one after it.
    public mutating func nextDelay() -> UInt64 {
        let delay = next
        next = min(next * 2, maximumNanoseconds)
        return delay
    }

    public mutating func reset() { next = initialNanoseconds }
}
