/// The synthetic camera's lens: a motor that moves the lens position towards a target at
/// a fixed speed, and a scene whose subject distance depends on where you look, so that
/// autofocus, continuous focus, range restriction and smooth focus all behave visibly.
/// Pure state: `advance(to:)` once per frame with the frame's monotonic time.
public struct SimulatedLens: Sendable, Equatable {
    /// Full travel (0 → 1) takes 0.25 s normally and 2 s with smooth focus.
    public static let normalSpeed = 4.0
    public static let smoothSpeed = 0.5

    public private(set) var state: FocusState
    private var target: Double
    private var lastTime: UInt64?

    public init() {
        state = FocusState(mode: .continuous, lensPosition: 0.5)
        target = 0.5
    }

    public static let capabilities = FocusCapabilities(
        modes: FocusMode.allCases, lensPosition: true, pointOfInterest: true,
        rangeRestriction: true, smoothFocus: true,
        minimumFocusDistanceMillimetres: minimumFocusDistanceMillimetres)
    /// Where lens position 0 focuses: 10 cm, a webcam's usual near limit.
    public static let minimumFocusDistanceMillimetres = 100.0

    /// Where the simulated subject at `point` is in focus: near at the bottom of the frame,
    /// far at the top, as in a room seen from eye level.
    public static func subjectLensPosition(at point: NormalizedPoint) -> Double {
        0.15 + 0.7 * (1 - point.y)
    }

    public mutating func apply(_ request: FocusRequest) {
        if let smooth = request.smoothFocus { state.smoothFocus = smooth }
        if let range = request.rangeRestriction { state.rangeRestriction = range }
        if let point = request.pointOfInterest { state.pointOfInterest = point }
        if let mode = request.mode { state.mode = mode }
        if let position = request.lensPosition {
            state.mode = .locked
            target = position
        } else if state.mode != .locked {
            target = restricted(Self.subjectLensPosition(at: state.pointOfInterest))
        }
        state.isAdjusting = abs(target - (state.lensPosition ?? target)) > 1e-9
    }

    public mutating func advance(to time: UInt64) {
        defer { lastTime = time }
        guard let lastTime, time > lastTime, var position = state.lensPosition else { return }
        if state.mode == .continuous { target = restricted(Self.subjectLensPosition(at: state.pointOfInterest)) }
        let seconds = Double(time - lastTime) / 1e9
        let step = (state.smoothFocus ? Self.smoothSpeed : Self.normalSpeed) * seconds
        position += max(-step, min(step, target - position))
        state.lensPosition = position
        let arrived = abs(target - position) < 1e-9
        state.isAdjusting = !arrived
        // Autofocus focuses once, then holds: it becomes locked where it landed.
        if arrived, state.mode == .auto { state.mode = .locked }
    }

    /// Near restricts focus to the nearer half of the travel, far to the further half.
    private func restricted(_ position: Double) -> Double {
        switch state.rangeRestriction {
        case .none: position
        case .near: min(position, 0.5)
        case .far: max(position, 0.5)
        }
    }
}
