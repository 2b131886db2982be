/// Names of nodes and operators as admins give them.
public enum AccessNames {
    public static let rule = "a name is 1 to 64 letters, digits, '.', '-' or '_'"

    public static func isValid(_ name: String) -> Bool {
        (1...64).contains(name.count) && hasOnlyNameCharacters(name)
    }

    /// Letters, digits, `.`, `-`, `_` (ASCII): what a name (or a prefix of one) may hold.
    public static func hasOnlyNameCharacters(_ text: String) -> Bool {
        text.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "._-".contains($0)) }
    }
}
