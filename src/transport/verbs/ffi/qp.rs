//! The UD queue pair: state changes and chained posts.

use std::io;
use std::os::raw::c_int;
use std::ptr::{self, NonNull};
use std::sync::Arc;

use ibverbs_sys as sys;

use super::{last_error, rc_error, Ah, Cq, Pd};

/// A UD queue pair.
pub(in crate::transport::verbs) struct Qp {
    raw: NonNull<sys::ibv_qp>,
    /// Scratch for chained receive posts (reused: no allocation per batch).
    sges: Vec<sys::ibv_sge>,
    recv_wrs: Vec<sys::ibv_recv_wr>,
    send_sges: Vec<sys::ibv_sge>,
    send_wrs: Vec<sys::ibv_send_wr>,
    _send_cq: Arc<Cq>,
    _recv_cq: Arc<Cq>,
    _pd: Arc<Pd>,
}

// SAFETY: libibverbs keeps no per-thread state for a QP, so it may be used from
// whichever thread owns the Qp: posts and state changes are verbs, thread-safe by
// default (ibv_alloc_td(3)). The scratch vectors are reached only through `&mut self`.
// (Not Sync: the posts fill the scratch through `&mut self`, and nothing shares a Qp.)
unsafe impl Send for Qp {}

/// A send to post: slot address and length, and where it goes.
pub(in crate::transport::verbs) struct UdSend<'a> {
    pub(in crate::transport::verbs) wr_id: u64,
    pub(in crate::transport::verbs) addr: u64,
    pub(in crate::transport::verbs) len: u32,
    pub(in crate::transport::verbs) lkey: u32,
    pub(in crate::transport::verbs) ah: &'a Ah,
    pub(in crate::transport::verbs) remote_qpn: u32,
    pub(in crate::transport::verbs) remote_qkey: u32,
}

impl Qp {
    /// A UD QP with both queues as given.
    pub(in crate::transport::verbs) fn new_ud(
        pd: &Arc<Pd>,
        send_cq: &Arc<Cq>,
        recv_cq: &Arc<Cq>,
        send_wr: usize,
        recv_wr: usize,
    ) -> io::Result<Qp> {
        let mut init = sys::ibv_qp_init_attr {
            send_cq: send_cq.as_ptr(),
            recv_cq: recv_cq.as_ptr(),
            qp_type: sys::ibv_qp_type::IBV_QPT_UD,
            sq_sig_all: 0,
            ..Default::default()
        };
        init.cap.max_send_wr = u32::try_from(send_wr).unwrap_or(u32::MAX);
        init.cap.max_recv_wr = u32::try_from(recv_wr).unwrap_or(u32::MAX);
        init.cap.max_send_sge = 1;
        init.cap.max_recv_sge = 1;
        // SAFETY: PD and CQs are alive and belong to the same context.
        let raw = unsafe { sys::ibv_create_qp(pd.as_ptr(), &mut init) };
        let raw = NonNull::new(raw).ok_or_else(|| last_error(12))?;
        Ok(Qp {
            raw,
            sges: Vec::with_capacity(recv_wr),
            recv_wrs: Vec::with_capacity(recv_wr),
            send_sges: Vec::with_capacity(send_wr),
            send_wrs: Vec::with_capacity(send_wr),
            _send_cq: send_cq.clone(),
            _recv_cq: recv_cq.clone(),
            _pd: pd.clone(),
        })
    }

    pub(in crate::transport::verbs) fn qp_num(&self) -> u32 {
        // SAFETY: the QP is alive; `qp_num` is a plain field.
        unsafe { (*self.raw.as_ptr()).qp_num }
    }

    fn modify(&self, attr: &mut sys::ibv_qp_attr, mask: u32) -> io::Result<()> {
        // SAFETY: the QP is alive; `attr` is initialised for the bits in `mask`.
        let rc = unsafe {
            sys::ibv_modify_qp(self.raw.as_ptr(), attr, c_int::try_from(mask).unwrap_or(0))
        };
        if rc != 0 {
            return Err(rc_error(rc));
        }
        Ok(())
    }

    /// RESET -> INIT (P_Key index, port, Q_Key); the step that needs
    /// CAP_NET_RAW for a controlled Q_Key.
    pub(in crate::transport::verbs) fn to_init(
        &self,
        port: u8,
        pkey_index: u16,
        qkey: u32,
    ) -> io::Result<()> {
        use sys::ibv_qp_attr_mask as m;
        let mut a = sys::ibv_qp_attr {
            qp_state: sys::ibv_qp_state::IBV_QPS_INIT,
            pkey_index,
            port_num: port,
            qkey,
            ..Default::default()
        };
        self.modify(
            &mut a,
            m::IBV_QP_STATE.0 | m::IBV_QP_PKEY_INDEX.0 | m::IBV_QP_PORT.0 | m::IBV_QP_QKEY.0,
        )
    }

    /// INIT -> RTR -> RTS.
    pub(in crate::transport::verbs) fn to_rts(&self) -> io::Result<()> {
        use sys::ibv_qp_attr_mask as m;
        let mut a = sys::ibv_qp_attr {
            qp_state: sys::ibv_qp_state::IBV_QPS_RTR,
            ..Default::default()
        };
        self.modify(&mut a, m::IBV_QP_STATE.0)?;
        let mut a = sys::ibv_qp_attr {
            qp_state: sys::ibv_qp_state::IBV_QPS_RTS,
            sq_psn: 0,
            ..Default::default()
        };
        self.modify(&mut a, m::IBV_QP_STATE.0 | m::IBV_QP_SQ_PSN.0)
    }

