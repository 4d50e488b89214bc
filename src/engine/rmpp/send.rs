//! RMPP sender. SKELETON: the RMPP helper fills this in.
//!
//! Planned API (crate-private):
//! - `Sender::new(now, message: Vec<u8>, hdr_len, window_last: u32 /* 1, or the peer's
//!    DS-RMPP ACK window */, ack_timeout: Duration, retries: u32, cfg: &RmppConfig) -> Result<Sender>`
//! - `poll_transmit(&mut self, now, out: &mut [u8; 256]) -> bool` — next DATA segment due
//!   (or the ABORT to send), with every header filled (MAD header copied from the message).
//! - `handle_rmpp(&mut self, now, mad: &[u8]) -> Progress` — an ACK, STOP or ABORT for this session.
//! - `handle_timeout(&mut self, now) -> Progress`; `deadline(&self) -> Option<Instant>`.
