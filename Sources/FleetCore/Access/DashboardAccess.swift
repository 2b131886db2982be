/// The web dashboard's sign-in rules, pure: a one-time sign-in link for one operator, a
/// session that expires, and what each request needs. The store keeps the links and
/// sessions; the HTTP side asks these rules and carries out the answer. An action's role is
/// checked afterwards exactly as on the operator endpoint (`RequiredRole`), by name, so a
/// removed operator or a changed role takes effect at the next request.
public enum DashboardAccess {
    /// A sign-in link works once, for this long after it was made (milliseconds).
    public static let signInLinkLifetime: Int64 = 10 * 60 * 1000
    /// A session lasts this long after sign-in, then the browser signs in again (milliseconds).
    public static let sessionLifetime: Int64 = 12 * 60 * 60 * 1000
    /// The cookie's name; its value is the session's secret, kept in the store only as a hash.
    public static let cookieName = "capfleet_session"
    /// The header a state-changing request carries its session's CSRF token in.
    public static let csrfHeader = "X-CaptureFleet-CSRF"

    /// Why a sign-in link does not sign anyone in.
    public enum LinkRefusal: Error, Equatable, Sendable, CustomStringConvertible {
        case unknown
        case used(atUnixMs: Int64)
        case expired(atUnixMs: Int64)

        public var description: String {
            switch self {
            case .unknown: "this sign-in link is not one the coordinator made; ask for a new one with `capfleet dashboard login`"
            case .used: "this sign-in link was used already (each works once); ask for a new one with `capfleet dashboard login`"
            case .expired: "this sign-in link expired (links last 10 minutes); ask for a new one with `capfleet dashboard login`"
            }
        }
    }

    /// A sign-in link as stored.
    public struct Link: Equatable, Sendable {
        public var expiresAtUnixMs: Int64
        public var usedAtUnixMs: Int64?

        public init(expiresAtUnixMs: Int64, usedAtUnixMs: Int64?) {
            self.expiresAtUnixMs = expiresAtUnixMs
            self.usedAtUnixMs = usedAtUnixMs
        }
    }

    /// nil: the link signs its operator in now (and is used up); else why not.
    public static func refusal(redeeming link: Link?, now: Int64) -> LinkRefusal? {
        guard let link else { return .unknown }
        if let used = link.usedAtUnixMs { return .used(atUnixMs: used) }
        guard now < link.expiresAtUnixMs else { return .expired(atUnixMs: link.expiresAtUnixMs) }
        return nil
    }

    /// A session as the store knows it, with its operator's role now (nil: removed).
    public struct Session: Equatable, Sendable {
        public var operatorName: String
        public var role: OperatorRole?
        public var csrfToken: String
        public var expiresAtUnixMs: Int64
        public var endedAtUnixMs: Int64?

        public init(operatorName: String, role: OperatorRole?, csrfToken: String, expiresAtUnixMs: Int64, endedAtUnixMs: Int64?) {
            self.operatorName = operatorName
            self.role = role
            self.csrfToken = csrfToken
            self.expiresAtUnixMs = expiresAtUnixMs
            self.endedAtUnixMs = endedAtUnixMs
        }
    }

    /// What a request gets.
    public enum Verdict: Equatable, Sendable {
        /// Served, as this operator.
        case allowed(operatorName: String, role: OperatorRole)
        /// Not signed in (no cookie, an unknown, ended or expired session): sign in again.
        case signInNeeded(String)
        /// Signed in, but the request is not the page's own (no or a wrong CSRF token, another
        /// site's Origin): refused and counted.
        case forgery(String)
    }

    /// The request's shape, as far as these rules care.
    public struct Request: Equatable, Sendable {
        /// It changes something (POST and the like); reads need no CSRF token.
        public var changesState: Bool
        public var csrfToken: String?
        /// The Origin header names this server, or there is none (a same-origin GET).
        public var originIsOwn: Bool

        public init(changesState: Bool, csrfToken: String?, originIsOwn: Bool) {
            self.changesState = changesState
            self.csrfToken = csrfToken
            self.originIsOwn = originIsOwn
        }
    }

    public static func verdict(on request: Request, session: Session?, now: Int64) -> Verdict {
        guard let session else { return .signInNeeded("not signed in: open a sign-in link from `capfleet dashboard login`") }
        if session.endedAtUnixMs != nil { return .signInNeeded("this session was ended (signed out or revoked); sign in again") }
        guard now < session.expiresAtUnixMs else { return .signInNeeded("this session expired (sessions last 12 hours); sign in again") }
        guard let role = session.role else { return .signInNeeded("operator \(session.operatorName) was removed") }
        if request.changesState {
            guard request.originIsOwn else { return .forgery("a request from another site's page") }
            guard let token = request.csrfToken, constantTimeEqual(token, session.csrfToken) else {
                return .forgery("a request without this session's CSRF token")
            }
        }
        return .allowed(operatorName: session.operatorName, role: role)
    }

    /// Compares secrets without stopping at the first difference.
    public static func constantTimeEqual(_ a: String, _ b: String) -> Bool {
        let (x, y) = (Array(a.utf8), Array(b.utf8))
        guard x.count == y.count else { return false }
        return zip(x, y).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }
}
