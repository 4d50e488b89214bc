//! How a verbs transport is opened, and what it counts.

use std::time::Duration;

use super::AsyncEventCounts;
use crate::types::GSI_QKEY;

/// How to open a verbs transport. Build with struct update syntax:
/// `VerbsConfig { device: Some("rxe0".into()), ..Default::default() }`.
#[derive(Debug, Clone)]
pub struct VerbsConfig {
    /// Device name (`mlx5_0`, `rxe0`); `None`: the first device.
    pub device: Option<String>,
    /// Port number; `None`: the first active port (else port 1).
    pub port: Option<u8>,
    /// Source GID index; `None`: on Ethernet the first RoCE v2 IPv6 GID that
    /// is neither link-local nor IPv4-mapped (falling back to IPv4-mapped,
    /// then any), on InfiniBand index 0.
    pub gid_index: Option<u16>,
    /// P_Key index of the QP (one UD QP serves one P_Key: sends addressed
    /// with another index are dropped, see the module docs).
    pub pkey_index: u16,
    /// The QP's Q_Key, also used as the remote Q_Key of every send.
    pub qkey: u32,
    /// Receive slots (each with a posted receive).
    pub recv_slots: usize,
    /// Send slots (at most this many sends in flight).
    pub send_slots: usize,
    /// Back the rings with huge pages when the system has some reserved.
    pub huge_pages: bool,
    /// Sleep on the completion channel in [`Transport::wait`](crate::transport::Transport::wait) at once, without
    /// busy polling for [`VerbsConfig::idle_spin`] first.
    pub completion_channel: bool,
    /// Give the port a ready descriptor ([`Transport::ready_fd`](crate::transport::Transport::ready_fd)),
    /// so that a caller waiting for a MAD polls the CQ itself and no port thread hands
    /// MADs over (see `ready.rs` for the rules it keeps). Default: on, unless the
    /// environment has `VMAD_VERBS_CALLER_DRIVEN=0` (then the port thread polls the CQ
    /// and parks in [`Transport::wait`](crate::transport::Transport::wait), as before).
    pub caller_driven: bool,
    /// How long an idle [`Transport::wait`](crate::transport::Transport::wait) busy-polls the CQ before it sleeps
    /// on the completion channel (a reply within this time is seen without a
    /// wake-up; an idle port then costs no CPU).
    pub idle_spin: Duration,
    /// Most completions taken from a CQ per poll.
    pub poll_batch: usize,
    /// Consumed receive slots are reposted once this many have gathered.
    pub repost_batch: usize,
    /// Most sends posted with one doorbell (the queue is also posted
    /// whenever the engine has nothing more to send).
    pub send_batch: usize,
    /// Hop limit of the GRH on sends whose destination gives none.
    pub hop_limit: u8,
    /// Most cached address handles (at least 1); beyond, the least recently used goes.
    pub max_address_handles: usize,
}

impl Default for VerbsConfig {
    fn default() -> Self {
        VerbsConfig {
            device: None,
            port: None,
            gid_index: None,
            pkey_index: 0,
            qkey: GSI_QKEY,
            recv_slots: 512,
            send_slots: 128,
            huge_pages: false,
            completion_channel: false,
            caller_driven: caller_driven_default(),
            idle_spin: Duration::from_millis(1),
            poll_batch: 32,
            repost_batch: 16,
            send_batch: 32,
            hop_limit: 64,
            max_address_handles: 4096,
        }
    }
}

/// [`VerbsConfig::caller_driven`]'s default: on unless `VMAD_VERBS_CALLER_DRIVEN=0`.
fn caller_driven_default() -> bool {
    std::env::var_os("VMAD_VERBS_CALLER_DRIVEN").is_none_or(|v| v != "0")
}

/// Counters of the verbs data path.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VerbsStats {
    /// MADs handed up.
    pub received: u64,
    /// Sends posted.
    pub sent: u64,
    /// Receive completions with an error status.
    pub recv_errors: u64,
    /// Send completions with an error status.
    pub send_errors: u64,
    /// Address handles created.
    pub ah_created: u64,
    /// Receives shorter than a MAD header (dropped).
    pub runts: u64,
    /// Times every receive slot was consumed with none posted: datagrams
    /// arriving then were dropped by the device (grow `recv_slots`).
    pub recv_ring_empty: u64,
    /// Receives flushed because the QP was in the error state.
    pub recv_flushed: u64,
    /// Address handles evicted from the cache (least recently used).
    pub ah_evicted: u64,
    /// Sends dropped because this transport cannot address them: another
    /// P_Key index than the QP's, or no GID where a GRH is needed.
    pub unroutable: u64,
    /// Send completions of posts from before a QP recovery, ignored: the
    /// recovery freed their slots already.
    pub send_stale: u64,
    /// Waits that slept while a send waited for a free slot and ended only at the
    /// liveness check (a second): no send completion woke them, as one should.
    pub starved_timeouts: u64,
    /// Times the QP was found in the error state and reset to RTS.
    pub qp_recoveries: u64,
    /// Times the port's attributes were re-read after an event.
    pub port_refreshes: u64,
    /// Async events, by kind.
    pub events: AsyncEventCounts,
}
