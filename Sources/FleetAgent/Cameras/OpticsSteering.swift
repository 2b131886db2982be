import FleetCapture
import FleetCore
import Logging
import Synchronization

/// Points a camera's own zoom, pan and tilt where auto-framing aims them (detection.md,
/// "Framing with the camera's optics"). The capture thread leaves the latest aim here, frame by
/// frame; one job at a time on the device's thread sets whatever changed (a driver call each),
/// so capture never waits for the camera's controls and a slow camera skips aims, not frames.
final class OpticsSteering: Sendable {
    private struct State {
        var pending: OpticalPointing?
        var posted = false
        /// What the camera was last set to; nil: not known (framing just began).
        var applied: OpticalPointing?
        var failureSaid = false
    }

    private let state = Mutex(State())

    /// On the capture thread: `pointing` is the aim now; true when a job must be posted to
    /// apply it (none is waiting already).
    func aim(_ pointing: OpticalPointing) -> Bool {
        state.withLock { state in
            state.pending = pointing
            guard !state.posted else { return false }
            state.posted = true
            return true
        }
    }

    /// Why a camera cannot be framed with its optics; nil when it can.
    static func unavailableReason(of source: any CameraSource) -> String? {
        switch source.zoomMethod {
        case nil: return "it cannot zoom"
        case .agentCrop?: return "its zoom is the agent's centred crop of its frames, which cannot pan"
        default: break
        }
        let writable = { (id: UInt32) in source.device.controls.contains { $0.id == id && !$0.isReadOnly } }
        guard writable(DeviceControl.panAbsoluteID), writable(DeviceControl.tiltAbsoluteID) else {
            return "it has no pan and tilt controls (pan_absolute, tilt_absolute)"
        }
        guard source.device.formats[source.activeFormatIndex].fieldOfViewDegrees != nil else {
            return "the field of view of its active format is not known, so no angle can be aimed"
        }
        return nil
    }

    /// The view its optics move across on the active format; nil when they cannot.
    static func view(of source: any CameraSource) -> OpticalView? {
        let format = source.device.formats[source.activeFormatIndex]
        guard let degrees = format.fieldOfViewDegrees, format.height > 0 else { return nil }
        return OpticalView(
            horizontalFieldOfViewDegrees: degrees, aspect: Double(format.width) / Double(format.height), maximumZoom: format.maxZoomFactor)
    }

    /// On the device's thread: sets what changed since the last aim applied; an aim left by a
    /// frame just before framing with the optics stopped (`stillFraming` false) is dropped.
    func apply(to source: any CameraSource, stillFraming: Bool, logger: Logger) {
        let (aim, before) = state.withLock { state -> (OpticalPointing?, OpticalPointing?) in
            state.posted = false
            defer { state.pending = nil }
            return (state.pending, state.applied)
        }
        guard let aim, stillFraming else { return }
        set(aim, before: before, on: source, logger: logger)
    }

    /// On the device's thread, framing with the optics stopped: back to the whole view.
    func goHome(_ source: any CameraSource, logger: Logger) {
        let before = state.withLock { state -> OpticalPointing? in
            state.pending = nil
            defer { state.applied = nil }
            return state.applied
        }
        set(.home, before: before, on: source, logger: logger)
    }

    private func set(_ aim: OpticalPointing, before: OpticalPointing?, on source: any CameraSource, logger: Logger) {
        do throws(CaptureError) {
            if before.map({ abs($0.zoom - aim.zoom) > 1e-3 }) ?? true { try source.zoom(.set(aim.zoom)) }
            for (id, value, old) in [(DeviceControl.panAbsoluteID, aim.pan, before?.pan), (DeviceControl.tiltAbsoluteID, aim.tilt, before?.tilt)] {
                guard let control = source.device.controls.first(where: { $0.id == id }) else { continue }
                let wanted = control.nearest(value)
                if old.map(control.nearest) != wanted { _ = try source.setControl(id: id, value: wanted) }
            }
            state.withLock {
                $0.applied = aim
                $0.failureSaid = false
            }
        } catch {
            // Said once until an aim works again: the next frame's aim tries again anyway.
            let first = state.withLock { state in
                defer { state.failureSaid = true }
                state.applied = nil
                return !state.failureSaid
            }
            if first {
                logger.warning("optics.failed", metadata: ["device.id": "\(source.device.deviceID)", "aim": "\(aim)", "error": "\(error)"])
            }
        }
    }
}
