//! The directed-route rules of IBA 14.2.2: how an SMI steps the hop pointer
//! of a directed-route SMP and fills in its return path, on the way out
//! (C14-9) and on the way back (C14-13).
//!
//! An SMI applies [`Packet::smi_recv`] to an SMP that arrives over a link and
//! [`Packet::smi_send`] to one it is about to send (its own, or one it
//! forwards); [`Packet::smi_next`] says, between the two, whether the SMP has
//! reached its node or goes on. After a send step [`Packet::out_port`] is the
//! port the SMP leaves by. The steps are the kernel's
//! (`smi_handle_dr_smp_send`, `smi_handle_dr_smp_recv`,
//! `smi_check_forward_dr_smp`); an SMI that does not know which physical
//! port it stands for passes no port and skips the port checks.

use super::{Direction, Packet, MAX_HOPS, PERMISSIVE_LID};

/// The SMI applying the rules: a switch's or a channel adapter's, and the port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Smi {
    /// A switch forwards SMPs; an end node only sends and receives them.
    pub switch: bool,
    /// The port the SMP is sent from (send step) or arrived on (receive step).
    /// `None`: unknown; the path entries are neither checked nor written.
    pub port: Option<u8>,
}

impl Smi {
    /// An end node's SMI that does not know its physical port (the engine's).
    pub const END_NODE: Smi = Smi {
        switch: false,
        port: None,
    };
}

/// What one SMI step says to do with the SMP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// Go on: send it, or hand it to the node's SMA or SM.
    Handle,
    /// Drop it.
    Discard,
}

impl Verdict {
    fn check(ok: bool) -> Verdict {
        if ok {
            Verdict::Handle
        } else {
            Verdict::Discard
        }
    }
}

