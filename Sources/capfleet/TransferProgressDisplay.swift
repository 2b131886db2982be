import FleetClient
import Foundation

/// A progress bar on the terminal for long transfers (exports, backups, restores) and verifies.
/// Only for a person at a terminal: nothing when stdout or stderr is not a TTY (a script, a
/// pipe) or with --json, so that scripted output stays exactly what it was.
final class TransferProgressDisplay {
    private(set) var total: UInt64
    let label: String
    let unit: String
    private let shown: Bool
    private let started = Date()
    private var lastShown = Date.distantPast
    private var done: UInt64 = 0

    init(total: UInt64 = 0, label: String, unit: String = "bytes", json: Bool = false) {
        self.total = total
        self.label = label
        self.unit = unit
        shown = !json && isatty(1) == 1 && isatty(2) == 1
    }

    /// Shows a FleetClient transfer as it goes.
    func follow(_ event: TransferProgress) {
        switch event {
        case let .started(total): self.total = total
        case let .advanced(done): show(done)
        case .finished: finish()
        }
    }

    func show(_ done: UInt64) {
        self.done = done
        // Ten times a second is as fast as anyone reads; the last update always shows.
        guard shown, Date().timeIntervalSince(lastShown) > 0.1 || done >= total else { return }
        lastShown = Date()
        let line = ProgressLine(label: label, done: done, total: total, elapsedSeconds: Date().timeIntervalSince(started), unit: unit)
        FileHandle.standardError.write(Data(("\r" + line.text + "\u{1B}[K").utf8))
    }

    func finish() {
        guard shown else { return }
        lastShown = .distantPast
        show(max(done, total))
        FileHandle.standardError.write(Data("\n".utf8))
    }
}
