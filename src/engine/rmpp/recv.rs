//! RMPP receiver. SKELETON: the RMPP helper fills this in.
//!
//! Planned API (crate-private):
//! - `Receiver::new(now, first: &[u8], cfg: &RmppConfig) -> (Receiver, Progress)` — from the
//!   first DATA segment (or answers ABORT BadSegment etc. through `poll_transmit`).
//! - `handle_data(&mut self, now, mad: &[u8]) -> Progress`; ACKs at window end and on LAST,
//!   re-ACK of duplicates, ABORT on bad segments/lengths.
//! - `poll_transmit(&mut self, now, out: &mut [u8; 256]) -> bool` — ACK / ABORT / STOP to send.
//! - `take_message(&mut self) -> Option<Vec<u8>>` — coalesced: first segment whole, then the
//!   data of each later segment, trimmed to PayloadLength.
//! - `handle_timeout`, `deadline`, `is_lingering`.