/// Where a received SMP goes, after a receive step that let it through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Next {
    /// An intermediate hop: a switch steps it on ([`Packet::smi_send`]) and
    /// sends it out of [`Packet::out_port`].
    Forward,
    /// The end of the directed-route part: after a send step it is this node's
    /// if [`Packet::segment_end_lid`] is permissive, and LID-routed to that LID otherwise.
    SegmentEnd,
    /// It has arrived: hand it to the node's SMA (a request) or SM (a response).
    Here,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// The D bit is set: a response, travelling back along the return path.
    pub fn is_returning(&self) -> bool {
        self.direction() == Direction::Inbound
    }
    /// InitialPath entry `hop` (0 is unused; hops are 1..=hop count; `hop`
    /// is taken modulo 64, so no value panics).
    pub fn initial_port(&self, hop: u8) -> u8 {
        self.initial_path()[usize::from(hop & MAX_HOPS)]
    }
    /// ReturnPath entry `hop` (modulo 64).
    pub fn return_port(&self, hop: u8) -> u8 {
        self.return_path()[usize::from(hop & MAX_HOPS)]
    }
    /// The path entry at the hop pointer: after a send step, the port the SMP
    /// leaves by (InitialPath going out, ReturnPath coming back).
    pub fn out_port(&self) -> u8 {
        let at = self.hop_pointer();
        if self.is_returning() {
            self.return_port(at)
        } else {
            self.initial_port(at)
        }
    }
    /// The LID the SMP is LID-routed to past the directed-route part:
    /// DrDLID going out, DrSLID coming back.
    pub fn segment_end_lid(&self) -> u16 {
        if self.is_returning() {
            self.dr_slid()
        } else {
            self.dr_dlid()
        }
    }
    /// After [`Packet::smi_recv`] let the SMP through: whether it goes on
    /// (kernel `smi_check_forward_dr_smp`).
    pub fn smi_next(&self) -> Next {
        let (ptr, cnt) = (self.hop_pointer(), self.hop_count());
        if !self.is_returning() {
            if ptr != 0 && ptr < cnt {
                Next::Forward
            } else if ptr == cnt {
                Next::SegmentEnd
            } else {
                Next::Here
            }
        } else if 2 <= ptr && ptr <= cnt {
            Next::Forward
        } else if ptr == 1 {
            Next::SegmentEnd
        } else {
            Next::Here
        }
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Set ReturnPath entry `hop` (modulo 64).
    pub fn set_return_port(&mut self, hop: u8, port: u8) {
        self.return_path_mut()[usize::from(hop & MAX_HOPS)] = port;
    }

    /// The send-side step (IBA 14.2.2.2 C14-9 going out, 14.2.2.4 C14-13
    /// coming back): steps the hop pointer to the entry of the port the SMP
    /// leaves by, and checks that port against `smi.port`.
    // Always inlined: for a constant `smi` (the engine's end node) most of the
    // rules fold away.
    #[inline(always)]
    pub fn smi_send(&mut self, smi: Smi) -> Verdict {
        let (ptr, cnt) = (self.hop_pointer(), self.hop_count());
        // C14-6: hop counts are 0..=63.
        if cnt > MAX_HOPS {
            return Verdict::Discard;
        }
        let leaves_by = |port: u8| smi.port.is_none_or(|want| port == want);
        if !self.is_returning() {
            if cnt != 0 && ptr == 0 {
                // C14-9:1: the first hop.
                self.set_hop_pointer(1);
                return Verdict::check(leaves_by(self.initial_port(1)));
            }
            if ptr != 0 && ptr < cnt {
                // C14-9:2: an intermediate hop (the return path was written on arrival).
                if !smi.switch {
                    return Verdict::Discard;
                }
                self.set_hop_pointer(ptr + 1);
                return Verdict::check(leaves_by(self.initial_port(ptr + 1)));
            }
            if ptr == cnt {
                // C14-9:3: the end of the directed-route part.
                self.set_hop_pointer(ptr + 1);
                return Verdict::check(smi.switch || self.dr_dlid() == PERMISSIVE_LID);
            }
            // C14-9:4 hands it to the SMA or SM; C14-9:5 fails any other pointer.
            Verdict::check(ptr == cnt + 1)
        } else {
            if cnt != 0 && ptr == cnt + 1 {
                // C14-13:1: the first hop back.
                self.set_hop_pointer(ptr - 1);
                return Verdict::check(leaves_by(self.return_port(ptr - 1)));
            }
            if 2 <= ptr && ptr <= cnt {
                // C14-13:2: an intermediate hop.
                if !smi.switch {
                    return Verdict::Discard;
                }
                self.set_hop_pointer(ptr - 1);
                return Verdict::check(leaves_by(self.return_port(ptr - 1)));
            }
            if ptr == 1 {
                // C14-13:3: the end of the directed-route part.
                self.set_hop_pointer(0);
                return Verdict::check(smi.switch || self.dr_slid() == PERMISSIVE_LID);
            }
            // C14-13:4 hands it to the SM; C14-13:5 fails any other pointer.
            Verdict::check(ptr == 0)
        }
    }

    /// The receive-side step, for an SMP that arrived on `smi.port`: writes
    /// that port into the return path going out, and steps the pointer of a
    /// response that has reached the requester.
    #[inline(always)]
    pub fn smi_recv(&mut self, smi: Smi) -> Verdict {
        let (ptr, cnt) = (self.hop_pointer(), self.hop_count());
        if cnt > MAX_HOPS {
            return Verdict::Discard;
        }
        if !self.is_returning() {
            if cnt != 0 && ptr == 0 {
                // C14-9:1: the sender should have stepped the pointer.
                return Verdict::Discard;
            }
            if ptr != 0 && ptr < cnt {
                // C14-9:2: an intermediate hop (the pointer is stepped when sending).
                if !smi.switch {
                    return Verdict::Discard;
                }
                if let Some(port) = smi.port {
                    self.set_return_port(ptr, port);
                }
                return Verdict::Handle;
            }
            if ptr == cnt {
                // C14-9:3: the end of the directed-route part.
                if let (Some(port), true) = (smi.port, cnt != 0) {
                    self.set_return_port(ptr, port);
                }
                return Verdict::check(smi.switch || self.dr_dlid() == PERMISSIVE_LID);
            }
            Verdict::check(ptr == cnt + 1)
        } else {
            if cnt != 0 && ptr == cnt + 1 {
                // C14-13:1.
                self.set_hop_pointer(ptr - 1);
                let port = self.return_port(ptr - 1);
                return Verdict::check(smi.port.is_none_or(|want| port == want));
            }
            if 2 <= ptr && ptr <= cnt {
                // C14-13:2: an intermediate hop (the pointer is stepped when sending).
                return Verdict::check(smi.switch);
            }
            if ptr == 1 {
                // C14-13:3: the SM's own response comes home here.
                if self.dr_slid() == PERMISSIVE_LID {
                    self.set_hop_pointer(0);
                    return Verdict::Handle;
                }
                return Verdict::check(smi.switch);
            }
            Verdict::check(ptr == 0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directed-route Get(NodeInfo) along 1 → 3 → 7, DrSLID and DrDLID
    /// permissive, with the given direction, hop pointer and return path.
    fn smp(returning: bool, hop_pointer: u8, return_path: &[u8]) -> [u8; 256] {
        let mut b = [0u8; 256];
        b[..8].copy_from_slice(&[0x01, 0x81, 0x01, 0x01, 0x00, 0x00, hop_pointer, 0x03]);
        if returning {
            b[3] = 0x81;
            b[4] = 0x80;
        }
        b[16..18].copy_from_slice(&[0x00, 0x11]);
        b[32..36].copy_from_slice(&[0xff, 0xff, 0xff, 0xff]);
        b[129..132].copy_from_slice(&[1, 3, 7]);
        b[193..193 + return_path.len()].copy_from_slice(return_path);
        b
    }

    fn send(b: &mut [u8; 256], smi: Smi) -> Verdict {
        Packet::new_unchecked(&mut b[..]).smi_send(smi)
    }

    fn recv(b: &mut [u8; 256], smi: Smi) -> Verdict {
        Packet::new_unchecked(&mut b[..]).smi_recv(smi)
    }

    const SWITCH: Smi = Smi {
        switch: true,
        port: None,
    };

    fn ca(port: u8) -> Smi {
        Smi {
            switch: false,
            port: Some(port),
        }
    }

    fn switch_on(port: u8) -> Smi {
        Smi {
            switch: true,
            port: Some(port),
        }
    }

    #[test]
    fn test_path_accessors() {
        let mut b = smp(true, 4, &[2, 5, 9]);
        let mut p = Packet::new_unchecked(&mut b[..]);
        assert!(p.is_returning());
        assert_eq!((p.initial_port(1), p.initial_port(3)), (1, 7));
        assert_eq!((p.return_port(1), p.return_port(3)), (2, 9));
        assert_eq!(p.segment_end_lid(), PERMISSIVE_LID);
        p.set_return_port(2, 6);
        p.set_hop_pointer(2);
        assert_eq!(p.out_port(), 6);
        p.set_direction(Direction::Outbound);
        assert_eq!(p.out_port(), 3);
        assert_eq!(&b[192..196], &[0, 2, 6, 9]);
    }

    #[test]
    fn a_request_walks_out_and_its_response_walks_back() {
        // Requester (a CA on port 1): the first hop.
        let mut b = smp(false, 0, &[]);
        assert_eq!(send(&mut b, ca(1)), Verdict::Handle);
        assert_eq!((b[6], Packet::new_unchecked(&b[..]).out_port()), (1, 1));
        // The first switch: arrived on its port 4, out of 3.
        assert_eq!(recv(&mut b, switch_on(4)), Verdict::Handle);
        assert_eq!(Packet::new_unchecked(&b[..]).smi_next(), Next::Forward);
        assert_eq!(send(&mut b, switch_on(3)), Verdict::Handle);
        assert_eq!(b[6], 2);
        // The second switch: arrived on 5, out of 7.
        assert_eq!(recv(&mut b, switch_on(5)), Verdict::Handle);
        assert_eq!(send(&mut b, switch_on(7)), Verdict::Handle);
        // The responder, a CA reached on its port 2: the end of the path.
        assert_eq!(recv(&mut b, ca(2)), Verdict::Handle);
        assert_eq!(Packet::new_unchecked(&b[..]).smi_next(), Next::SegmentEnd);
        assert_eq!(&b[192..196], &[0, 4, 5, 2], "the return path, hop by hop");
        assert_eq!(send(&mut b, ca(2)), Verdict::Handle);
        assert_eq!(b[6], 4, "one past the hop count: the SMA's");

        // The response leaves by return path entry 3.
        Packet::new_unchecked(&mut b[..]).set_direction(Direction::Inbound);
        assert_eq!(send(&mut b, ca(2)), Verdict::Handle);
        assert_eq!(b[6], 3);
        assert_eq!(recv(&mut b, SWITCH), Verdict::Handle);
        assert_eq!(Packet::new_unchecked(&b[..]).smi_next(), Next::Forward);
        assert_eq!(send(&mut b, switch_on(5)), Verdict::Handle);
        assert_eq!(recv(&mut b, SWITCH), Verdict::Handle);
        assert_eq!(send(&mut b, switch_on(4)), Verdict::Handle);
        assert_eq!(b[6], 1);
        // Home: DrSLID is permissive, so the receive step takes it to 0.
        assert_eq!(recv(&mut b, ca(1)), Verdict::Handle);
        assert_eq!(b[6], 0);
        assert_eq!(Packet::new_unchecked(&b[..]).smi_next(), Next::Here);
    }

    #[test]
    fn port_checks() {
        let mut b = smp(false, 0, &[]);
        assert_eq!(
            send(&mut b, ca(2)),
            Verdict::Discard,
            "initial path says port 1"
        );
        let mut b = smp(true, 4, &[2, 5, 9]);
        assert_eq!(
            send(&mut b, ca(1)),
            Verdict::Discard,
            "return path says port 9"
        );
        let mut b = smp(true, 4, &[2, 5, 9]);
        assert_eq!(recv(&mut b, ca(1)), Verdict::Discard);
        let mut b = smp(true, 4, &[2, 5, 9]);
        assert_eq!(
            send(&mut b, Smi::END_NODE),
            Verdict::Handle,
            "no port, no check"
        );
    }

    #[test]
    fn end_nodes_do_not_forward() {
        for (returning, ptr) in [(false, 1), (false, 2), (true, 2), (true, 3)] {
            let mut b = smp(returning, ptr, &[2, 5, 9]);
            assert_eq!(
                send(&mut b, Smi::END_NODE),
                Verdict::Discard,
                "send {returning} {ptr}"
            );
            let mut b = smp(returning, ptr, &[2, 5, 9]);
            assert_eq!(
                recv(&mut b, Smi::END_NODE),
                Verdict::Discard,
                "recv {returning} {ptr}"
            );
        }
    }

    #[test]
    fn unreasonable_pointers_and_counts() {
        for ptr in [5, 64, 255] {
            let mut b = smp(false, ptr, &[]);
            assert_eq!(send(&mut b, SWITCH), Verdict::Discard);
            assert_eq!(recv(&mut b, SWITCH), Verdict::Discard);
            let mut b = smp(true, ptr, &[]);
            assert_eq!(send(&mut b, SWITCH), Verdict::Discard);
            assert_eq!(recv(&mut b, SWITCH), Verdict::Discard);
        }
        // C14-6: 64 hops is one too many, in either step.
        let mut b = smp(false, 0, &[]);
        b[7] = 64;
        assert_eq!(send(&mut b, SWITCH), Verdict::Discard);
        assert_eq!(recv(&mut b, SWITCH), Verdict::Discard);
        assert_eq!(b[6], 0, "a discarded SMP is not stepped");
        b[7] = 63;
        assert_eq!(send(&mut b, SWITCH), Verdict::Handle);
    }

    #[test]
    fn the_segment_end_needs_a_permissive_lid_at_an_end_node() {
        // Going out: DrDLID 0x0012 means a LID-routed tail, which only a switch starts.
        let mut b = smp(false, 3, &[]);
        b[34..36].copy_from_slice(&[0x00, 0x12]);
        assert_eq!(Packet::new_unchecked(&b[..]).segment_end_lid(), 0x12);
        assert_eq!(recv(&mut b.clone(), ca(1)), Verdict::Discard);
        assert_eq!(send(&mut b.clone(), Smi::END_NODE), Verdict::Discard);
        assert_eq!(recv(&mut b, SWITCH), Verdict::Handle);
        assert_eq!(send(&mut b, SWITCH), Verdict::Handle);
        assert_eq!(b[6], 4);
        // Coming back: DrSLID 0x0034 keeps the pointer at 1 on a switch's receive step.
        let mut b = smp(true, 1, &[2, 5, 9]);
        b[32..34].copy_from_slice(&[0x00, 0x34]);
        assert_eq!(recv(&mut b.clone(), Smi::END_NODE), Verdict::Discard);
        assert_eq!(recv(&mut b, SWITCH), Verdict::Handle);
        assert_eq!(b[6], 1);
        assert_eq!(Packet::new_unchecked(&b[..]).smi_next(), Next::SegmentEnd);
        assert_eq!(send(&mut b, SWITCH), Verdict::Handle);
        assert_eq!(b[6], 0);
    }

    #[test]
    fn zero_hops_is_the_local_node() {
        let mut b = smp(false, 0, &[]);
        b[7] = 0;
        assert_eq!(Packet::new_unchecked(&b[..]).smi_next(), Next::SegmentEnd);
        assert_eq!(send(&mut b, Smi::END_NODE), Verdict::Handle);
        assert_eq!(b[6], 1);
        assert_eq!(recv(&mut b, Smi::END_NODE), Verdict::Handle);
        Packet::new_unchecked(&mut b[..]).set_direction(Direction::Inbound);
        assert_eq!(send(&mut b, Smi::END_NODE), Verdict::Handle);
        assert_eq!(b[6], 0);
        assert_eq!(
            &b[192..256],
            &[0u8; 64],
            "nothing written into the return path"
        );
    }
}
