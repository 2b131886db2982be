/// Gives each face found in a camera's frames an id that stays with it from frame to frame
/// while it is tracked: a box overlapping a known face's last box enough (intersection over
/// union) is that face; the best overlaps are matched first. A face unseen for more than
/// `patience` examined frames is forgotten, and a face found again later gets a new id.
public struct FaceTracker: Sendable {
    public struct Face: Hashable, Sendable {
        public let id: UInt64
        public let box: NormalizedRect
    }

    private struct Track {
        let id: UInt64
        var box: NormalizedRect
        var missed: Int
    }

    public let patience: Int
    public let minimumOverlap: Double
    private var tracks: [Track] = []
    private var nextID: UInt64 = 1

    public init(patience: Int = 5, minimumOverlap: Double = 0.3) {
        self.patience = patience
        self.minimumOverlap = minimumOverlap
    }

    /// The faces of one examined frame, in the order given, each with its id.
    public mutating func update(_ boxes: [NormalizedRect]) -> [Face] {
        var pairs: [(overlap: Double, track: Int, box: Int)] = []
        for (t, track) in tracks.enumerated() {
            for (b, box) in boxes.enumerated() {
                let overlap = track.box.overlap(with: box)
                if overlap >= minimumOverlap { pairs.append((overlap, t, b)) }
            }
        }
        pairs.sort { $0.overlap > $1.overlap }
        var trackFor = [Int?](repeating: nil, count: boxes.count)
        var matched = Set<Int>()
        for pair in pairs where trackFor[pair.box] == nil && !matched.contains(pair.track) {
            trackFor[pair.box] = pair.track
            matched.insert(pair.track)
        }
        var faces: [Face] = []
        for (index, box) in boxes.enumerated() {
            if let t = trackFor[index] {
                tracks[t].box = box
                tracks[t].missed = 0
                faces.append(Face(id: tracks[t].id, box: box))
            } else {
                tracks.append(Track(id: nextID, box: box, missed: 0))
                matched.insert(tracks.count - 1)
                faces.append(Face(id: nextID, box: box))
                nextID += 1
            }
        }
        for index in tracks.indices where !matched.contains(index) { tracks[index].missed += 1 }
        tracks.removeAll { $0.missed > patience }
        return faces
    }

    /// Forgets every face (the detection settings changed, or the format did).
    public mutating func reset() { tracks.removeAll() }
}
