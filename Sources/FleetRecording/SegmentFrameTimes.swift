import FleetCore

/// The frames of a segment file with their sequence numbers and fleet times, read from its
/// metadata track: exact (ns) from its `frame_times` entries (FrameTimesEntry); from a file
/// written before those, the frames' own timestamps (rounded to the millisecond, counted from
/// `takeStart`) numbered by its sequence markers. Only the metadata is read when the entries
/// are there: the video blocks are skipped, not read. Blocking disk I/O: call it on a thread
/// you own.
public enum SegmentFrameTimes {
    public struct Contents: Sendable, Equatable {
        public var frames: [FrameTime]
        /// From `frame_times` entries (ns); false: rounded to the millisecond.
        public var exact: Bool
    }

    public static func read(_ path: String, takeStart: UInt64) throws(RecordingError) -> Contents {
        // The first pass may still see a frame or two the demuxer read while probing the
        // streams: only its exact times count.
        let exact = try scan(path, takeStart: takeStart, videoToo: false)
        if exact.exact { return exact }
        return try scan(path, takeStart: takeStart, videoToo: true)
    }

    /// One pass over the file. Without `videoToo`, the demuxer skips the video blocks and only
    /// `frame_times` entries give frames.
    private static func scan(_ path: String, takeStart: UInt64, videoToo: Bool) throws(RecordingError) -> Contents {
        var exactFrames: [FrameTime] = []
        var roundedFrames: [FrameTime] = []
        var nextSequence: UInt64?
        try SegmentPackets.read(path, skippingVideo: !videoToo) { packet in
            switch packet {
            case let .video(nanoseconds):
                guard let sequence = nextSequence else { return }  // before any marker: unnumbered
                roundedFrames.append(FrameTime(sequence: sequence, fleetTime: takeStart &+ UInt64(max(nanoseconds, 0))))
                nextSequence = sequence + 1
            case let .metadata(json):
                if let entry = FrameTimesEntry(json: json) {
                    exactFrames += entry.frames
                } else if let marker = SequenceMarker(json: json) {
                    nextSequence = marker.sequence
                }
            }
        }
        if !exactFrames.isEmpty { return Contents(frames: exactFrames.sorted { $0.sequence < $1.sequence }, exact: true) }
        return Contents(frames: videoToo ? roundedFrames : [], exact: false)
    }
}

/// One camera's frames over a whole take, its segments read in order (SegmentFrameTimes).
public struct CameraFrameTimes: Sendable, Equatable {
    public var deviceID: String
    public var frames: [FrameTime]
    /// Every segment gave exact times.
    public var exact: Bool

    /// Reads `paths` (the camera's segments, in order). Blocking disk I/O.
    public static func read(deviceID: String, paths: [String], takeStart: UInt64) throws(RecordingError) -> CameraFrameTimes {
        var camera = CameraFrameTimes(deviceID: deviceID, frames: [], exact: true)
        for path in paths {
            let contents = try SegmentFrameTimes.read(path, takeStart: takeStart)
            camera.frames += contents.frames
            if !contents.exact, !contents.frames.isEmpty { camera.exact = false }
        }
        return camera
    }
}
