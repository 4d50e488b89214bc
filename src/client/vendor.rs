//! Vendor-specific classes (IBA 13.4.9): range 1 (0x09–0x0F: no OUI, no RMPP, data
//! from byte 24) and range 2 (0x30–0x4F: the OUI at bytes 37..40, data from byte 40,
//! RMPP where the vendor's class uses it). The layouts are `wire::vendor`'s and
//! `wire::rmpp`'s; this file only builds requests and reads answers.
//!
//! A vendor attribute's layout is the vendor's, so the calls take and return the
//! attribute's bytes; [`VendorAnswer::attr`] parses them as any [`Attribute`] a
//! program defines for its vendor class.

use super::attr::Attribute;
use super::calls::{gsi, header, status_error};
use super::request::{Request, Response};
use super::{Client, Pending};
use crate::types::MadAddr;
use crate::wire::mad::{self, Method, METHOD_RESP};
use crate::wire::{rmpp, vendor, MAD_SIZE};
use crate::{Error, Result};

/// A vendor class as the client sends it: class, class version, and for range 2 the
/// OUI and whether the class uses RMPP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Vendor {
    class: u8,
    version: u8,
    oui: u32,
    rmpp: bool,
}

impl Vendor {
    /// A range-1 class (0x09–0x0F): one MAD each way, 232 bytes of data.
    ///
    /// # Errors
    /// EINVAL for a class outside range 1.
    pub fn range1(class: u8, version: u8) -> Result<Vendor> {
        if !vendor::is_vendor_range1(class) {
            return Err(Error::InvalidArgument(
                "vendor range 1 is classes 0x09 to 0x0f",
            ));
        }
        Ok(Vendor {
            class,
            version,
            oui: 0,
            rmpp: false,
        })
    }

    /// A range-2 class (0x30–0x4F) of vendor `oui` (24 bits), without RMPP: one MAD
    /// each way, 216 bytes of data.
    ///
    /// # Errors
    /// EINVAL for a class outside range 2 or an OUI wider than 24 bits.
    pub fn range2(class: u8, version: u8, oui: u32) -> Result<Vendor> {
        if !vendor::is_vendor_range2(class) {
            return Err(Error::InvalidArgument(
                "vendor range 2 is classes 0x30 to 0x4f",
            ));
        }
        if oui > 0x00ff_ffff {
            return Err(Error::InvalidArgument("an OUI has 24 bits"));
        }
        Ok(Vendor {
            class,
            version,
            oui,
            rmpp: false,
        })
    }

    /// The same range-2 class using RMPP: requests and answers of any size (up to the
    /// port's RMPP message limit), segmented and reassembled by the port.
    ///
    /// # Errors
    /// EINVAL for a range-1 class (range 1 has no RMPP).
    pub fn with_rmpp(self) -> Result<Vendor> {
        if !vendor::is_vendor_range2(self.class) {
            return Err(Error::InvalidArgument("only vendor range 2 may use RMPP"));
        }
        Ok(Vendor { rmpp: true, ..self })
    }

    /// The management class.
    pub fn class(&self) -> u8 {
        self.class
    }

    /// The OUI (range 2), `None` for range 1.
    pub fn oui(&self) -> Option<u32> {
        vendor::is_vendor_range2(self.class).then_some(self.oui)
    }

    /// Whether the class uses RMPP.
    pub fn uses_rmpp(&self) -> bool {
        self.rmpp
    }

    /// Where the data starts in each MAD: 24 (range 1) or 40 (range 2).
    pub fn data_offset(&self) -> usize {
        mad::MgmtClass::from(self.class).data_offset()
    }

    /// The most data one request may carry: one MAD's worth without RMPP, `None`
    /// (no limit of the class; the port's RMPP limit) with it.
    pub fn max_data(&self) -> Option<usize> {
        (!self.rmpp).then(|| MAD_SIZE - self.data_offset())
    }