    /// The QP's current state (`IBV_QPS_*`).
    pub(in crate::transport::verbs) fn state(&self) -> io::Result<sys::ibv_qp_state::Type> {
        let mut a = sys::ibv_qp_attr::default();
        let mut init = sys::ibv_qp_init_attr::default();
        let mask = sys::ibv_qp_attr_mask::IBV_QP_STATE.0;
        // SAFETY: the QP is alive; both out-structs are valid.
        let rc = unsafe {
            sys::ibv_query_qp(
                self.raw.as_ptr(),
                &mut a,
                c_int::try_from(mask).unwrap_or(0),
                &mut init,
            )
        };
        if rc != 0 {
            return Err(rc_error(rc));
        }
        Ok(a.qp_state)
    }

    /// Move the QP to `state` alone (RESET to start over, ERR to test recovery).
    pub(in crate::transport::verbs) fn to_state(
        &self,
        state: sys::ibv_qp_state::Type,
    ) -> io::Result<()> {
        let mut a = sys::ibv_qp_attr {
            qp_state: state,
            ..Default::default()
        };
        self.modify(&mut a, sys::ibv_qp_attr_mask::IBV_QP_STATE.0)
    }

    /// Post a chain of receives, one SGE each: `(wr_id, addr, len)` per slot.
    pub(in crate::transport::verbs) fn post_recvs(
        &mut self,
        lkey: u32,
        slots: &[(u64, u64, u32)],
    ) -> io::Result<()> {
        if slots.is_empty() {
            return Ok(());
        }
        self.sges.clear();
        self.recv_wrs.clear();
        self.sges
            .extend(
                slots
                    .iter()
                    .map(|&(_, addr, length)| sys::ibv_sge { addr, length, lkey }),
            );
        // The chain points into `sges` and into itself: both are complete
        // (no more reallocation) before any pointer is taken.
        for (i, &(wr_id, _, _)) in slots.iter().enumerate() {
            self.recv_wrs.push(sys::ibv_recv_wr {
                wr_id,
                next: ptr::null_mut(),
                sg_list: ptr::addr_of_mut!(self.sges[i]),
                num_sge: 1,
            });
        }
        for i in 1..self.recv_wrs.len() {
            let next = ptr::addr_of_mut!(self.recv_wrs[i]);
            self.recv_wrs[i - 1].next = next;
        }
        let qp = self.raw.as_ptr();
        let mut bad: *mut sys::ibv_recv_wr = ptr::null_mut();
        // SAFETY: the QP and its context are alive; the chain and its SGEs
        // live until the call returns (the provider copies them); the slots
        // they name are inside the registered MR.
        let rc = unsafe {
            let post = (*(*qp).context)
                .ops
                .post_recv
                .ok_or(io::ErrorKind::Unsupported)?;
            post(qp, self.recv_wrs.as_mut_ptr(), &mut bad)
        };
        if rc != 0 {
            return Err(rc_error(rc));
        }
        Ok(())
    }

    /// Post a chain of signalled UD sends with one doorbell. On failure,
    /// returns how many of them were posted (the provider stops at the first
    /// bad one) with the error.
    pub(in crate::transport::verbs) fn post_sends(
        &mut self,
        sends: &[UdSend<'_>],
    ) -> Result<(), (usize, io::Error)> {
        if sends.is_empty() {
            return Ok(());
        }
        self.send_sges.clear();
        self.send_wrs.clear();
        self.send_sges.extend(sends.iter().map(|s| sys::ibv_sge {
            addr: s.addr,
            length: s.len,
            lkey: s.lkey,
        }));
        for (i, s) in sends.iter().enumerate() {
            let mut wr = sys::ibv_send_wr {
                wr_id: s.wr_id,
                next: ptr::null_mut(),
                sg_list: ptr::addr_of_mut!(self.send_sges[i]),
                num_sge: 1,
                opcode: sys::ibv_wr_opcode::IBV_WR_SEND,
                send_flags: sys::ibv_send_flags::IBV_SEND_SIGNALED.0,
                ..Default::default()
            };
            // The bindgen name of the UD member is unstable across versions:
            // it is named in this one place only.
            wr.wr.ud = sys::ibv_send_wr__bindgen_ty_2__bindgen_ty_3 {
                ah: s.ah.as_ptr(),
                remote_qpn: s.remote_qpn,
                remote_qkey: s.remote_qkey,
            };
            self.send_wrs.push(wr);
        }
        // Linked only now: `send_wrs` no longer reallocates.
        for i in 1..self.send_wrs.len() {
            let next = ptr::addr_of_mut!(self.send_wrs[i]);
            self.send_wrs[i - 1].next = next;
        }
        let qp = self.raw.as_ptr();
        let first = self.send_wrs.as_mut_ptr();
        let mut bad: *mut sys::ibv_send_wr = ptr::null_mut();
        // SAFETY: QP, context and AHs are alive; the chain and its SGEs live
        // until the call returns (the provider copies them); the slots are
        // inside the registered MR.
        let rc = unsafe {
            let Some(post) = (*(*qp).context).ops.post_send else {
                return Err((0, io::ErrorKind::Unsupported.into()));
            };
            post(qp, first, &mut bad)
        };
        if rc != 0 {
            let posted = if bad.is_null() {
                0
            } else {
                // SAFETY: `bad` points into the chain, which starts at `first`.
                usize::try_from(unsafe { bad.offset_from(first) }).unwrap_or(0)
            };
            return Err((posted, rc_error(rc)));
        }
        Ok(())
    }
}

impl Drop for Qp {
    fn drop(&mut self) {
        // SAFETY: the QP exists; its CQs and PD outlive it (held by Arc).
        unsafe { sys::ibv_destroy_qp(self.raw.as_ptr()) };
    }
}
