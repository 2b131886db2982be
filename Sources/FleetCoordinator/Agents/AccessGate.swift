import FleetBus
import FleetCore
import FleetStore
import Foundation
import Logging
import Synchronization

/// Who is on the other end of a coordinator connection, as the ZAP handler admitted them.
/// Carried as the connection's ZeroMQ "User-Id", so every message says who sent it.
public enum Principal: Sendable, Equatable {
    /// An enrolled agent: its node id and the key it authenticated with.
    case node(id: String, key: String)
    /// Someone holding an enrollment token's one-time key: may only send Enroll.
    case enrollment(tokenKey: String)
    case `operator`(name: String)

    /// How every node's User-Id begins (`userID`), for a check that need not parse it.
    public static let nodePrefix: StaticString = "node:"

    public var userID: String {
        switch self {
        case let .node(id, key): "node:" + key + ":" + id
        case let .enrollment(tokenKey): "enroll:" + tokenKey
        case let .operator(name): "operator:" + name
        }
    }

    /// Z85 keys are 40 characters and may contain ':', so they are read by length.
    public init?(userID: String?) {
        guard let userID else { return nil }
        if userID.hasPrefix("node:") {
            let rest = userID.dropFirst(5)
            guard rest.count > 41 else { return nil }
            let key = rest.prefix(40)
            guard rest.dropFirst(40).first == ":" else { return nil }
            self = .node(id: String(rest.dropFirst(41)), key: String(key))
        } else if userID.hasPrefix("enroll:"), userID.count == 47 {
            self = .enrollment(tokenKey: String(userID.dropFirst(7)))
        } else if userID.hasPrefix("operator:"), userID.count > 9 {
            self = .operator(name: String(userID.dropFirst(9)))
        } else {
            return nil
        }
    }

    public var description: String {
        switch self {
        case let .node(id, _): "node \(id)"
        case let .enrollment(tokenKey): "enrollment token \(tokenKey.prefix(8))"
        case let .operator(name): "operator \(name)"
        }
    }
}

/// The coordinator's gate: decides every CURVE handshake (as the ZAP handler's `decide`),
/// remembers revoked keys so a revoked node's messages are dropped from the next one on,
/// and closes a revoked node's open connections.
public final class AccessGate: Sendable {
    /// ZAP domains: one per endpoint, so a key is let in only where its holder belongs.
    public enum Domain: String, Sendable, CaseIterable {
        case control, ingest, `operator`, telemetry, clock, record, live
    }

    private let store: FleetDatabase
    private let rejections: RejectionCounter
    private let logger: Logger
    private let revokedKeys = Mutex<Set<String>>([])
    /// The connections each node's messages arrived on, by file descriptor and local port.
    private let connections = Mutex<[String: Set<NodeConnection>]>([:])

    struct NodeConnection: Hashable {
        let fd: Int32
        let peer: String
    }

    init(store: FleetDatabase, rejections: RejectionCounter, logger: Logger) async throws {
        self.store = store
        self.rejections = rejections
        self.logger = logger
        let revoked = try await store.revokedNodeKeys()
        revokedKeys.withLock { $0 = Set(revoked.map(\.publicKey)) }
    }

    /// The ZAP decision for one handshake. Runs on the ZAP thread; may read SQLite.
    func decide(_ request: ZAPRequest) -> ZAPDecision {
        let endpoint = request.domain
        guard let domain = Domain(rawValue: request.domain) else {
            return deny(endpoint, .wrongEndpoint, request, "handshake on an endpoint without a known ZAP domain")
        }
        guard request.mechanism == "CURVE", let key = request.clientKey else {
            return deny(endpoint, .handshakeFailed, request, "mechanism \(request.mechanism) is not accepted; every endpoint is CURVE")
        }
        let holder: KeyHolder?
        do {
            holder = try store.keyHolderNow(publicKey: key.z85)
        } catch {
            logger.error("cannot look up a key; refusing the connection", metadata: ["error": "\(error)"])
            return .deny(reason: "the fleet database is unavailable")
        }
        switch (domain, holder) {
        case let (.control, .node(record)?), let (.ingest, .node(record)?), let (.clock, .node(record)?),
            let (.record, .node(record)?):
            if record.revokedAt != nil {
                return deny(endpoint, .revokedKey, request, "node \(record.nodeId)'s key \(key.fingerprint)… was revoked")
            }
            return .allow(userID: Principal.node(id: record.nodeId, key: record.publicKey).userID)
        case (.control, .enrollmentToken?):
            // Expired and spent tokens get in too, so that Enroll can be answered with why
            // they are refused; nothing but Enroll is accepted from them.
            return .allow(userID: Principal.enrollment(tokenKey: key.z85).userID)
        case let (.operator, .operator(record)?), let (.telemetry, .operator(record)?), let (.live, .operator(record)?):
            return .allow(userID: Principal.operator(name: record.name).userID)
        case let (_, holder?):
            let who =
                switch holder {
                case let .node(record): "node \(record.nodeId)'s key"
                case .enrollmentToken: "an enrollment token's key"
                case let .operator(record): "operator \(record.name)'s key"
                }
            return deny(endpoint, .wrongEndpoint, request, "\(who) is not admitted on the \(endpoint) endpoint")
        case (_, nil):
            return deny(endpoint, .unknownKey, request, "unknown key \(key.fingerprint)…: not enrolled and not an operator")
        }
    }

