import Foundation
import Synchronization

/// Frame-sized buffers for copies that come and go at the frame rate without a fixed count (a
/// camera's pre-roll: one copy kept per frame, the oldest let go per frame). A buffer let go
/// is kept for the next copy, up to `spares` of them, so a ring of N frames costs N buffers
/// and no allocation per frame; the rest go back to the system at once. Buffers are mapped
/// memory of their own, not the heap's: a heap keeps what a ring of multi-megabyte frames
/// lets go and grows past it (measured: an agent keeping 237 MiB of 1080p frames grew to
/// twice that and on, 3.5 MiB a second).
public final class RecyclingBufferPool: FrameBufferHome {
    public let bufferSize: Int
    public let spares: Int
    private let free = Mutex<[RawStorage]>([])
    private let mapped: Int

    public init(bufferSize: Int, spares: Int = 2) {
        self.bufferSize = max(bufferSize, 1)
        self.spares = spares
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        mapped = (self.bufferSize + page - 1) / page * page
    }

    deinit {
        // Buffers still lent out keep the pool alive (FrameBuffer holds it), so all are home.
        free.withLock { $0.forEach { munmap($0.pointer, mapped) } }
    }

    /// A buffer: a spare one if any, else a new mapping; nil when the system has no memory to map.
    public func take() -> FrameBuffer? {
        if let storage = free.withLock({ $0.popLast() }) { return FrameBuffer(storage: storage.pointer, capacity: bufferSize, pool: self) }
        let pointer = mmap(nil, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
        guard let pointer, pointer != MAP_FAILED else { return nil }
        return FrameBuffer(storage: pointer, capacity: bufferSize, pool: self)
    }

    /// Spare buffers kept now.
    public var available: Int { free.withLock { $0.count } }

    func giveBack(_ storage: UnsafeMutableRawPointer) {
        let kept = free.withLock { free in
            guard free.count < spares else { return false }
            free.append(RawStorage(pointer: storage))
            return true
        }
        if !kept { munmap(storage, mapped) }
    }
}