    /// The request: header, OUI, and for data longer than one MAD the RMPP header
    /// marked Active so the port segments it.
    fn request(
        &self,
        lid: u16,
        method: Method,
        attr_id: u16,
        attr_mod: u32,
        data: &[u8],
    ) -> Result<Request> {
        let at = self.data_offset();
        if let Some(limit) = self.max_data() {
            if data.len() > limit {
                return Err(Error::MessageTooLarge {
                    len: data.len(),
                    limit,
                });
            }
        }
        let mut m = header(self.class, self.version, method, attr_id, attr_mod);
        if at + data.len() > MAD_SIZE {
            m.resize(at + data.len(), 0);
            let mut r = rmpp::Packet::new_unchecked(&mut m[..]);
            r.set_rmpp_version(rmpp::VERSION);
            r.set_rmpp_type(rmpp::RmppType::Data);
            r.set_resp_time_flags(rmpp::RESP_TIME_NONE, rmpp::FLAG_ACTIVE);
        }
        if self.oui().is_some() {
            vendor::Repr { oui: self.oui }.emit(&mut vendor::Packet::new_unchecked(&mut m[..]));
        }
        m[at..at + data.len()].copy_from_slice(data);
        Ok(Request {
            class: self.class,
            version: self.version,
            rmpp: self.rmpp,
            oui: self.oui,
            addr: gsi(lid),
            mad: m,
            timeout_ms: None,
            retries: None,
        })
    }
}

/// A vendor class's answer: its header fields and its data (for an RMPP answer,
/// every segment's, reassembled, of the length the sender gave; for a one-MAD answer,
/// the rest of the MAD, padding included).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VendorAnswer {
    /// Who answered.
    pub addr: MadAddr,
    /// The response method (GetResp, …).
    pub method: Method,
    /// The attribute id.
    pub attr_id: u16,
    /// The attribute modifier.
    pub attr_mod: u32,
    /// The OUI (range 2; 0 for range 1).
    pub oui: u32,
    /// The data after the class header.
    pub data: Vec<u8>,
}

impl VendorAnswer {
    /// The data parsed as attribute `A` (a program's own vendor attribute).
    ///
    /// # Errors
    /// EBADMSG when `A` does not parse from the data.
    pub fn attr<A: Attribute>(&self) -> Result<A> {
        Ok(A::decode(&self.data)?)
    }
}

fn vendor_decode(resp: Response) -> Result<VendorAnswer> {
    status_error(&resp)?;
    let h = mad::Packet::new_checked(&resp.mad[..])?;
    let class = h.mgmt_class();
    let oui = if class.is_vendor_range2() {
        vendor::Packet::new_checked(&resp.mad[..])?.oui()
    } else {
        0
    };
    let (method, attr_id, attr_mod) = (h.method(), h.attr_id(), h.attr_mod());
    let mut data = resp.mad;
    data.drain(..class.data_offset().min(data.len()));
    Ok(VendorAnswer {
        addr: resp.addr,
        method,
        attr_id,
        attr_mod,
        oui,
        data,
    })
}

impl Client {
    /// A request of vendor class `v` with any method that is answered (Get, Set, or a
    /// vendor's own method below 0x80), to `lid`'s QP1, without waiting.
    ///
    /// # Errors
    /// EINVAL for a response method, or for Send and TrapRepress (never answered:
    /// [`Client::vendor_send`]); EMSGSIZE for more data than one MAD holds when the
    /// class has no RMPP; as [`Client::submit`].
    pub fn vendor_call_async(
        &self,
        v: &Vendor,
        lid: u16,
        method: Method,
        attr_id: u16,
        attr_mod: u32,
        data: &[u8],
    ) -> Result<Pending<VendorAnswer>> {
        if u8::from(method) & METHOD_RESP != 0 {
            return Err(Error::InvalidArgument(
                "a request cannot have a response method",
            ));
        }
        if matches!(method, Method::Send | Method::TrapRepress) {
            return Err(Error::InvalidArgument(
                "Send and TrapRepress are never answered: use vendor_send",
            ));
        }
        let req = v.request(lid, method, attr_id, attr_mod, data)?;
        let tid = self.inner.submit(req)?;
        Ok(Pending::new(self.inner.clone(), tid, vendor_decode))
    }

    /// A request of vendor class `v` with `method`, waited for.
    ///
    /// # Errors
    /// As [`Client::vendor_call_async`]; ETIMEDOUT when nothing answers; EPROTO
    /// ([`Error::MadStatus`]) for an answer with an error status; ECONNABORTED when
    /// the answer's RMPP transfer is aborted.
    pub fn vendor_call(
        &self,
        v: &Vendor,
        lid: u16,
        method: Method,
        attr_id: u16,
        attr_mod: u32,
        data: &[u8],
    ) -> Result<VendorAnswer> {
        self.vendor_call_async(v, lid, method, attr_id, attr_mod, data)?
            .wait()
    }

    /// Get of vendor attribute `attr_id` at `lid`; `data` is the request's data (often
    /// empty).
    ///
    /// # Errors
    /// As [`Client::vendor_call`].
    pub fn vendor_get(
        &self,
        v: &Vendor,
        lid: u16,
        attr_id: u16,
        attr_mod: u32,
        data: &[u8],
    ) -> Result<VendorAnswer> {
        self.vendor_call(v, lid, Method::Get, attr_id, attr_mod, data)
    }

