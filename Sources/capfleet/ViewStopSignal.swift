import Foundation
import Synchronization

/// SIGINT and SIGTERM for `capfleet view`: turned from "die at once" (which left the player
/// running, an orphan) into a flag the frame loop checks every 250 ms, and passed on to the
/// player at once, so a player blocked on its window closes, our write to it fails, and the
/// view ends and reaps it.
final class ViewStopSignal: @unchecked Sendable {
    private let signalNumber = Atomic<Int32>(0)
    private let childID = Atomic<Int32>(0)
    private var sources: [any DispatchSourceSignal] = []

    init() {
        for number in [SIGINT, SIGTERM] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { [self] in
                signalNumber.store(number, ordering: .relaxed)
                let child = childID.load(ordering: .relaxed)
                if child > 0 { kill(child, number) }
            }
            source.resume()
            sources.append(source)
        }
    }

    /// The signal received, 0 while none.
    var received: Int32 { signalNumber.load(ordering: .relaxed) }

    /// The player to pass signals on to (0: none).
    var child: Int32 {
        get { childID.load(ordering: .relaxed) }
        set { childID.store(newValue, ordering: .relaxed) }
    }
}
