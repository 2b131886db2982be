import FleetBus
import FleetProtocol
import Foundation

/// What went wrong talking to the coordinator, and what to do about it.
public enum OperatorClientError: Error, CustomStringConvertible, Sendable {
    case unreachable(address: String, seconds: Double)
    case transport(ZMQError)
    case malformedReply(address: String)
    case refused(Capfleet_V1_Status, neededRole: Capfleet_V1_OperatorRole)

    public var description: String {
        switch self {
        case let .unreachable(address, seconds):
            "coordinator unreachable at \(address) (no answer in \(seconds.formatted()) s): is it running? Start one with `capfleet coordinator` or `capfleet dev`, or point --coordinator or \(WireDefaults.coordinatorEnvironmentVariable) at it. If it is running, it may not know your key (or your credential names another coordinator's key): see `capfleet whoami`."
        case let .transport(error):
            "cannot talk to the coordinator: \(error)"
        case let .malformedReply(address):
            "the coordinator at \(address) sent a reply this CLI cannot read; are the CLI and the coordinator the same version?"
        case let .refused(status, needed):
            (status.reason.isEmpty ? "the coordinator refused the request (\(status.code))" : status.reason)
                + (needed == .unspecified ? "" : " (ask an admin for a key with that role)")
        }
    }
}

/// A coordinator address as operators write it: HOST, HOST:PORT or [v6]:PORT.
public struct CoordinatorAddress: Sendable, CustomStringConvertible {
    public var host: String
    public var port: UInt16

    public init(host: String, port: UInt16) {
        self.host = host
        self.port = port
    }

    /// Parses `text`, using `defaultPort` when it names no port.
    public init?(_ text: String, defaultPort: UInt16) {
        var host = text
        var port = defaultPort
        if text.hasPrefix("["), let close = text.firstIndex(of: "]") {
            host = String(text[text.index(after: text.startIndex)..<close])
            let rest = text[text.index(after: close)...]
            if rest.hasPrefix(":") { guard let p = UInt16(rest.dropFirst()) else { return nil }; port = p }
        } else if text.filter({ $0 == ":" }).count == 1, let colon = text.firstIndex(of: ":") {
            host = String(text[..<colon])
            guard let p = UInt16(text[text.index(after: colon)...]) else { return nil }
            port = p
        }
        guard !host.isEmpty else { return nil }
        self.host = host
        self.port = port
    }

    /// The address from a flag, else the environment, else this machine.
    public static func resolve(_ flag: String?, defaultPort: UInt16) -> CoordinatorAddress? {
        if let flag { return CoordinatorAddress(flag, defaultPort: defaultPort) }
        if let env = ProcessInfo.processInfo.environment[WireDefaults.coordinatorEnvironmentVariable], !env.isEmpty {
            return CoordinatorAddress(env, defaultPort: defaultPort)
        }
        return CoordinatorAddress(host: "127.0.0.1", port: defaultPort)
    }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
    public var tcpEndpoint: String { "tcp://\(description)" }
}

/// Synchronous request/reply with the coordinator's operator endpoint, for the CLI.
/// One DEALER, used from the calling thread only; every call waits as long as the coordinator
/// may take for its request (operator.md, "Time limits"), and at least `timeout`.
public final class OperatorClient {
    public let address: CoordinatorAddress
    public let timeout: Double
    private let socket: ZMQSocket
    private var nextRequestID: UInt64 = 1
    private let operatorName: String
    /// Set to hold leases only while this client lives (`capfleet lock --hold`): the
    /// coordinator releases them when the session ends or falls silent for `sessionTimeoutMilliseconds`.
    public var sessionID: String?
    public var sessionTimeoutMilliseconds: UInt32 = 0

    public init(address: CoordinatorAddress, credential: OperatorCredential, timeout: Double = 3) throws(OperatorClientError) {
        self.address = address
        self.timeout = timeout
        operatorName = credential.name
        do {
            socket = try ZMQSocket(context: ZMQContext(), type: .dealer)
            try socket.makeCurveClient(serverKey: credential.coordinatorKey, keys: credential.keys)
            try socket.connect(address.tcpEndpoint)
        } catch {
            throw .transport(error)
        }
    }

