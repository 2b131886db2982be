/// A GenICam camera's region of interest (commands.md, "Region of interest"): the window of
/// its sensor that it reads out. Its size is the active format's; where it sits is the
/// operator's choice, centred unless placed. Pure: the camera's geometry in, windows out.
public struct SensorRegion: Hashable, Sendable {
    /// The sensor's size in pixels (GenICam WidthMax and HeightMax, unbinned).
    public var sensorWidth: Int
    public var sensorHeight: Int
    /// The steps Width, Height, OffsetX and OffsetY move in (a camera refuses values between).
    public var widthStep: Int
    public var heightStep: Int
    public var leftStep: Int
    public var topStep: Int
    /// The smallest window it reads.
    public var minimumWidth: Int
    public var minimumHeight: Int

    public init(
        sensorWidth: Int, sensorHeight: Int, widthStep: Int = 1, heightStep: Int = 1, leftStep: Int = 1, topStep: Int = 1,
        minimumWidth: Int = 1, minimumHeight: Int = 1
    ) {
        self.sensorWidth = sensorWidth
        self.sensorHeight = sensorHeight
        self.widthStep = max(widthStep, 1)
        self.heightStep = max(heightStep, 1)
        self.leftStep = max(leftStep, 1)
        self.topStep = max(topStep, 1)
        self.minimumWidth = max(minimumWidth, 1)
        self.minimumHeight = max(minimumHeight, 1)
    }

    /// Where a window goes.
    public enum Placement: Hashable, Sendable {
        /// In the middle of the sensor (on the offset steps).
        case centred
        /// Its top-left corner at this pixel of the (binned) sensor.
        case at(left: Int, top: Int)
    }

    /// The common sizes offered as windows of a sensor larger than them, beside its full size:
    /// a 1080p, 720p and VGA read-out of the sensor's middle.
    public static let commonWindows: [(width: Int, height: Int)] = [(1920, 1080), (1280, 720), (640, 480)]

    /// The windows worth offering as formats: each common size strictly inside the sensor, on
    /// the camera's size steps, that is not already `offered`.
    public func windows(besides offered: [(width: Int, height: Int)]) -> [(width: Int, height: Int)] {
        Self.commonWindows.compactMap { size -> (width: Int, height: Int)? in
            let width = size.width / widthStep * widthStep, height = size.height / heightStep * heightStep
            guard width >= minimumWidth, height >= minimumHeight, width < sensorWidth || height < sensorHeight,
                width <= sensorWidth, height <= sensorHeight,
                !offered.contains(where: { $0.width == width && $0.height == height })
            else { return nil }
            return (width, height)
        }
    }

    /// Why a window cannot be placed.
    public struct Refusal: Error, Hashable, Sendable, CustomStringConvertible {
        public var description: String
    }

    /// The window of `width`×`height` (in pixels of a sensor binned by `binning`) placed as
    /// asked: a corner off the offset steps goes down to the step below; a window that would
    /// leave the sensor is refused, with the corners that fit.
    public func place(_ placement: Placement, width: Int, height: Int, binning: Int = 1) throws(Refusal) -> PixelRectangle {
        let bin = max(binning, 1)
        let (columns, rows) = (sensorWidth / bin, sensorHeight / bin)
        guard width <= columns, height <= rows, width > 0, height > 0 else {
            throw Refusal(description: "a \(width)x\(height) window does not fit its \(columns)x\(rows) sensor")
        }
        let (maxLeft, maxTop) = ((columns - width) / leftStep * leftStep, (rows - height) / topStep * topStep)
        switch placement {
        case .centred:
            return PixelRectangle(
                left: (columns - width) / 2 / leftStep * leftStep, top: (rows - height) / 2 / topStep * topStep, width: width, height: height)
        case let .at(left, top):
            guard left >= 0, top >= 0, left <= columns - width, top <= rows - height else {
                let range =
                    maxLeft == 0 && maxTop == 0
                    ? "it covers the whole sensor: nothing to move" : "its corner can go from 0,0 to \(maxLeft),\(maxTop)\(stepsText)"
                throw Refusal(
                    description: "a \(width)x\(height) window at \(left),\(top) leaves the \(columns)x\(rows) sensor; \(range)")
            }
            return PixelRectangle(left: left / leftStep * leftStep, top: top / topStep * topStep, width: width, height: height)
        }
    }

    /// The sensor as a rectangle, for a device's crop bounds.
    public var bounds: PixelRectangle { PixelRectangle(left: 0, top: 0, width: sensorWidth, height: sensorHeight) }

    private var stepsText: String {
        leftStep == 1 && topStep == 1 ? "" : " in steps of \(leftStep) across and \(topStep) down"
    }
}
