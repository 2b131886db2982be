/// Every camera's latest preview on one picture, in a grid of equal tiles, each labelled
/// with the camera, its node and how it is doing. The layout is a value of its own so that
/// a caller (and a test) knows where each tile is without looking at the pixels.
public struct ContactSheet: Sendable {
    /// One camera: its picture (nil: no preview yet, or previews off) and label lines.
    public struct Tile: Sendable {
        public var title: String
        public var lines: [String]
        /// Colour of the last line: says at a glance whether the camera is well.
        public var statusColour: RGB
        public var picture: RGBImage?

        public init(title: String, lines: [String], statusColour: RGB = .white, picture: RGBImage?) {
            self.title = title
            self.lines = lines
            self.statusColour = statusColour
            self.picture = picture
        }
    }

    public struct Layout: Sendable, Equatable {
        public let columns: Int
        public let rows: Int
        /// The picture area of a tile; pictures of another aspect are letterboxed in it.
        public let pictureWidth: Int
        public let pictureHeight: Int
        /// The label below each picture.
        public let labelHeight: Int
        public let gap: Int

        public var tileWidth: Int { pictureWidth }
        public var tileHeight: Int { pictureHeight + labelHeight }
        public var width: Int { gap + columns * (tileWidth + gap) }
        public var height: Int { gap + rows * (tileHeight + gap) }

        /// The top left corner of tile `index` (row by row, left to right).
        public func origin(ofTile index: Int) -> (x: Int, y: Int) {
            (gap + (index % columns) * (tileWidth + gap), gap + (index / columns) * (tileHeight + gap))
        }
    }

    public static let titleScale = 2
    public static let background = RGB(24, 24, 24)
    public static let emptyPicture = RGB(48, 48, 48)

    public let tiles: [Tile]
    public let layout: Layout

    /// Tiles of `pictureWidth` x `pictureHeight` (4:3 for 320-pixel previews), in as many
    /// columns as the square root of their number, at most `maximumColumns` (and `columns` if given).
    public init(tiles: [Tile], pictureWidth: Int = 320, pictureHeight: Int = 240, columns: Int? = nil, maximumColumns: Int = 8) {
        self.tiles = tiles
        let count = max(1, tiles.count)
        var square = 1
        while square * square < count { square += 1 }
        let columns = max(1, min(count, columns ?? min(square, maximumColumns)))
        let lines = tiles.map(\.lines.count).max() ?? 0
        let labelHeight = 6 + BitmapFont.lineHeight * Self.titleScale + lines * BitmapFont.lineHeight + 4
        layout = Layout(
            columns: columns, rows: (count + columns - 1) / columns, pictureWidth: pictureWidth, pictureHeight: pictureHeight,
            labelHeight: labelHeight, gap: 8)
    }

    public func render() -> RGBImage {
        var sheet = RGBImage(width: layout.width, height: layout.height, filledWith: Self.background)
        for (index, tile) in tiles.enumerated() {
            let (x, y) = layout.origin(ofTile: index)
            sheet.fill(x: x, y: y, width: layout.pictureWidth, height: layout.pictureHeight, with: Self.emptyPicture)
            if let picture = tile.picture {
                // Fit inside the picture area, keeping the aspect, centred.
                let scale = min(Double(layout.pictureWidth) / Double(picture.width), Double(layout.pictureHeight) / Double(picture.height))
                let width = max(1, min(layout.pictureWidth, Int((Double(picture.width) * scale).rounded())))
                let height = max(1, min(layout.pictureHeight, Int((Double(picture.height) * scale).rounded())))
                sheet.fill(x: x, y: y, width: layout.pictureWidth, height: layout.pictureHeight, with: .black)
                sheet.draw(
                    FrameConversion.resized(picture, width: width, height: height),
                    x: x + (layout.pictureWidth - width) / 2, y: y + (layout.pictureHeight - height) / 2)
            } else {
                let note = "no preview"
                BitmapFont.draw(
                    note, into: &sheet, x: x + (layout.pictureWidth - BitmapFont.width(of: note, scale: 2)) / 2,
                    y: y + layout.pictureHeight / 2 - BitmapFont.glyphHeight, scale: 2, colour: RGB(160, 160, 160))
            }
            var line = y + layout.pictureHeight + 6
            BitmapFont.draw(
                BitmapFont.fitting(tile.title, in: layout.tileWidth, scale: Self.titleScale), into: &sheet,
                x: x, y: line, scale: Self.titleScale)
            line += BitmapFont.lineHeight * Self.titleScale
            for (number, text) in tile.lines.enumerated() {
                let colour = number == tile.lines.count - 1 ? tile.statusColour : RGB(200, 200, 200)
                BitmapFont.draw(BitmapFont.fitting(text, in: layout.tileWidth), into: &sheet, x: x, y: line, colour: colour)
                line += BitmapFont.lineHeight
            }
        }
        return sheet
    }
}