    /// Sends one request and returns the reply (and the payload part, for frames).
    /// A reply whose status is not OK is thrown as `.refused`. Without `timeout` it waits as
    /// long as the coordinator may take for the request (`OperatorReplyTime`), or the client's
    /// timeout if that is longer; `timeout` replaces both.
    public func call(
        _ body: Capfleet_V1_OperatorRequest.OneOf_Body,
        timeout requestTimeout: Double? = nil
    ) throws(OperatorClientError) -> (reply: Capfleet_V1_OperatorReply, payload: [UInt8]?) {
        let timeout = requestTimeout ?? max(self.timeout, OperatorReplyTime.clientTimeoutSeconds(for: body))
        let requestID = try send(body)
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            guard let answer = try nextReply(before: deadline, timeout: timeout) else { continue }
            // A late answer to an earlier request that timed out: keep waiting for ours.
            guard answer.reply.requestID == requestID || answer.reply.requestID == 0 else { continue }
            guard answer.reply.status.isOK else { throw .refused(answer.reply.status, neededRole: answer.reply.neededRole) }
            return answer
        }
    }

    /// One request per body, up to `window` of them in flight at once, and their replies in
    /// the order of `bodies`: a listing that asks one thing per device (its formats) waits
    /// for a round trip per `window` devices rather than per device, while the coordinator,
    /// which answers requests side by side, is never handed more than `window` at a time.
    /// Each reply must come within the client's timeout of the one before; the first reply
    /// that is not OK is thrown as `.refused`.
    public func callEach(
        _ bodies: [Capfleet_V1_OperatorRequest.OneOf_Body], window: Int = 16
    ) throws(OperatorClientError) -> [Capfleet_V1_OperatorReply] {
        var replies = [Capfleet_V1_OperatorReply?](repeating: nil, count: bodies.count)
        var inFlight: [UInt64: Int] = [:]
        var next = 0
        var deadline = Date().addingTimeInterval(timeout)
        while next < bodies.count || !inFlight.isEmpty {
            while next < bodies.count, inFlight.count < max(window, 1) {
                inFlight[try send(bodies[next])] = next
                next += 1
            }
            guard let answer = try nextReply(before: deadline, timeout: timeout) else { continue }
            // A late answer to an earlier call's request that timed out is not one of these.
            let index = inFlight.removeValue(forKey: answer.reply.requestID)
            guard index != nil || answer.reply.requestID == 0 else { continue }
            guard answer.reply.status.isOK, let index else { throw .refused(answer.reply.status, neededRole: answer.reply.neededRole) }
            replies[index] = answer.reply
            deadline = Date().addingTimeInterval(timeout)
        }
        return replies.compactMap { $0 }
    }

    /// Sends a request for `body`; returns its request id.
    private func send(_ body: Capfleet_V1_OperatorRequest.OneOf_Body) throws(OperatorClientError) -> UInt64 {
        let requestID = nextRequestID
        nextRequestID += 1
        let request = Capfleet_V1_OperatorRequest.with {
            $0.requestID = requestID
            $0.operator = operatorName
            $0.body = body
            if let sessionID {
                $0.sessionID = sessionID
                $0.sessionTimeoutMs = sessionTimeoutMilliseconds
            }
        }
        do {
            try socket.send(try request.serializedBytes() as [UInt8])
        } catch let error as ZMQError {
            throw .transport(error)
        } catch {
            throw .malformedReply(address: address.description)
        }
        return requestID
    }

    /// The next reply (whichever request it answers), nil if none came within the poll; throws
    /// `.unreachable` once `deadline` has passed.
    private func nextReply(
        before deadline: Date, timeout: Double
    ) throws(OperatorClientError) -> (reply: Capfleet_V1_OperatorReply, payload: [UInt8]?)? {
        let remaining = deadline.timeIntervalSinceNow
        guard remaining > 0 else { throw .unreachable(address: address.description, seconds: timeout) }
        guard socket.waitForInput(milliseconds: max(1, Int(remaining * 1000))) else { return nil }
        guard let received = try? socket.receiveMultipart(dontWait: true, maxParts: 2), let first = received.parts.first,
            let reply = try? Capfleet_V1_OperatorReply(serializedBytes: first.array)
        else {
            throw .malformedReply(address: address.description)
        }
        return (reply, received.parts.count > 1 ? received.parts[1].array : nil)
    }
}
