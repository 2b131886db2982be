/// Rules on the fleet's operators as a whole, as opposed to what one operator may do
/// (`RequiredRole`). Pure: the store applies them inside the transaction that changes the
/// roster, so that the check and the change are one step.
public enum OperatorRoster {
    public struct Refusal: Error, Sendable, Equatable, CustomStringConvertible {
        public let name: String
        public var description: String {
            "\(name) is the last admin; add another admin first, or nobody could manage the fleet"
        }
    }

    /// Why `name` may not be removed from `roster`, or nil if it may (an unknown name is the
    /// caller's "not found", not a refusal). An operator whose role is unreadable counts as
    /// no admin.
    public static func refusal(removing name: String, from roster: [(name: String, role: OperatorRole?)]) -> Refusal? {
        let admins = roster.filter { $0.role == .admin }.map(\.name)
        return admins == [name] ? Refusal(name: name) : nil
    }
}
