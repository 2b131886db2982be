import ArgumentParser
import FleetClient
import Foundation

/// Shell completion of the fleet's own names: device ids, node ids and take ids, asked from the
/// coordinator as the operator the command being typed would act as (its --coordinator and
/// --credential if already on the line, else the environment and the default credential).
///
/// A TAB must neither hang the shell nor print an error into the line being typed: where no
/// credential exists or no coordinator answers within `timeout`, a completion offers nothing
/// and the shell leaves the word as it is.
enum FleetCompletion {
    /// Long enough for a coordinator across a LAN, short enough that a TAB with none feels instant.
    static let timeout = 1.0

    static let deviceIDs = CompletionKind.custom { words, _, prefix in
        names(startingWith: prefix, words: words) { try $0.call(.listDevices(.init()), timeout: timeout).reply.devices.map(\.deviceID) }
    }

    static let nodeIDs = CompletionKind.custom { words, _, prefix in
        names(startingWith: prefix, words: words) { try $0.call(.listNodes(.init()), timeout: timeout).reply.nodes.map(\.nodeID) }
    }

    static let takeIDs = CompletionKind.custom { words, _, prefix in
        names(startingWith: prefix, words: words) { try $0.call(.listRecordings(.init()), timeout: timeout).reply.takes.map(\.id) }
    }

    private static func names(
        startingWith prefix: String, words: [String],
        _ ask: (OperatorClient) throws -> [String]
    ) -> [String] {
        guard let options = try? CoordinatorOptions.parse(connectionArguments(in: words) + ["--timeout", "\(timeout)"]),
            let client = try? options.client(),
            let names = try? ask(client)
        else { return [] }
        return names.filter { $0.hasPrefix(prefix) }.sorted()
    }

    /// `--coordinator` and `--credential` as typed on the line so far (`--name VALUE` or
    /// `--name=VALUE`), so that completion asks the coordinator the command itself would.
    static func connectionArguments(in words: [String]) -> [String] {
        var found: [String] = []
        for (index, word) in words.enumerated() {
            for name in ["--coordinator", "--credential"] {
                if word == name, index + 1 < words.count {
                    found += [name, asTheShellWouldPass(words[index + 1])]
                } else if word.hasPrefix(name + "=") {
                    found += [name, asTheShellWouldPass(String(word.dropFirst(name.count + 1)))]
                }
            }
        }
        return found
    }

    /// The shell hands completion its words verbatim: undo the quoting and the `~/` it would
    /// have undone for the command itself.
    private static func asTheShellWouldPass(_ word: String) -> String {
        var value = word
        if value.count >= 2, let first = value.first, first == value.last, first == "'" || first == "\"" {
            value = String(value.dropFirst().dropLast())
        }
        if value.hasPrefix("~/"), let home = ProcessInfo.processInfo.environment["HOME"] {
            value = home + value.dropFirst()
        }
        return value
    }
}
