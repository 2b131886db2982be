/// State confined to one owned thread, checked where it is used (modelled on swift-nio's
/// `NIOLoopBoundBox`): it may be made, moved and held anywhere, but its value is read or
/// changed only on its thread, and any other use stops the process at once instead of
/// racing quietly. This is what makes "thread-confined" a fact rather than a convention
/// behind `@unchecked Sendable`.
public final class ThreadBound<Value>: @unchecked Sendable {
    private let thread: OwnedThread
    private var stored: Value

    public init(_ value: Value, on thread: OwnedThread) {
        self.thread = thread
        self.stored = value
    }

    /// The value, on its thread only.
    public var value: Value {
        get {
            precondition(thread.isCurrent, "state bound to thread \(thread.name) used on another thread")
            return stored
        }
        _modify {
            precondition(thread.isCurrent, "state bound to thread \(thread.name) used on another thread")
            yield &stored
        }
    }

    /// Runs `body` with the value, on its thread only.
    public func withValue<T>(_ body: (inout Value) throws -> T) rethrows -> T {
        precondition(thread.isCurrent, "state bound to thread \(thread.name) used on another thread")
        return try body(&stored)
    }
}
