/// How an operator request arrives on the coordinator's ROUTER (operator.md, "Framing"), and
/// so how its reply must go back. A DEALER sends the request alone; a REQ socket puts an
/// empty delimiter part before it and drops any reply that does not start with one. The
/// coordinator answers each in the envelope it came in, so a plain pyzmq REQ socket works.
public enum OperatorFraming: Sendable, Equatable {
    /// `[request]`, answered `[reply]` (`[reply][payload]` for a frame).
    case bare
    /// `[empty][request]`, answered `[empty][reply]` (`[empty][reply][payload]`).
    case delimited

    /// The parts of one message as the ROUTER received them, its routing id removed.
    public struct Opened: Sendable, Equatable {
        public let framing: OperatorFraming
        /// The parts after the envelope: exactly one (the request) when well formed.
        public let body: [[UInt8]]

        /// The serialized request, when the body is exactly one part.
        public var request: [UInt8]? { body.count == 1 ? body[0] : nil }
    }

    /// Reads the envelope. A message whose first part is empty and that has more parts came
    /// from a REQ socket (or a DEALER imitating one): its reply carries the delimiter, even
    /// when the body is malformed, so that the REQ socket hears the refusal.
    public static func open(_ parts: [[UInt8]]) -> Opened {
        if parts.count >= 2, parts[0].isEmpty {
            return Opened(framing: .delimited, body: Array(parts.dropFirst()))
        }
        return Opened(framing: .bare, body: parts)
    }

    /// The reply's parts in this envelope.
    public func wrap(_ reply: [[UInt8]]) -> [[UInt8]] {
        switch self {
        case .bare: reply
        case .delimited: [[]] + reply
        }
    }
}
