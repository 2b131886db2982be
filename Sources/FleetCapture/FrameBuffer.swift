import FleetCore
import Foundation
import Synchronization

/// Where a lent buffer goes back to when its last reference is gone.
protocol FrameBufferHome: Sendable {
    func giveBack(_ storage: UnsafeMutableRawPointer)
}

/// A fixed pool of frame-sized buffers, like a driver's mmap ring: when all are in use
/// downstream the source has nowhere to capture and counts an out-of-buffers drop.
public final class FrameBufferPool: FrameBufferHome {
    public let bufferSize: Int
    public let capacity: Int
    private let free: Mutex<[RawStorage]>
    /// Counts free buffers, so a producer that prefers waiting to dropping can block.
    private let freeCount: DispatchSemaphore

    public init(bufferSize: Int, capacity: Int) {
        self.bufferSize = bufferSize
        self.capacity = capacity
        let buffers = (0..<capacity).map { _ in RawStorage(pointer: .allocate(byteCount: max(bufferSize, 1), alignment: 64)) }
        free = Mutex(buffers)
        freeCount = DispatchSemaphore(value: capacity)
    }

    deinit {
        // Buffers still lent out keep the pool alive (FrameBuffer holds it), so all are home.
        free.withLock { $0.forEach { $0.pointer.deallocate() } }
    }

    /// A free buffer, or nil when every buffer is still in use. Never blocks: a camera
    /// counts the miss as an out-of-buffers drop.
    public func take() -> FrameBuffer? {
        take(waitingUpTo: .now())
    }

    /// A free buffer, waiting until `deadline` for one to come back (benchmarks, tools).
    public func take(waitingUpTo deadline: DispatchTime) -> FrameBuffer? {
        guard freeCount.wait(timeout: deadline) == .success, let storage = free.withLock({ $0.popLast() }) else { return nil }
        return FrameBuffer(storage: storage.pointer, capacity: bufferSize, pool: self)
    }

    public var available: Int { free.withLock { $0.count } }

    func giveBack(_ storage: UnsafeMutableRawPointer) {
        free.withLock { $0.append(RawStorage(pointer: storage)) }
        freeCount.signal()
    }
}

/// A buffer's address, moved between threads only under the pool's lock.
struct RawStorage: @unchecked Sendable {
    let pointer: UnsafeMutableRawPointer
}

/// One buffer lent from a pool. The writer fills it before handing the frame on; after
/// that it is read-only, which is what makes sharing it across threads safe.
public final class FrameBuffer: @unchecked Sendable {
    public let storage: UnsafeMutableRawPointer
    public let capacity: Int
    private let pool: (any FrameBufferHome)?

    init(storage: UnsafeMutableRawPointer, capacity: Int, pool: (any FrameBufferHome)?) {
        self.storage = storage
        self.capacity = capacity
        self.pool = pool
    }

    /// A buffer outside any pool (black frames, tests); freed on release.
    public convenience init(unpooledCapacity: Int) {
        self.init(storage: .allocate(byteCount: max(unpooledCapacity, 1), alignment: 64), capacity: unpooledCapacity, pool: nil)
    }

    deinit {
        if let pool { pool.giveBack(storage) } else { storage.deallocate() }
    }

    public var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: storage, count: capacity) }
}

extension BlackFrame {
    /// A black frame in a buffer of its own, ready to send in place of real ones.
    public static func frame(pixelFormat: PixelFormat, width: Int, height: Int) -> (buffer: FrameBuffer, count: Int)? {
        guard width > 0, height > 0 else { return nil }
        if let count = pixelFormat.frameByteCount(width: width, height: height) {
            let buffer = FrameBuffer(unpooledCapacity: count)
            fill(UnsafeMutableRawBufferPointer(start: buffer.storage, count: count), pixelFormat: pixelFormat, width: width, height: height)
            return (buffer, count)
        }
        guard let bytes = payload(pixelFormat: pixelFormat, width: width, height: height) else { return nil }
        let buffer = FrameBuffer(unpooledCapacity: bytes.count)
        bytes.withUnsafeBytes { buffer.storage.copyMemory(from: $0.baseAddress!, byteCount: bytes.count) }
        return (buffer, bytes.count)
    }
}
