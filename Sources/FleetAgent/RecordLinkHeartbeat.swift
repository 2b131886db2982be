/// ZMTP heartbeats on the agent's two links to the coordinator's recording endpoint (the
/// recording path and the recordings link), so a link that died quietly is noticed and made
/// again. Only the agent pings (the coordinator answers, and leaves dead links to TCP
/// keepalive): every ping and pong is an encrypted message its bulk I/O thread wakes for, and
/// a fleet of hundreds at 1 s both ways cost it some 1,600 of them a second.
enum RecordLinkHeartbeat {
    static let intervalMilliseconds = 2000
    static let timeoutMilliseconds = 6000
}
