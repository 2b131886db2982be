/// How an enrollment token names the nodes it admits (enrollment.md, "Multi-use tokens").
public enum EnrollmentNaming: Sendable, Hashable {
    /// `capfleet enroll --name NAME`: the admin named the one node the token is for.
    case fixed(String)
    /// `capfleet enroll --name-prefix PREFIX`: each node is called what its agent asks for
    /// (`capfleet agent --name`), or else PREFIX1, PREFIX2, … in order of use.
    case prefix(String)
}

/// What an admin asks for when making a token: how it names nodes and how many it admits.
/// Checked here, so the operator endpoint and `capfleet enroll --data` apply one rule.
public struct EnrollmentTokenSpec: Sendable, Hashable {
    public static let maximumUses = 10_000
    /// A prefix leaves room for the number after it within a name's 64 characters.
    public static let maximumPrefixLength = 56

    public let naming: EnrollmentNaming
    public let uses: Int

    /// `uses` 0 means 1. Exactly one of `name` and `namePrefix` is given (empty = not given).
    public init(name: String, namePrefix: String, uses: Int) throws(EnrollmentTokenSpecProblem) {
        let name = name.trimmingSpaces, prefix = namePrefix.trimmingSpaces
        let uses = uses == 0 ? 1 : uses
        guard (1...Self.maximumUses).contains(uses) else { throw .usesOutOfRange(uses) }
        switch (name.isEmpty, prefix.isEmpty) {
        case (true, true): throw uses > 1 ? .noPrefix(uses: uses) : .noName
        case (false, false): throw .nameAndPrefix
        case (false, true):
            guard uses == 1 else { throw .oneNameForMany(uses: uses) }
            guard AccessNames.isValid(name) else { throw .invalidName(name) }
            naming = .fixed(name)
        case (true, false):
            guard (1...Self.maximumPrefixLength).contains(prefix.count), AccessNames.hasOnlyNameCharacters(prefix) else {
                throw .invalidPrefix(prefix)
            }
            naming = .prefix(prefix)
        }
        self.uses = uses
    }
}

public enum EnrollmentTokenSpecProblem: Error, Sendable, Equatable, CustomStringConvertible {
    case noName
    case noPrefix(uses: Int)
    case nameAndPrefix
    case oneNameForMany(uses: Int)
    case usesOutOfRange(Int)
    case invalidName(String)
    case invalidPrefix(String)

    public var description: String {
        switch self {
        case .noName:
            "give the token the node's name (--name NAME) or, for many agents, a name prefix (--name-prefix PREFIX, with --uses N)"
        case let .noPrefix(uses):
            "a token for \(uses) agents needs --name-prefix PREFIX: each node is called by its agent's own --name, or else PREFIX1, PREFIX2, … in order of use"
        case .nameAndPrefix:
            "--name and --name-prefix exclude each other: --name for one node, --name-prefix for a token that admits several"
        case let .oneNameForMany(uses):
            "a token for \(uses) agents cannot give them all one name: use --name-prefix PREFIX (nodes PREFIX1, PREFIX2, …, or each agent's own --name) instead of --name"
        case let .usesOutOfRange(uses):
            "--uses \(uses): a token admits 1 to \(EnrollmentTokenSpec.maximumUses) agents"
        case let .invalidName(name):
            "--name \(name): \(AccessNames.rule)"
        case let .invalidPrefix(prefix):
            "--name-prefix \(prefix): a prefix is 1 to \(EnrollmentTokenSpec.maximumPrefixLength) letters, digits, '.', '-' or '_'"
        }
    }
}

/// A token as the coordinator knows it when an agent presents it.
public struct EnrollmentTokenFacts: Sendable, Hashable {
    public var naming: EnrollmentNaming
    public var uses: Int
    /// Uses spent so far, and when and by which node the most recent one was.
    public var used: Int
    public var lastUseAt: Int64?
    public var lastUseNodeID: String
    public var expiresAt: Int64
    public var revokedAt: Int64?
    public var revokedBy: String
    /// The number the next PREFIXn name starts looking from.
    public var nextNumber: Int

    public init(
        naming: EnrollmentNaming, uses: Int, used: Int = 0, lastUseAt: Int64? = nil, lastUseNodeID: String = "",
        expiresAt: Int64, revokedAt: Int64? = nil, revokedBy: String = "", nextNumber: Int = 1
    ) {
        self.naming = naming
        self.uses = uses
        self.used = used
        self.lastUseAt = lastUseAt
        self.lastUseNodeID = lastUseNodeID
        self.expiresAt = expiresAt
        self.revokedAt = revokedAt
        self.revokedBy = revokedBy
        self.nextNumber = nextNumber
    }
}

/// Where a token stands for a listing.
public enum EnrollmentTokenState: String, Sendable, Hashable {
    /// It admits more agents.
    case open
    /// Every use is spent.
    case spent
    case expired
    case revoked
}

extension EnrollmentTokenFacts {
    public var remaining: Int { max(uses - used, 0) }

    /// Revoked before spent before expired: the reason it admits nobody that an admin can act on first.
    public func state(at now: Int64) -> EnrollmentTokenState {
        if revokedAt != nil { return .revoked }
        if used >= uses { return .spent }
        return now < expiresAt ? .open : .expired
    }
}

