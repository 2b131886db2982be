import FleetBus
import FleetCore
import Foundation
import Synchronization

/// The consent the coordinator last told this agent for each device, kept on disk
/// (`consent.json` in the state directory, written whole and synced before it counts) so
/// that neither a restart nor a lost coordinator unlocks a device. A device never heard
/// of is not determined: fail-closed.
final class ConsentBook: Sendable {
    struct Entry: Codable, Sendable, Equatable {
        var state: ConsentState
        var reason: String
        var changedUnixMilliseconds: Int64
    }

    private let path: String
    private let entries: Mutex<[String: Entry]>

    /// Loads the book. A file that cannot be read is an error, not an empty book: an
    /// empty one would be safe too (everything not determined), but silently losing a
    /// grant would look like a fault nobody can explain.
    init(stateDirectory: String) throws {
        path = stateDirectory + "/consent.json"
        guard FileManager.default.fileExists(atPath: path) else {
            entries = Mutex([:])
            return
        }
        do {
            let data = try Data(contentsOf: URL(fileURLWithPath: path))
            entries = Mutex(try JSONDecoder().decode([String: Entry].self, from: data))
        } catch {
            throw AgentError.stateDirectoryUnusable(
                path: path, reason: "the consent file cannot be read (\(error)); remove it to start every device as not determined")
        }
    }

    func state(of deviceID: String) -> ConsentState { entries.withLock { $0[deviceID]?.state ?? .notDetermined } }

    /// Records a new state and writes the book before returning, so that what the agent
    /// enforces is what survives a crash. False: the change is older than the one held
    /// (`ConsentOrder`), and neither recorded nor to be enforced.
    @discardableResult
    func record(_ entry: Entry, for deviceID: String) throws -> Bool {
        let (applies, snapshot) = entries.withLock { table -> (Bool, [String: Entry]?) in
            guard ConsentOrder.applies(changedAt: entry.changedUnixMilliseconds, over: table[deviceID]?.changedUnixMilliseconds) else {
                return (false, nil)
            }
            guard table[deviceID] != entry else { return (true, nil) }
            table[deviceID] = entry
            return (true, table)
        }
        guard let snapshot else { return applies }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let text = String(decoding: try encoder.encode(snapshot), as: UTF8.self)
        do {
            try SecretFile.write(text + "\n", path: path)
        } catch {
            throw AgentError.stateDirectoryUnusable(path: path, reason: "cannot write the consent file: \(String(cString: strerror(error.errno)))")
        }
        return true
    }
}
