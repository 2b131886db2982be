import FleetSystem

#if canImport(Glibc)
    import Glibc
#endif

/// A resolved socket address, checked as local before anything connects to it.
public struct ResolvedAddress: Sendable {
    let storage: sockaddr_storage
    let length: socklen_t
    let family: Int32
    /// The address as text ("127.0.0.1", "fd00::5").
    public let text: String
}

/// Why a webhook connection step did not finish.
enum WebhookConnectionError: Error {
    case failed(SystemCallError)
    case deadlinePassed
}

/// One non-blocking TCP connection whose every step waits at most until a deadline: a
/// receiver that accepts and never answers cannot hold the alert thread past it.
struct WebhookConnection {
    private let descriptor: Int32
    private let target: String

    init(to address: ResolvedAddress, deadline: ContinuousClock.Instant) throws(WebhookConnectionError) {
        target = address.text
        do {
            descriptor = try systemCall("socket", on: address.text) {
                socket(address.family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            }
        } catch {
            throw .failed(error)
        }
        var storage = address.storage
        let started = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, address.length) }
        }
        if started != 0 {
            let code = errno
            do throws(WebhookConnectionError) {
                guard code == EINPROGRESS || code == EINTR else {
                    throw .failed(SystemCallError(call: "connect", target: target, errno: code))
                }
                try wait(for: Int16(POLLOUT), until: deadline)
                try checkConnected()
            } catch {
                Glibc.close(descriptor)
                throw error
            }
        }
    }

    /// The outcome of a connect that finished in the background.
    private func checkConnected() throws(WebhookConnectionError) {
        var pending: Int32 = 0
        var size = socklen_t(MemoryLayout<Int32>.size)
        do {
            try systemCall("getsockopt(SO_ERROR)", on: target) { getsockopt(descriptor, SOL_SOCKET, SO_ERROR, &pending, &size) }
        } catch {
            throw .failed(error)
        }
        if pending != 0 { throw .failed(SystemCallError(call: "connect", target: target, errno: pending)) }
    }

    func close() { Glibc.close(descriptor) }

    /// Sends all of `bytes`, waiting for room as the peer reads.
    func writeAll(_ bytes: [UInt8], deadline: ContinuousClock.Instant) throws(WebhookConnectionError) {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes.withUnsafeBytes { raw in
                send(descriptor, raw.baseAddress! + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
            }
            if sent >= 0 {
                offset += sent
                continue
            }
            let code = errno
            if code == EINTR { continue }
            guard code == EAGAIN || code == EWOULDBLOCK else {
                throw .failed(SystemCallError(call: "send", target: target, errno: code))
            }
            try wait(for: Int16(POLLOUT), until: deadline)
        }
    }

    /// Reads until the first line of the answer is complete, and returns it without its CRLF.
    func readStatusLine(deadline: ContinuousClock.Instant) throws(WebhookConnectionError) -> String {
        var received: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1024)
        while true {
            if let end = received.firstIndex(of: UInt8(ascii: "\n")) {
                let line = received[..<end].last == UInt8(ascii: "\r") ? received[..<(end - 1)] : received[..<end]
                return String(decoding: line, as: UTF8.self)
            }
            guard received.count < 8192 else { return String(decoding: received.prefix(200), as: UTF8.self) }
            let count = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                received += chunk[0..<count]
                continue
            }
            // Closed before a whole line: errno 0 reads as "closed before an answer".
            if count == 0 { throw .failed(SystemCallError(call: "recv", target: target, errno: 0)) }
            let code = errno
            if code == EINTR { continue }
            guard code == EAGAIN || code == EWOULDBLOCK else {
                throw .failed(SystemCallError(call: "recv", target: target, errno: code))
            }
            try wait(for: Int16(POLLIN), until: deadline)
        }
    }

    /// Waits until the socket is ready for `events` or the deadline passes.
    private func wait(for events: Int16, until deadline: ContinuousClock.Instant) throws(WebhookConnectionError) {
        while true {
            let left = deadline - ContinuousClock.now
            guard left > .zero else { throw .deadlinePassed }
            let milliseconds = Int32(clamping: left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000 + 1)
            var entry = pollfd(fd: descriptor, events: events, revents: 0)
            let ready = poll(&entry, 1, milliseconds)
            if ready > 0 { return }
            if ready == 0 { continue }
            let code = errno
            if code == EINTR { continue }
            throw .failed(SystemCallError(call: "poll", target: target, errno: code))
        }
    }
}
