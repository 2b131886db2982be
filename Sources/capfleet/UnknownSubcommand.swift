import ArgumentParser

/// A command group's answer to a word that is none of its subcommands. Without it,
/// `capfleet consent bogus cam-1 --reason x` is parsed as the group's own arguments and
/// refused as "Unknown option '--reason'", which says nothing of what was wrong.
struct UnknownSubcommand: ParsableArguments {
    @Argument(parsing: .allUnrecognized, help: .hidden) var words: [String] = []

    /// Refuses the words when there are any, naming the group's subcommands.
    func check(_ group: any ParsableCommand.Type) throws {
        guard let first = words.first else { return }
        let path = group._commandName
        let names = group.configuration.subcommands.map { $0._commandName }.filter { $0 != "help" }
        throw ValidationError("`\(first)` is not a \(path) subcommand; the subcommands are \(names.joined(separator: ", ")), e.g. `capfleet \(path) \(names.first ?? "") --help`")
    }
}
