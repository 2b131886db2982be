import FleetCore
import FleetProtocol
import Foundation

/// How a lens's recorded optics and a scan set-up are shown: lines for people, JSON
/// (snake_case keys) for programs.
public enum ScanSetupViews {
    public struct Optics: Encodable {
        var deviceId: String
        var fieldOfViewDegrees: Double?
        var minimumFocusDistanceMm: Double?
        var changedBy: String?
        var changedUnixMs: Int64?

        enum CodingKeys: String, CodingKey {
            case deviceId = "device_id", fieldOfViewDegrees = "field_of_view_degrees", minimumFocusDistanceMm = "minimum_focus_distance_mm",
                changedBy = "changed_by", changedUnixMs = "changed_unix_ms"
        }

        public init(device: String, _ wire: Capfleet_V1_DeviceOptics) {
            let optics = DeviceOptics(wire: wire)
            deviceId = device
            fieldOfViewDegrees = optics.fieldOfViewDegrees
            minimumFocusDistanceMm = optics.minimumFocusDistanceMillimetres
            changedBy = wire.changedBy.isEmpty ? nil : wire.changedBy
            changedUnixMs = wire.changedUnixMs > 0 ? wire.changedUnixMs : nil
        }
    }

    public struct Recommendation: Encodable {
        var deviceId: String
        var codeMm, fill: Double
        var fillFrom: String
        var fieldOfViewDegrees: Double
        var fieldOfViewFrom: String
        var minimumFocusDistanceMm: Double
        var minimumFocusDistanceFrom: String
        var distanceAtZoomOneMm, workingDistanceMm: Double
        var zoomFactor, neededZoomFactor, maxZoomFactor: Double
        var limitedByMaxZoom: Bool
        var achievedFill, codePixels: Double
        var readable: Bool
        var currentZoomFactor: Double
        var appliedZoomFactor: Double?

        enum CodingKeys: String, CodingKey {
            case deviceId = "device_id", codeMm = "code_mm", fill, fillFrom = "fill_from", fieldOfViewDegrees = "field_of_view_degrees",
                fieldOfViewFrom = "field_of_view_from", minimumFocusDistanceMm = "minimum_focus_distance_mm",
                minimumFocusDistanceFrom = "minimum_focus_distance_from", distanceAtZoomOneMm = "distance_at_zoom_one_mm",
                workingDistanceMm = "working_distance_mm", zoomFactor = "zoom_factor", neededZoomFactor = "needed_zoom_factor",
                maxZoomFactor = "max_zoom_factor", limitedByMaxZoom = "limited_by_max_zoom", achievedFill = "achieved_fill",
                codePixels = "code_pixels", readable, currentZoomFactor = "current_zoom_factor", appliedZoomFactor = "applied_zoom_factor"
        }

        public init(device: String, _ setup: ScanSetup, currentZoom: Double, applied: Double?) {
            deviceId = device
            codeMm = setup.codeMillimetres
            fill = setup.fill
            fillFrom = setup.fillSource.rawValue
            fieldOfViewDegrees = setup.fieldOfViewDegrees
            fieldOfViewFrom = setup.fieldOfViewSource.rawValue
            minimumFocusDistanceMm = setup.minimumFocusMillimetres
            minimumFocusDistanceFrom = setup.minimumFocusSource.rawValue
            distanceAtZoomOneMm = setup.distanceAtZoomOneMillimetres
            workingDistanceMm = setup.workingDistanceMillimetres
            zoomFactor = setup.zoomFactor
            neededZoomFactor = setup.neededZoomFactor
            maxZoomFactor = setup.maxZoomFactor
            limitedByMaxZoom = setup.isLimitedByMaxZoom
            achievedFill = setup.achievedFill
            codePixels = setup.codePixels
            readable = setup.isReadable
            currentZoomFactor = currentZoom
            appliedZoomFactor = applied
        }
    }

    /// e.g. "syn-1: zoom 2.33x for a 20 mm code held at 100 mm", then how it was worked out.
    public static func text(device: String, _ setup: ScanSetup, width: Int, currentZoom: Double, applied: Double?) -> String {
        func mm(_ value: Double) -> String { String(format: "%.0f mm", value) }
        var lines = [
            "\(device): zoom \(String(format: "%.2f", setup.zoomFactor))x for a \(VideoFormat.trim(setup.codeMillimetres)) mm code held at \(mm(setup.workingDistanceMillimetres))"
        ]
        lines.append(
            "  the code fills \(String(format: "%.2f", setup.achievedFill)) of the frame's width, \(String(format: "%.0f", setup.codePixels)) of \(width) px"
                + " (asked: \(String(format: "%.2f", setup.fill)), \(setup.fillSource.rawValue))")
        lines.append(
            "  field of view \(VideoFormat.trim(setup.fieldOfViewDegrees))° (\(setup.fieldOfViewSource.rawValue)); "
                + "focuses from \(mm(setup.minimumFocusMillimetres)) (\(setup.minimumFocusSource.rawValue))")
        if setup.neededZoomFactor > 1 {
            lines.append("  at zoom 1 the code fills that share only at \(mm(setup.distanceAtZoomOneMillimetres)), nearer than the lens focuses")
        } else {
            lines.append("  at zoom 1 the code fills that share at \(mm(setup.distanceAtZoomOneMillimetres)), where the lens focuses: no zoom needed")
        }
        if setup.isLimitedByMaxZoom {
            lines.append(
                "  the active format zooms to \(VideoFormat.trim(setup.maxZoomFactor))x at most; \(String(format: "%.2f", setup.neededZoomFactor))x was needed"
            )
        }
        if !setup.isReadable {
            lines.append(
                "  warning: \(String(format: "%.0f", setup.codePixels)) px across is under \(Int(ScanSetup.minimumReadablePixels)) (2 px a module of the smallest QR code): "
                    + "a larger format, a larger code or a nearer focusing lens would read it")
        }
        if let applied {
            lines.append("applied: zoom \(String(format: "%.2f", applied))x")
        } else {
            lines.append("zoom now \(String(format: "%.2f", currentZoom))x; --apply sets \(String(format: "%.2f", setup.zoomFactor))x")
        }
        return lines.joined(separator: "\n")
    }
}
