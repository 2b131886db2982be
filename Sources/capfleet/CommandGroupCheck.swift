import ArgumentParser

/// A word where a group of commands expects one of its commands (`capfleet consent bogus
/// cam-1 --reason x`) makes ArgumentParser report the first option it cannot place
/// ("Unknown option '--reason'"), which sends the user looking in the wrong place. When a
/// command line fails to parse, this names the word and the group's commands instead.
enum CommandGroupCheck {
    /// One group's commands by name, and whether it has a default command (which takes that
    /// command's arguments, so any word may follow it).
    private struct Group {
        var names: [String] = []
        var commands: [any ParsableCommand.Type] = []
        var hasDefault = false
    }

    private static func group(of command: any ParsableCommand.Type) -> Group {
        let configuration = command.configuration
        var group = Group(hasDefault: configuration.defaultSubcommand != nil)
        for subcommand in configuration.subcommands {
            group.names.append(subcommand._commandName)
            group.commands.append(subcommand)
        }
        return group
    }

    /// The message for `arguments` (without the program's name) when a group's command is
    /// mistyped; nil when the mistake, if any, is elsewhere.
    static func mistake(in arguments: [String], root: any ParsableCommand.Type) -> String? {
        var current = group(of: root)
        var path = [root._commandName]
        for word in arguments {
            // Options and help are the parser's to judge.
            if current.commands.isEmpty || current.hasDefault || word.hasPrefix("-") || word == "help" { return nil }
            guard let index = current.names.firstIndex(of: word) else {
                let named = path.joined(separator: " ")
                return "\(named): there is no command '\(word)'; the commands are \(current.names.joined(separator: ", ")) "
                    + "(`\(named) --help` says what each does)"
            }
            path.append(word)
            current = group(of: current.commands[index])
        }
        return nil
    }
}