    private func deny(_ endpoint: String, _ reason: InputRejection, _ request: ZAPRequest, _ detail: String) -> ZAPDecision {
        rejections.reject(endpoint: endpoint, reason: reason, peer: request.address, detail: detail)
        return .deny(reason: detail)
    }

    /// A handshake that failed before ZAP (plain client, wrong server key). The monitor
    /// does not say who the peer was.
    func handshakeFailed(domain: String, event: SocketEvent) {
        // Refusals by ZAP were counted when they were decided.
        guard event.event != SocketEvent.authFailure else { return }
        rejections.reject(
            endpoint: domain, reason: .handshakeFailed, peer: "a peer",
            detail: event.handshakeFailure ?? "handshake failed")
    }

    /// Whether a frame's sender may send frames of `nodeID`: its key is `nodeID`'s and not
    /// revoked. Runs on the ingest thread for every frame.
    func admitsFrame(userID: String?, nodeID: String, fd: Int32, endpoint: Domain = .ingest, peer: () -> String) -> Bool {
        guard case let .node(id, key)? = Principal(userID: userID) else {
            rejections.reject(
                endpoint: endpoint.rawValue, reason: .wrongIdentity, peer: peer(), detail: "a frame from a connection that is not a node's")
            return false
        }
        guard id == nodeID else {
            rejections.reject(
                endpoint: endpoint.rawValue, reason: .wrongIdentity, peer: peer(),
                detail: "node \(id) sent a frame claiming to be node \(nodeID)")
            return false
        }
        guard !isRevoked(key: key) else {
            rejections.reject(endpoint: endpoint.rawValue, reason: .revokedKey, peer: peer(), detail: "a frame from revoked node \(id)")
            return false
        }
        noteConnection(nodeID: id, fd: fd, peer: peer())
        return true
    }

    func isRevoked(key: String) -> Bool { revokedKeys.withLock { $0.contains(key) } }

    /// Remembers the connection a node's message came in on, to close it on revocation.
    func noteConnection(nodeID: String, fd: Int32, peer: String) {
        guard fd >= 0 else { return }
        let connection = NodeConnection(fd: fd, peer: peer)
        connections.withLock { table in
            if table[nodeID]?.contains(connection) != true { table[nodeID, default: []].insert(connection) }
        }
    }

    /// From now on messages under these keys are dropped; after `grace` (time for the
    /// agent to read that it was revoked) the node's connections are shut down, so that it
    /// must handshake again, which ZAP refuses.
    func revoke(keys: [String], nodeID: String, grace: Duration = .milliseconds(300)) {
        revokedKeys.withLock { $0.formUnion(keys) }
        let known = connections.withLock { $0.removeValue(forKey: nodeID) ?? [] }
        let logger = self.logger
        Task.detached {
            // Cancelled only at shutdown, when closing at once is what is wanted.
            try? await Task.sleep(for: grace)
            for connection in known {
                // The descriptor belongs to libzmq's I/O thread; shutdown (not close) ends the
                // TCP connection without freeing the number for reuse under its feet. A
                // descriptor whose peer changed since is someone else's connection: leave it.
                guard Self.peerAddress(of: connection.fd) == connection.peer else { continue }
                if shutdown(connection.fd, Int32(SHUT_RDWR)) == 0 {
                    logger.notice("closed a revoked node's connection", metadata: ["node.id": "\(nodeID)", "peer": "\(connection.peer)"])
                }
            }
        }
    }

    /// The IP address at the other end of `fd`, as libzmq's "Peer-Address" writes it.
    static func peerAddress(of fd: Int32) -> String? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let ok = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(fd, $0, &length) == 0 }
        }
        guard ok else { return nil }
        var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        let rc = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                getnameinfo($0, length, &host, socklen_t(host.count), nil, 0, NI_NUMERICHOST)
            }
        }
        return rc == 0 ? String(cString: host) : nil
    }
}
