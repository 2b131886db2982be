/// What the device's state makes of each captured frame: whether it is wanted at all,
/// whether its real pixels may leave or black ones go in their place (or nothing, for a
/// format that cannot be made black), the frames lost before it, and whether the take in
/// progress keeps it. One step per frame, so a consent change applies from the next frame on.
extension DeviceState {
    /// A frame as its source delivered it, with what the agent knows about it.
    public struct CapturedFrameFacts: Sendable, Equatable {
        /// The source's sequence number; a jump means frames lost before delivery.
        public var sequence: UInt64
        /// The source's running count of frames it skipped for want of a buffer.
        public var outOfBufferDrops: UInt64
        /// The capture instant in fleet time; nil while the node's clock has no estimate.
        public var fleetTime: UInt64?
        /// The device's drops before this frame.
        public var deviceDrops: DropTally
        public var pixelFormat: PixelFormat
        public var width: Int
        public var height: Int

        public init(
            sequence: UInt64, outOfBufferDrops: UInt64, fleetTime: UInt64?, deviceDrops: DropTally,
            pixelFormat: PixelFormat, width: Int, height: Int
        ) {
            self.sequence = sequence
            self.outOfBufferDrops = outOfBufferDrops
            self.fleetTime = fleetTime
            self.deviceDrops = deviceDrops
            self.pixelFormat = pixelFormat
            self.width = width
            self.height = height
        }
    }

    public struct FrameDecision: Sendable, Equatable {
        public enum Pixels: Sendable, Equatable {
            /// The frame as captured.
            case real
            /// A black frame of the same layout in its place: consent is not granted.
            case black
            /// Nothing: consent is not granted and the format cannot be made black (counted withheld).
            case withheld
            /// Nothing, uncounted: capture is no longer wanted (stopping, revoked, suspended).
            case discarded
        }

        public var pixels: Pixels
        /// Frames lost before this one that the source did not count itself (discontinuity).
        public var discontinuities: UInt64
        /// The device's drops including those.
        public var deviceDrops: DropTally
        public var consent: ConsentState
        public var recording: Bool
        /// The take that keeps this frame, with its drops so far; nil when no take does.
        public var recordedFor: (takeID: String, drops: DropTally)?
        /// To perform before the frame goes on (the recording light, a take ending).
        public var actions: [Action]

        public static func == (lhs: FrameDecision, rhs: FrameDecision) -> Bool {
            lhs.pixels == rhs.pixels && lhs.discontinuities == rhs.discontinuities && lhs.deviceDrops == rhs.deviceDrops
                && lhs.consent == rhs.consent && lhs.recording == rhs.recording && lhs.recordedFor?.takeID == rhs.recordedFor?.takeID
                && lhs.recordedFor?.drops == rhs.recordedFor?.drops && lhs.actions == rhs.actions
        }
    }

    public mutating func frameCaptured(_ frame: CapturedFrameFacts) -> FrameDecision {
        let skipped = gaps.observe(frame.sequence)
        // A frame the source dropped for want of a buffer is already counted as out of
        // buffers: it is not a discontinuity again when the next sequence jumps over it.
        let droppedHere = frame.outOfBufferDrops >= outOfBuffersSeen ? frame.outOfBufferDrops - outOfBuffersSeen : 0
        outOfBuffersSeen = frame.outOfBufferDrops
        var drops = frame.deviceDrops
        guard shouldCapture else {
            return FrameDecision(
                pixels: .discarded, discontinuities: 0, deviceDrops: drops, consent: consent, recording: isRecording,
                recordedFor: nil, actions: [])
        }
        let discontinuities = skipped > droppedHere ? skipped - droppedHere : 0
        drops.discontinuity += discontinuities
        var decision = FrameDecision(
            pixels: .real, discontinuities: discontinuities, deviceDrops: drops, consent: consent,
            recording: isRecording, recordedFor: nil, actions: [])
        let real = consent.allowsRealFrames
        if real, !realFramesFlowing { decision.actions.append(.realFrames(flowing: true)) }
        realFramesFlowing = real
        if !real {
            guard BlackFrame.canMake(pixelFormat: frame.pixelFormat, width: frame.width, height: frame.height) else {
                decision.pixels = .withheld
                return decision
            }
            decision.pixels = .black
        }
        // A frame without fleet time cannot be placed in a take.
        guard let fleetTime = frame.fleetTime, let current = take else { return decision }
        switch current.fate(ofFrameAt: fleetTime) {
        case .outside:
            break
        case .record:
            decision.recordedFor = (current.takeID, current.drops(deviceDrops: drops))
        case .ends:
            decision.actions += endTake(reason: TakeStopCause.stopped.reason, withholding: false, deviceDrops: drops)
        }
        return decision
    }
}

extension BlackFrame {
    /// Whether `BlackFrame` can make a black frame of this layout (raw formats and JPEG);
    /// other compressed formats are withheld instead.
    public static func canMake(pixelFormat: PixelFormat, width: Int, height: Int) -> Bool {
        guard width > 0, height > 0 else { return false }
        return pixelFormat.frameByteCount(width: width, height: height) != nil || pixelFormat == .mjpeg || pixelFormat.fourCC == "JPEG"
    }
}