    /// Set of vendor attribute `attr_id` at `lid` to `data`.
    ///
    /// # Errors
    /// As [`Client::vendor_call`].
    pub fn vendor_set(
        &self,
        v: &Vendor,
        lid: u16,
        attr_id: u16,
        attr_mod: u32,
        data: &[u8],
    ) -> Result<VendorAnswer> {
        self.vendor_call(v, lid, Method::Set, attr_id, attr_mod, data)
    }

    /// Send a vendor MAD this client does not wait on (Send, Trap, TrapRepress,
    /// Report): it is handed to the port and not tracked, so a MAD lost on the way,
    /// or an RMPP transfer the peer aborts, is not reported. Any answer (a Trap's
    /// TrapRepress, a Report's ReportResp) is dropped.
    ///
    /// # Errors
    /// EINVAL for a response method (a client only asks; a program answers requests
    /// through its own [`Port`](crate::port::Port) agent); EMSGSIZE as
    /// [`Client::vendor_call_async`]; as [`Port::send`](crate::port::Port::send).
    pub fn vendor_send(
        &self,
        v: &Vendor,
        lid: u16,
        method: Method,
        attr_id: u16,
        attr_mod: u32,
        data: &[u8],
    ) -> Result<()> {
        if u8::from(method) & METHOD_RESP != 0 {
            return Err(Error::InvalidArgument(
                "a request cannot have a response method",
            ));
        }
        let req = v.request(lid, method, attr_id, attr_mod, data)?;
        self.inner.send_unanswered(req)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range2_request_layout_oui_and_rmpp() {
        let v = Vendor::range2(0x30, 1, 0x00_02_c9).unwrap();
        let r = v.request(5, Method::Get, 0x10, 3, &[0xaa; 216]).unwrap();
        assert_eq!((r.mad.len(), r.addr.lid, r.addr.qpn), (256, 5, 1));
        // Reserved byte 36, then the OUI at 37..40; data from 40.
        assert_eq!(&r.mad[36..41], &[0, 0x00, 0x02, 0xc9, 0xaa]);
        assert!(!rmpp::Packet::new_unchecked(&r.mad[..]).is_active());
        let h = mad::Packet::new_checked(&r.mad[..]).unwrap();
        assert_eq!(
            (h.attr_id(), h.attr_mod(), h.method()),
            (0x10, 3, Method::Get)
        );

        // More than one MAD: only with RMPP, then marked Active for the port to segment.
        assert_eq!(
            v.request(5, Method::Get, 0x10, 0, &[0; 217])
                .unwrap_err()
                .errno(),
            crate::error::errno::EMSGSIZE
        );
        let big = v.with_rmpp().unwrap();
        let r = big.request(5, Method::Set, 0x10, 0, &[0x55; 1000]).unwrap();
        assert_eq!(r.mad.len(), 40 + 1000);
        let p = rmpp::Packet::new_unchecked(&r.mad[..]);
        assert!(p.is_active());
        assert_eq!(
            (p.rmpp_version(), p.rmpp_type()),
            (rmpp::VERSION, rmpp::RmppType::Data)
        );
        assert_eq!(&r.mad[37..40], &[0x00, 0x02, 0xc9]);
        assert!(r.rmpp);
    }

    #[test]
    fn range1_has_no_oui_and_data_from_24() {
        let v = Vendor::range1(0x09, 2).unwrap();
        assert_eq!(
            (v.oui(), v.data_offset(), v.max_data()),
            (None, 24, Some(232))
        );
        let r = v.request(7, Method::Get, 0x11, 0, &[1; 232]).unwrap();
        assert_eq!(
            (r.mad.len(), r.mad[2], r.mad[24], r.mad[255]),
            (256, 2, 1, 1)
        );
        assert_eq!((r.oui, r.rmpp), (0, false));
    }

    #[test]
    fn answer_data_is_what_follows_the_class_header() {
        let v = Vendor::range2(0x30, 1, 0x00_14_05)
            .unwrap()
            .with_rmpp()
            .unwrap();
        let mut m = v.request(1, Method::Get, 0x10, 0, &[7; 500]).unwrap().mad;
        mad::Packet::new_unchecked(&mut m[..]).set_method(Method::GetResp);
        let a = vendor_decode(Response {
            addr: MadAddr::default(),
            mad: m,
        })
        .unwrap();
        assert_eq!(
            (a.oui, a.data.len(), a.method),
            (0x00_14_05, 500, Method::GetResp)
        );
    }
}
