import CZeroMQ

/// What the fleet sets on its sockets, by name: the modules above FleetBus say what a socket
/// is for, and never see libzmq's option numbers.
public enum SocketOption: Sendable, Equatable {
    /// Messages queued for sending per peer before a send blocks or drops (ZMQ_SNDHWM).
    case sendQueue(messages: Int32)
    /// Messages queued on receipt per peer before the peer is pushed back (ZMQ_RCVHWM).
    case receiveQueue(messages: Int32)
    /// A larger inbound message closes its connection (ZMQ_MAXMSGSIZE).
    case maxMessageBytes(Int64)
    /// Messages queue only for connections that completed their handshake, never for a
    /// peer that is not there (ZMQ_IMMEDIATE).
    case onlyCompletedConnections
    /// How soon a lost connection is tried again, doubling up to the maximum
    /// (ZMQ_RECONNECT_IVL, ZMQ_RECONNECT_IVL_MAX).
    case reconnect(firstMilliseconds: Int32, maxMilliseconds: Int32)
    /// ZMTP heartbeats: a link that died quietly is noticed after `timeoutMilliseconds` and
    /// made again (ZMQ_HEARTBEAT_IVL, ZMQ_HEARTBEAT_TIMEOUT).
    case heartbeat(intervalMilliseconds: Int32, timeoutMilliseconds: Int32)
    /// TCP keepalive: a peer whose host vanished is reaped after idle + interval × probes
    /// seconds (ZMQ_TCP_KEEPALIVE and its _IDLE, _INTVL, _CNT).
    case tcpKeepalive(idleSeconds: Int32, intervalSeconds: Int32, probes: Int32)
}

extension ZMQSocket {
    /// Sets the options in order; the first one libzmq refuses is thrown, naming it.
    public func set(_ options: [SocketOption]) throws(ZMQError) {
        for option in options {
            switch option {
            case let .sendQueue(messages):
                try setOption(ZMQ_SNDHWM, messages)
            case let .receiveQueue(messages):
                try setOption(ZMQ_RCVHWM, messages)
            case let .maxMessageBytes(bytes):
                try setOption(ZMQ_MAXMSGSIZE, bytes)
            case .onlyCompletedConnections:
                try setOption(ZMQ_IMMEDIATE, Int32(1))
            case let .reconnect(first, max):
                try setOption(ZMQ_RECONNECT_IVL, first)
                try setOption(ZMQ_RECONNECT_IVL_MAX, max)
            case let .heartbeat(interval, timeout):
                try setOption(ZMQ_HEARTBEAT_IVL, interval)
                try setOption(ZMQ_HEARTBEAT_TIMEOUT, timeout)
            case let .tcpKeepalive(idle, interval, probes):
                try setOption(ZMQ_TCP_KEEPALIVE, Int32(1))
                try setOption(ZMQ_TCP_KEEPALIVE_IDLE, idle)
                try setOption(ZMQ_TCP_KEEPALIVE_INTVL, interval)
                try setOption(ZMQ_TCP_KEEPALIVE_CNT, probes)
            }
        }
    }
}

/// Set-ups shared by more than one socket, written once.
public enum SocketSetup {
    /// An agent's DEALER on the coordinator's record endpoint (the recording path, and the
    /// link for takes kept on the agent): what cannot leave waits in the agent's spool or
    /// manifests, not in libzmq. ZMTP heartbeats notice a link that died quietly and make it
    /// again; only the agent pings (the coordinator answers, and leaves dead links to TCP
    /// keepalive): every ping and pong is an encrypted message its bulk I/O thread wakes
    /// for, and a fleet of hundreds at 1 s both ways cost it some 1,600 of them a second.
    public static let agentRecordLink: [SocketOption] = [
        .sendQueue(messages: 1000),
        .onlyCompletedConnections,
        .heartbeat(intervalMilliseconds: 2000, timeoutMilliseconds: 6000),
    ]

    /// The coordinator's ROUTER for those links: credit bounds what each agent sends, the
    /// queues bound what waits in libzmq besides, and a link that died with its host is
    /// reaped by TCP keepalive (pinging hundreds of agents' links from here as well doubled
    /// the encrypted traffic on the bulk I/O thread, every second, for nothing).
    public static func coordinatorRecordEndpoint(maxMessageBytes: Int64) -> [SocketOption] {
        [
            .maxMessageBytes(maxMessageBytes),
            .receiveQueue(messages: 64),
            .sendQueue(messages: 10_000),
            .tcpKeepalive(idleSeconds: 15, intervalSeconds: 5, probes: 3),
        ]
    }
}
