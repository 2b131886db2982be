import Synchronization

/// A value set once after what holds it was made: parts opened in order where an earlier
/// one (the HTTP server, bound first so who_am_i can tell its port) serves a later one.
final class LateBound<Value: Sendable>: Sendable {
    private let stored = Mutex<Value?>(nil)

    var value: Value? { stored.withLock { $0 } }

    func set(_ value: Value) { stored.withLock { $0 = value } }
}
