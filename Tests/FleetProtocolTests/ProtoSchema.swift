import Foundation

/// What the contract tests need of proto-docs/*.proto: each message's and enum's name, and its
/// fields (or values) with their numbers, oneof members included. Enough of proto3 for files
/// this project writes; not a general parser.
struct ProtoSchema {
    struct Field: Equatable {
        let name: String
        let number: Int
    }

    struct Declaration {
        enum Kind { case message, enumeration }
        let kind: Kind
        let name: String
        /// Declared inside another message (`SyncCheckResult.Entry`).
        let nested: Bool
        var fields: [Field] = []
    }

    let file: String
    private(set) var declarations: [Declaration] = []

    subscript(name: String) -> Declaration? { declarations.first { $0.name == name } }

    init(file: String, text: String) {
        self.file = file
        // Comments go first: they quote field-like text ("number 0: every picture").
        let code = text.split(separator: "\n", omittingEmptySubsequences: false)
            .map { line in line.range(of: "//").map { String(line[..<$0.lowerBound]) } ?? String(line) }
            .joined(separator: "\n")
        let token =
            /(?<open>(?<kind>message|enum)\s+(?<name>\w+)\s*\{)|(?<block>\b(?:oneof\s+\w+|reserved[^;{]*)\s*\{)|(?<brace>[{}])|(?<field>(?<fieldName>\w+)\s*=\s*(?<number>\d+)\s*[;\[])/
        // Which declaration each open brace belongs to (nil: a oneof or other block).
        var stack: [Int?] = []
        for match in code.matches(of: token) {
            if match.output.open != nil, let kind = match.output.kind, let name = match.output.name {
                declarations.append(
                    Declaration(
                        kind: kind == "message" ? .message : .enumeration, name: String(name),
                        nested: stack.contains { $0 != nil }))
                stack.append(declarations.count - 1)
            } else if match.output.block != nil {
                stack.append(nil)
            } else if let brace = match.output.brace {
                if brace == "{" { stack.append(nil) } else if !stack.isEmpty { stack.removeLast() }
            } else if let name = match.output.fieldName, let number = match.output.number, let owner = stack.last(where: { $0 != nil }) ?? nil {
                declarations[owner].fields.append(Field(name: String(name), number: Int(number)!))
            }
        }
    }

    static func load(_ file: String) throws -> ProtoSchema {
        ProtoSchema(file: file, text: try String(contentsOf: ContractDocuments.folder.appendingPathComponent(file), encoding: .utf8))
    }

    static func all() throws -> [ProtoSchema] {
        try FileManager.default.contentsOfDirectory(atPath: ContractDocuments.folder.path)
            .filter { $0.hasSuffix(".proto") }.sorted().map(load)
    }
}

/// proto-docs' Markdown documents, read as a third party reads them.
enum ContractDocuments {
    static let folder = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("proto-docs")
    static var repository: URL { folder.deletingLastPathComponent() }

    static func text(_ document: String) throws -> String {
        try String(contentsOf: folder.appendingPathComponent(document), encoding: .utf8)
    }

    static func all() throws -> String {
        try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".md") }.sorted()
            .map(text).joined(separator: "\n")
    }

    /// A field documented by number: a table row `| 7 | name |` (the name may be in backticks)
    /// or inline, "`name` (7" as in "`device_id` (1, string)".
    static func documents(_ field: ProtoSchema.Field, in text: String) -> Bool {
        let name = NSRegularExpression.escapedPattern(for: field.name)
        let row = "\\|\\s*\(field.number)\\s*\\|\\s*`?\(name)`?\\s*\\|"
        let inline = "`\(name)`\\s*\\(\(field.number)\\b"
        return text.range(of: row, options: .regularExpression) != nil || text.range(of: inline, options: .regularExpression) != nil
    }

    /// The rows of the Markdown table that follows `heading` (its header and rule skipped), as cells.
    static func table(after heading: String, in text: String) -> [[String]] {
        guard let start = text.range(of: heading) else { return [] }
        var rows: [[String]] = []
        var inTable = false
        for line in text[start.upperBound...].split(separator: "\n", omittingEmptySubsequences: false) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.hasPrefix("|") {
                inTable = true
                rows.append(
                    trimmed.split(separator: "|", omittingEmptySubsequences: false).dropFirst().dropLast()
                        .map { $0.trimmingCharacters(in: .whitespaces) })
            } else if inTable {
                break
            }
        }
        return Array(rows.dropFirst(2))
    }
}