/// This node's earlier use of the same token, if it had one.
public struct EarlierEnrollment: Sendable, Hashable {
    public var nodeKey: String
    public var name: String
    public var at: Int64
    /// False once an admin revoked the key.
    public var keyIsLive: Bool

    public init(nodeKey: String, name: String, at: Int64, keyIsLive: Bool) {
        self.nodeKey = nodeKey
        self.name = name
        self.at = at
        self.keyIsLive = keyIsLive
    }
}

/// Why a token was not spent on a node. The coordinator words it for the agent.
public enum EnrollmentRefusal: Sendable, Hashable {
    case unknownToken
    case expired(at: Int64)
    case revoked(at: Int64, by: String)
    /// Every use is spent: `uses` 1 is a one-time token used once.
    case alreadyUsed(uses: Int, lastAt: Int64, lastNodeID: String)
    /// The node id enrolled with this token before, under another key (lost, if
    /// `keyRevoked` is false) or under a key an admin revoked since: a token admits each
    /// node once, so that a revoked host holding the token cannot let itself back in.
    case usedByThisNodeBefore(at: Int64, name: String, keyRevoked: Bool)
    /// The node id has a live key already: enrolling it again would hand its identity to
    /// whoever holds the token. Revoke the old key first.
    case nodeAlreadyEnrolled(nodeID: String)
    /// The key was enrolled before (perhaps revoked): a fresh key is needed.
    case keyAlreadyKnown
    /// The name the agent asked for is not a valid name.
    case invalidName(String)
    /// The name the agent asked for is another node's.
    case nameTaken(name: String, nodeID: String)
}

/// What became of an enrollment attempt.
public enum EnrollmentOutcome: Sendable, Hashable {
    /// A use was spent: use `use` of the token's `uses`.
    case enrolled(name: String, use: Int, uses: Int)
    /// The same node presented the same key with the same token again (its agent did not
    /// hear the first answer): answered as before, and no use is spent.
    case enrolledAgain(name: String)
    case refused(EnrollmentRefusal)

    public var name: String? {
        switch self {
        case let .enrolled(name, _, _), let .enrolledAgain(name): name
        case .refused: nil
        }
    }
}

/// Whether a token admits a node, and under which name. Pure: the store gathers the facts
/// and applies the decision in one transaction.
public enum EnrollmentTokenRule {
    public enum Decision: Sendable, Hashable {
        /// Spend use `use` on the node, called `name`; the token's next number is `nextNumber`.
        case admit(name: String, use: Int, nextNumber: Int)
        case again(name: String)
        case refuse(EnrollmentRefusal)
    }

    /// - Parameters:
    ///   - requestedName: what the agent asks to be called (`capfleet agent --name`); empty
    ///     for none. It names the node with a prefix token; a fixed token's name wins.
    ///   - nodeHasLiveKey: the node id has a key that is not revoked.
    ///   - keyIsKnown: the key is some node's or operator's already.
    ///   - takenNames: names other nodes have (name → node id), live or not.
    public static func decide(
        token: EnrollmentTokenFacts, nodeID: String, nodeKey: String, requestedName: String,
        earlierUse: EarlierEnrollment?, nodeHasLiveKey: Bool, keyIsKnown: Bool,
        takenNames: [String: String], now: Int64
    ) -> Decision {
        if let earlierUse {
            if earlierUse.nodeKey == nodeKey && earlierUse.keyIsLive { return .again(name: earlierUse.name) }
            return .refuse(.usedByThisNodeBefore(at: earlierUse.at, name: earlierUse.name, keyRevoked: !earlierUse.keyIsLive))
        }
        if let revokedAt = token.revokedAt { return .refuse(.revoked(at: revokedAt, by: token.revokedBy)) }
        if token.used >= token.uses {
            return .refuse(.alreadyUsed(uses: token.uses, lastAt: token.lastUseAt ?? 0, lastNodeID: token.lastUseNodeID))
        }
        guard now < token.expiresAt else { return .refuse(.expired(at: token.expiresAt)) }
        if nodeHasLiveKey { return .refuse(.nodeAlreadyEnrolled(nodeID: nodeID)) }
        if keyIsKnown { return .refuse(.keyAlreadyKnown) }
        let use = token.used + 1
        switch token.naming {
        case let .fixed(name):
            return .admit(name: name, use: use, nextNumber: token.nextNumber)
        case let .prefix(prefix):
            let asked = requestedName.trimmingSpaces
            if !asked.isEmpty {
                guard AccessNames.isValid(asked) else { return .refuse(.invalidName(asked)) }
                if let owner = takenNames[asked], owner != nodeID { return .refuse(.nameTaken(name: asked, nodeID: owner)) }
                return .admit(name: asked, use: use, nextNumber: token.nextNumber)
            }
            var number = max(token.nextNumber, 1)
            while let owner = takenNames[prefix + String(number)], owner != nodeID { number += 1 }
            return .admit(name: prefix + String(number), use: use, nextNumber: number + 1)
        }
    }
}

extension String {
    /// Without leading and trailing spaces and tabs (FleetCore does without Foundation).
    var trimmingSpaces: String {
        let blank: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        return String(drop(while: blank).reversed().drop(while: blank).reversed())
    }
}
