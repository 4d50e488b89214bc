//! Counters: what the engine did, and every reason it dropped something.

/// Engine counters, read with [`super::Engine::stats`]. All count since creation,
/// except the `*_depth` / `outstanding` gauges.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EngineStats {
    /// MADs handed to the transport by `poll_transmit` (retries and RMPP segments included).
    pub sent: u64,
    /// Datagrams given to `handle_datagram`.
    pub received: u64,
    /// `Event::Recv` events queued.
    pub delivered: u64,
    /// Request resends after a response timeout.
    pub retries: u64,
    /// Requests whose every attempt expired (`Event::SendTimedOut`).
    pub timeouts: u64,
    /// Responses matching no outstanding request (unknown TID, late, or to a send
    /// that expected none): dropped.
    pub unmatched_responses: u64,
    /// Dropped: bad base version, wrong QP for the class, short, or a bad directed route.
    pub dropped_invalid: u64,
    /// Dropped: requests no agent claims and the engine does not answer (not Get/Set).
    pub dropped_unclaimed: u64,
    /// Dropped: a request repeated while its first copy awaits the agent's response.
    pub dropped_duplicates: u64,
    /// Dropped: RMPP MADs for no known session (ACK/STOP/ABORT of an unknown
    /// transfer, a middle segment without its first, an unknown RMPP type).
    pub dropped_rmpp_unknown: u64,
    /// Dropped: DATA segments of a running reassembly beyond its advertised
    /// window, or copies of segments already held (the kernel drops them silently).
    pub dropped_rmpp_segments: u64,
    /// Dropped: first segments beyond `max_reassemblies_per_peer` or `max_reassemblies`.
    pub dropped_rmpp_limit: u64,
    /// GetResp(UNSUPPORTED_METHOD_ATTR) answers the engine sent for unclaimed Get/Set.
    pub auto_replies: u64,
    /// RMPP transfers ended by ABORT or STOP (sent or received); the last one is
    /// [`super::Engine::last_rmpp_abort`].
    pub rmpp_aborts: u64,
    /// RMPP messages reassembled.
    pub rmpp_reassembled: u64,
    /// Sends that had to wait in an agent's backlog.
    pub backlogged: u64,
    /// Sends waiting in backlogs now.
    pub backlog_depth: u64,
    /// Requests in flight now (queued, sent and awaiting a response).
    pub outstanding: u64,
    /// Events dropped because the event queue was full.
    pub queue_drops: u64,
    /// Request attempts the transport reported undelivered, ended early
    /// ([`super::Engine::handle_undelivered`]).
    pub undelivered: u64,
    /// Undelivered reports that matched no waiting request attempt.
    pub undelivered_ignored: u64,
}

/// An RMPP transfer that ended in ABORT or STOP, sent or received. The kernel reports
/// these to nobody; the engine counts them and keeps the last one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RmppAbort {
    /// The agent whose transfer it was.
    pub agent: super::AgentId,
    /// The transfer's TID.
    pub tid: u64,
    /// The RMPP status of the ABORT/STOP.
    pub status: crate::wire::rmpp::RmppStatus,
    /// True if this side was sending, false if receiving.
    pub sending: bool,
}
