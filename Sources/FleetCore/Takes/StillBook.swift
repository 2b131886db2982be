/// The still director's decisions (stills.md), kept apart from its awaits as `TakeBook` keeps
/// a take's: whether a still may be asked for and at which fleet instant, which cameras are
/// asked and which refused, how long their answers may take, whether a still's copying
/// starts, whether a still may be deleted, and what a camera's late pictures need. Values in,
/// decisions out; the fleet time is the caller's to read.
public struct StillBook: Sendable {
    /// Why a still (or a request about one) is refused as a whole.
    public struct Refusal: Error, Sendable, Equatable, CustomStringConvertible {
        public enum Kind: Sendable, Equatable {
            case badRequest, notFound, unavailable, permissionDenied
        }

        public let kind: Kind
        public let description: String

        public init(_ kind: Kind, _ description: String) {
            self.kind = kind
            self.description = description
        }
    }

    /// What an operator asked for, as far as the book decides on it.
    public struct Request: Sendable, Equatable {
        public var all: Bool
        public var deviceIDs: [String]
        public var width: UInt32
        public var height: UInt32
        public var bracketEV: [Double]
        /// 0: `fromNow` after now.
        public var atFleetTimeNs: UInt64
        /// 0: one second.
        public var fromNowNs: UInt64
        /// From each camera's stream as it runs; such a still may lie in the past, in what each
        /// camera's agent kept (recordings.md, "Pre-roll").
        public var streamingFormat: Bool

        public init(
            all: Bool = false, deviceIDs: [String] = [], width: UInt32 = 0, height: UInt32 = 0, bracketEV: [Double] = [],
            atFleetTimeNs: UInt64 = 0, fromNowNs: UInt64 = 0, streamingFormat: Bool = false
        ) {
            self.all = all
            self.deviceIDs = deviceIDs
            self.width = width
            self.height = height
            self.bracketEV = bracketEV
            self.atFleetTimeNs = atFleetTimeNs
            self.fromNowNs = fromNowNs
            self.streamingFormat = streamingFormat
        }
    }

    /// One camera the still names, as the index and the control handler have it now.
    public struct Camera: Sendable, Equatable {
        public var deviceID: String
        public var nodeID: String
        public var consent: ConsentState
        public var online: Bool

        public init(deviceID: String, nodeID: String, consent: ConsentState, online: Bool) {
            self.deviceID = deviceID
            self.nodeID = nodeID
            self.consent = consent
            self.online = online
        }
    }

    /// The most a still may be scheduled ahead: a far one holds every camera's answer open.
    public static let longestLeadNanoseconds: UInt64 = 60_000_000_000
    /// The furthest back a still from the streams may reach: the longest pre-roll an agent keeps.
    public static let longestReachNanoseconds = UInt64(PreRollSettings.maximumSeconds * 1e9)

    /// Stills whose pictures are being copied now.
    public private(set) var collecting: Set<String> = []

    public init() {}

    /// The still's instant in fleet time, or why the request cannot be a still.
    public static func instant(of request: Request, now: UInt64) -> Result<UInt64, Refusal> {
        guard request.all != !request.deviceIDs.isEmpty else {
            return .failure(Refusal(.badRequest, request.all ? "give either --all or devices, not both" : "name the cameras, or ask for --all"))
        }
        guard (request.width == 0) == (request.height == 0) else {
            return .failure(Refusal(.badRequest, "give the size as WxH, or max for each camera's largest format"))
        }
        guard request.bracketEV.count <= 16, request.bracketEV.allSatisfy({ $0.isFinite && abs($0) <= 10 }) else {
            return .failure(Refusal(.badRequest, "a bracket has at most 16 steps, each between -10 and +10 EV"))
        }
        let instant =
            request.atFleetTimeNs != 0 ? request.atFleetTimeNs : now &+ (request.fromNowNs == 0 ? 1_000_000_000 : request.fromNowNs)
        guard instant <= now + longestLeadNanoseconds else {
            return .failure(Refusal(.badRequest, "the still's instant must lie within the next 60 s of fleet time (now \(now))"))
        }
        if instant < now {
            // A past instant's frames are gone, but for what the cameras' agents kept of their streams.
            guard request.streamingFormat, request.bracketEV.isEmpty else {
                return .failure(
                    Refusal(
                        .badRequest,
                        "the still's instant is \(TakeStartWindow.spoken(now - instant)) in the past (now \(now)): only a still from the streams (--size streaming, no bracket) reaches back, into the cameras' pre-roll"
                    ))
            }
            guard now - instant <= longestReachNanoseconds else {
                return .failure(
                    Refusal(
                        .badRequest, "the still's instant is \(TakeStartWindow.spoken(now - instant)) in the past, beyond the 60 s a pre-roll keeps"))
            }
        }
        return .success(instant)
    }

    /// Which cameras are refused and why: those without consent (their pictures do not leave
    /// their hosts) and those offline. When every camera is refused, the still is: for want of
    /// consent if that is every camera's reason, otherwise as unavailable.
    /// `reasons` names every refused camera with its reason, for the audit log.
    public static func screen(_ cameras: [Camera]) -> (refused: [String: String], refusal: Refusal?, reasons: String) {
        var refused: [String: String] = [:]
        for camera in cameras {
            if !camera.consent.allowsRealFrames {
                refused[camera.deviceID] =
                    "consent is \(camera.consent.rawValue): its pictures do not leave its host (capfleet consent grant \(camera.deviceID))"
            } else if !camera.online {
                refused[camera.deviceID] = "its node \(camera.nodeID) is offline"
            }
        }
        let reasons = cameras.compactMap { camera in refused[camera.deviceID].map { "\(camera.deviceID): \($0)" } }.joined(separator: "; ")
        guard !cameras.isEmpty, refused.count == cameras.count else { return (refused, nil, reasons) }
        let forConsent = cameras.allSatisfy { !$0.consent.allowsRealFrames }
        return (refused, Refusal(forConsent ? .permissionDenied : .unavailable, "no still taken: \(reasons)"), reasons)
    }

    /// How long the cameras' answers are waited for: until the last picture's instant, then
    /// generously, since a 16-megapixel PNG takes seconds to encode on a small host and a
    /// camera answering after the wait has its pictures on its disk with nobody to collect them.
    public static func answerWaitNanoseconds(untilLast: UInt64, pictures: Int) -> UInt64 {
        untilLast &+ UInt64(30 + 20 * max(pictures, 1)) * 1_000_000_000
    }

    /// Whether a copy of the still's pictures starts now: not while one runs.
    public mutating func startCollecting(_ stillID: String) -> Bool {
        collecting.insert(stillID).inserted
    }

    public mutating func finishedCollecting(_ stillID: String) {
        collecting.remove(stillID)
    }

    public func isCollecting(_ stillID: String) -> Bool { collecting.contains(stillID) }

    /// Why the still may not be deleted now, or nil.
    public func deletion(of stillID: String, known: Bool) -> Refusal? {
        guard known else { return Refusal(.notFound, "no still \(stillID); see capfleet stills list") }
        guard !collecting.contains(stillID) else {
            return Refusal(
                .unavailable, "still \(stillID)'s pictures are being copied; delete it once that is done (capfleet stills show \(stillID))")
        }
        return nil
    }

    /// Pictures an agent holds of a camera: whether their sidecars must be written before the
    /// index adopts them (the camera's answer never brought them, so nothing wrote them).
    public static func heldPicturesNeedSidecars(alreadyIndexed: Bool, answering: Bool, pictures: Int) -> Bool {
        !alreadyIndexed && !answering && pictures > 0
    }
}
