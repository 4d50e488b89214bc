//! Engine tests, all in virtual time (see [`harness`]). One file per concern;
//! test names say the behaviour they check.

pub(crate) mod harness;

mod agents;
mod dispatch;
mod limits;
mod requests;
mod rmpp_answer_abort;
mod rmpp_grid;
mod rmpp_integration;
mod rmpp_request_abort;
mod rmpp_sessions;
mod rmpp_unfilled;
mod timers;
#[cfg(feature = "tracing")]
mod trace;
