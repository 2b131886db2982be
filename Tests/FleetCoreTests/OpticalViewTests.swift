import Foundation
import Testing

@testable import FleetCore

/// A camera's zoom, pan and tilt as a window of its whole view (detection.md, "Framing with the
/// camera's optics"): the synthetic camera draws through it, auto-framing aims with it.
struct OpticalViewTests {
    static let view = OpticalView(horizontalFieldOfViewDegrees: 78, aspect: 16.0 / 9.0, maximumZoom: 8)

    @Test func atOneX_theWindowIsTheWholeView_whereverItPoints() {
        #expect(Self.view.window(zoom: 1, pan: 0, tilt: 0) == .whole)
        #expect(Self.view.window(zoom: 1, pan: 100_000, tilt: -50_000) == .whole, "no room to move at 1x")
    }

    @Test func zoomedIn_panAndTiltMoveTheWindow_asAPinholeCameraTurns() {
        let centred = Self.view.window(zoom: 2, pan: 0, tilt: 0)
        #expect(abs(centred.x - 0.25) < 1e-12 && abs(centred.y - 0.25) < 1e-12 && abs(centred.width - 0.5) < 1e-12)
        // Ten degrees right: tan(10°) over tan(39°) of the half-width.
        let right = Self.view.window(zoom: 2, pan: 36_000, tilt: 0)
        let expected = 0.5 + tan(10 * Double.pi / 180) / (2 * tan(39 * Double.pi / 180))
        #expect(abs(right.x + right.width / 2 - expected) < 1e-9, "\(right)")
        // Tilt up moves the window up (smaller y).
        #expect(Self.view.window(zoom: 2, pan: 0, tilt: 18_000).y < centred.y)
        // Never out of the view.
        let far = Self.view.window(zoom: 2, pan: 200_000, tilt: -200_000)
        #expect(abs(far.x - 0.5) < 1e-12 && abs(far.y - 0.5) < 1e-12, "\(far)")
    }

    @Test func pointing_showsTheWindowAskedFor() {
        for window in [
            NormalizedRect(x: 0.1, y: 0.3, width: 0.5, height: 0.5), NormalizedRect(x: 0.62, y: 0.05, width: 0.3, height: 0.3),
            NormalizedRect(x: 0.875, y: 0.875, width: 0.125, height: 0.125),
        ] {
            let aimed = Self.view.pointing(showing: window)
            let shown = Self.view.window(zoom: aimed.zoom, pan: aimed.pan, tilt: aimed.tilt)
            // Whole arc-seconds: the centre lands within a few millionths of the view.
            #expect(
                abs(shown.x - window.x) < 1e-5 && abs(shown.y - window.y) < 1e-5 && abs(shown.width - window.width) < 1e-12,
                "\(window) → \(aimed) → \(shown)")
        }
        #expect(Self.view.pointing(showing: .whole) == .home)
    }

    @Test func theLimits_areWhereTheLargestZoomTouchesTheEdge() {
        let edge = Self.view.window(zoom: 8, pan: Self.view.panLimit, tilt: -Self.view.tiltLimit)
        #expect(abs(edge.x + edge.width - 1) < 1e-5 && abs(edge.y + edge.height - 1) < 1e-5, "\(edge)")
        let inside = Self.view.window(zoom: 8, pan: Self.view.panLimit - 3600, tilt: 0)
        #expect(inside.x + inside.width < 1 - 1e-3, "a degree less leaves room: \(inside)")
    }

    @Test func aFaceFoundInAWindow_isPlacedInTheWholeView() {
        let window = NormalizedRect(x: 0.25, y: 0.1, width: 0.5, height: 0.5)
        let placed = window.placing(NormalizedRect(x: 0.5, y: 0.5, width: 0.2, height: 0.4))
        #expect(placed == NormalizedRect(x: 0.5, y: 0.35, width: 0.1, height: 0.2))
    }

    @Test func framingSettings_keepTheirOpticsInTheIndex() {
        var settings = FramingSettings.standard
        #expect(FramingSettings(stored: settings.stored) == settings && !settings.stored.contains("optics"))
        settings.optics = true
        #expect(settings.stored.hasSuffix("/optics") && FramingSettings(stored: settings.stored) == settings)
        #expect(FramingSettings(stored: "0.5/0.5/0.6") == nil && FramingSettings(stored: "0.5/0.5/0.6/0.5/zoom") == nil)
    }
}
