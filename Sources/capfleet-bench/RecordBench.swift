import ArgumentParser
import FleetBus
import FleetClient
import FleetCore
import FleetProtocol
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Sustained recording: how many 1920x1080 YUYV 30 fps synthetic streams this machine records
/// without losing a frame, the MB/s written against a plain sequential write of the same files'
/// sizes to the same disk (measured in the same run), CPU per stream, and whether the
/// coordinator's memory stays flat over consecutive takes. Real processes: a `capfleet
/// coordinator` child and one `capfleet agent` child per stream, all on this machine.
struct RecordBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "record",
        abstract: "Streams recorded without drops at 1080p30, MB/s against a plain write, CPU per stream, coordinator memory over time.")

    @Option(help: "Seconds recorded per step of the ramp.") var seconds: Double = 10
    @Option(help: "Most streams to try.") var maxStreams: Int = 6
    @Option(help: "Seconds of the sustained run that watches the coordinator's memory (consecutive 30 s takes, each deleted after).")
    var sustainedSeconds: Double = 60
    @Option(help: "Frames of 1080p YUYV fed to the recording writer alone (the writer-against-disk stage).")
    var muxerFrames: Int = 450

    /// One store's ramp: 1, 2, … streams until one loses frames; the best step's figures, with
    /// its fleet (still running) and, for agent-held takes, the best step's take kept for collect.
    func ramp(store: Capfleet_V1_RecordStore) throws -> (fleet: RecordBenchFleet, best: (streams: Int, row: RecordBenchFleet.Step), keptTake: String?)
    {
        let fleet = try RecordBenchFleet(store: store)
        let name = store == .agent ? "on each agent's disk (--store agent)" : "by the coordinator (--store coordinator)"
        print(
            "\n== recording 1920x1080 YUYV at 30 fps per stream, written \(name), \(fmt(seconds)) s per step; files in \(store == .agent ? fleet.fleet.directory + "/recN/recordings" : fleet.recordings)"
        )
        print(
            "streams  fps/stream  frames  dropped  MB/s written  CPU %/stream  coordinator CPU %/stream (not recording, all)  coordinator RSS MiB  stored after stop"
        )
        var best: (streams: Int, row: RecordBenchFleet.Step)?
        var single: RecordBenchFleet.Step?
        var kept: String?
        for streams in 1...max(1, maxStreams) {
            try fleet.ensureAgents(streams)
            let step = try fleet.record(seconds: seconds)
            print(
                String(
                    format: "%7d  %10.2f  %6d  %7d  %12.1f  %12.1f  %24.2f (%5.2f)  %19.1f  %15.1f s", streams, step.framesPerSecondPerStream,
                    step.frames,
                    step.dropped, step.megabytesPerSecond, step.cpuPercent / Double(streams), step.coordinatorCPUPercent / Double(streams),
                    step.coordinatorIdleCPUPercent,
                    step.coordinatorResidentMegabytes, step.backlogSeconds))
            if streams == 1 { single = step }
            let good = step.dropped == 0 && step.framesPerSecondPerStream >= 29 && step.backlogSeconds < 3
            if good, store == .agent {
                if let kept { try fleet.delete(kept) }
                kept = step.takeID
            } else {
                try fleet.delete(step.takeID)
            }
            guard step.dropped == 0, step.framesPerSecondPerStream >= 29 else {
                print("  \(streams) streams lose frames (or fall below 29 fps): this machine holds \(streams - 1)")
                break
            }
            // A writer slower than the cameras stores the take only long after its stop (the
            // agents spooled meanwhile): nothing lost, but not sustainable.
            guard step.backlogSeconds < 3 else {
                print(
                    String(
                        format: "  %d streams: nothing lost, but stored %.1f s after the stop: this machine sustains %d", streams,
                        step.backlogSeconds, streams - 1))
                break
            }
            best = (streams, step)
        }
        // A figure, not a verdict: a loaded machine that loses a frame of one stream still gets
        // its disk ratio, for one stream, said as such.
        guard let chosen = best ?? single.map({ (1, $0) }) else { throw BenchFailure("the recording benchmark measured no step") }
        if chosen.row.dropped > 0 || chosen.row.framesPerSecondPerStream < 29 {
            print("  not even one stream recorded without drops on this machine now; the figures below are for one stream")
        }
        // The same bytes, written plainly: one file per segment of the same size, 1 MiB writes,
        // no fsync (the recorder does not sync either), same disk.
        let plain = try fleet.plainWrite(sizes: chosen.row.segmentSizes)
        print(
            String(
                format:
                    "most streams without drops: %d; recording wrote %.1f MB/s, a plain sequential write of the same %d files %.1f MB/s: ratio %.3f",
                chosen.streams, chosen.row.megabytesPerSecond, chosen.row.segmentSizes.count, plain, chosen.row.megabytesPerSecond / plain))
        print(
            String(
                format:
                    "  (the recording's rate is the cameras' — %d × 124.4 MB/s —, not the disk's: the ratio says how much of the disk %d streams use; CPU per stream %.1f %% of one core, of which the coordinator %.2f %%)",
                chosen.streams, chosen.streams, chosen.row.cpuPercent / Double(chosen.streams),
                chosen.row.coordinatorCPUPercent / Double(chosen.streams)))
        return (fleet, chosen, kept)
    }

    func run() throws {
        // The writer alone, first, on an idle machine: what recording costs against the disk when
        // the cameras and the network are not the limit. Two plain writes of the same sizes
        // follow, averaged.
        print(
            "== the recording writer alone against the disk: \(muxerFrames) frames of 1920x1080 YUYV into DeviceTakeRecorder (Matroska via libavformat, SQLite index, SHA-256 on its own thread), as fast as it takes them, synced to disk; then a plain write of the same files' sizes, synced"
        )
        let muxerDirectory = RecordBenchFleet.benchDirectory(suffix: "muxer")
        let muxer = try RecordMuxerBench.run(directory: muxerDirectory + "/recordings", frames: muxerFrames, segmentSeconds: 5)
        let plainBefore = try RecordBenchFleet.plainWrite(sizes: muxer.segmentSizes, in: muxerDirectory + "/plain", durable: true)
        let plainAfter = try RecordBenchFleet.plainWrite(sizes: muxer.segmentSizes, in: muxerDirectory + "/plain", durable: true)
        let plainMean = (plainBefore + plainAfter) / 2
        print(
            String(
                format:
                    "writer: %d frames, %.0f MB in %d segments in %.2f s to disk: %.1f MB/s (%.1f streams of 1080p30); checksums done %.2f s later, off the writer's thread",
                muxer.frames, Double(muxer.bytes) / 1e6, muxer.segmentSizes.count, muxer.seconds, muxer.megabytesPerSecond,
                muxer.megabytesPerSecond / 124.4, muxer.checksumSeconds))
        print(
            String(
                format: "plain sequential write of the same %d files, twice: %.1f and %.1f MB/s; writer/plain ratio %.3f (target ≥ 0.8)",
                muxer.segmentSizes.count, plainBefore, plainAfter, muxer.megabytesPerSecond / plainMean))
        print(
            "  (the writer hands every 8 MiB to writeback as it goes; the plain write leaves it all to its fsync, so a ratio above 1 is the writer streaming to the disk sooner)"
        )

        try? FileManager.default.removeItem(atPath: muxerDirectory)

        // Where takes are written: each camera's host (the default), then the coordinator.
        let agents = try ramp(store: .agent)
        if let take = agents.keptTake {
            let collected = try agents.fleet.collect(take)
            let curve = try TransportBench.baseline(
                TransportBench.Case(name: "1 MiB", pixelFormat: .grey, width: 1024, height: 1024),
                seconds: 4, curve: true)
            print(
                String(
                    format:
                        "collect: %.0f MB of that take copied to the coordinator (1 MiB chunks, 8 in flight, SHA-256 checked, unthrottled) at %.1f MB/s; a plain CURVE PUSH/PULL of 1 MiB messages in this run: %.1f MB/s; ratio %.3f",
                    Double(collected.bytes) / 1e6, collected.megabytesPerSecond, curve.megabytesPerSecond,
                    curve.megabytesPerSecond > 0 ? collected.megabytesPerSecond / curve.megabytesPerSecond : 0))
            try agents.fleet.delete(take)
        }
        agents.fleet.stop()
        let coordinator = try ramp(store: .coordinator)
        let fleet = coordinator.fleet
        defer { fleet.stop() }
        let best = coordinator.best
        let agent = agents.best
        // Per recorded camera: what recording adds to the coordinator's CPU over the same cameras
        // not recording (measured just before each take), and that whole CPU as it was.
        func added(_ row: RecordBenchFleet.Step, _ streams: Int) -> Double {
            (row.coordinatorCPUPercent - row.coordinatorIdleCPUPercent) / Double(streams)
        }
        print(
            String(
                format:
                    "\nagent-held vs coordinator-written takes: %d vs %d streams of 1080p30 without drops; coordinator CPU per recorded camera %.2f %% vs %.2f %% of a core (goal ≤ 1 %% on the agents), recording's own share over the same cameras not recording; ratio %.3f",
                agent.streams, best.streams, added(agent.row, agent.streams), added(best.row, best.streams),
                added(best.row, best.streams) > 0 ? added(agent.row, agent.streams) / added(best.row, best.streams) : 0))
        print(
            String(
                format:
                    "  (the coordinator's whole CPU while recording, per camera: %.2f %% vs %.2f %%; with the same cameras not recording: %.2f %% vs %.2f %% in all)",
                agent.row.coordinatorCPUPercent / Double(agent.streams), best.row.coordinatorCPUPercent / Double(best.streams),
                agent.row.coordinatorIdleCPUPercent, best.row.coordinatorIdleCPUPercent))

        print(
            "\n== coordinator memory over \(fmt(sustainedSeconds)) s of recording \(best.streams) stream(s) (consecutive 30 s takes, each deleted after)"
        )
        let samples = try fleet.sustained(seconds: sustainedSeconds, takeSeconds: 30)
        guard let first = samples.first, let last = samples.last else { return }
        let peak = samples.map(\.megabytes).max() ?? 0
        let tail = samples.suffix(max(1, samples.count / 2))
        let half = samples.prefix(max(1, samples.count / 2))
        let early = half.map(\.megabytes).reduce(0, +) / Double(half.count)
        let late = tail.map(\.megabytes).reduce(0, +) / Double(tail.count)
        let minutes = (last.seconds - first.seconds) / 60
        print(
            String(
                format:
                    "coordinator RSS: first %.1f MiB, last %.1f MiB, peak %.1f MiB; mean of the first half %.1f, second half %.1f MiB (%+.1f MiB over %.1f min)",
                first.megabytes, last.megabytes, peak, early, late, late - early, minutes))
    }
}
