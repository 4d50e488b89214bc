//! The OS edge of the kernel transport: the umad and issm character devices and
//! the umad ioctls (as the kernel's `ib_user_mad` UAPI defines them). Reads and writes go
//! through `std::fs::File`; only the ioctls need `unsafe`.
#![allow(unsafe_code)]

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use nix::fcntl::OFlag;

/// `IB_USER_MAD_USER_RMPP`: the kernel treats every RMPP MAD as a plain MAD.
pub(super) const USER_RMPP: u32 = 1;

/// `struct ib_user_mad_reg_req2` (40 bytes).
#[repr(C)]
#[derive(Debug, Default)]
pub(super) struct RegReq2 {
    pub(super) id: u32,
    pub(super) qpn: u32,
    pub(super) mgmt_class: u8,
    pub(super) mgmt_class_version: u8,
    pub(super) res: u16,
    pub(super) flags: u32,
    /// Bit n = method n, as the kernel reads it (a bitmap of 32-bit words on the host).
    pub(super) method_mask: [u64; 2],
    /// Host order, low 24 bits.
    pub(super) oui: u32,
    pub(super) rmpp_version: u8,
    pub(super) reserved: [u8; 3],
}
const _: () = assert!(core::mem::size_of::<RegReq2>() == 40);

mod ioctl {
    use super::RegReq2;
    // IB_IOCTL_MAGIC 0x1b.
    nix::ioctl_readwrite!(register_agent2, 0x1b, 4, RegReq2);
    nix::ioctl_write_ptr!(unregister_agent, 0x1b, 2, u32);
    nix::ioctl_none!(enable_pkey, 0x1b, 3);
}

/// An open `/dev/infiniband/umadN`, non-blocking.
#[derive(Debug)]
pub(super) struct Umad {
    file: File,
}

impl Umad {
    pub(super) fn open(path: &Path) -> io::Result<Umad> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags((OFlag::O_NONBLOCK | OFlag::O_CLOEXEC).bits())
            .open(path)?;
        Ok(Umad { file })
    }

    /// `IB_USER_MAD_ENABLE_PKEY`: the 64-byte header with `pkey_index`. Only before
    /// the first registration.
    pub(super) fn enable_pkey(&self) -> io::Result<()> {
        // SAFETY: the descriptor is an open umad device; the ioctl takes no argument.
        unsafe { ioctl::enable_pkey(self.fd_raw()) }?;
        Ok(())
    }

    /// `IB_USER_MAD_REGISTER_AGENT2`: the kernel writes the agent id into `req.id`.
    pub(super) fn register(&self, req: &mut RegReq2) -> io::Result<u32> {
        // SAFETY: `req` is a valid, exclusively borrowed ib_user_mad_reg_req2 that the
        // kernel reads and writes for the duration of the call only.
        unsafe { ioctl::register_agent2(self.fd_raw(), req) }?;
        Ok(req.id)
    }

    /// `IB_USER_MAD_UNREGISTER_AGENT`.
    pub(super) fn unregister(&self, id: u32) -> io::Result<()> {
        // SAFETY: the kernel reads one u32 from the pointer, valid for the call.
        unsafe { ioctl::unregister_agent(self.fd_raw(), &id) }?;
        Ok(())
    }

    /// One received MAD (header + MAD), or WouldBlock.
    pub(super) fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        (&self.file).read(buf)
    }

    /// Send one MAD (header + MAD).
    pub(super) fn write(&self, buf: &[u8]) -> io::Result<usize> {
        (&self.file).write(buf)
    }

    fn fd_raw(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        self.file.as_raw_fd()
    }
}

impl AsFd for Umad {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }
}

/// Open `/dev/infiniband/issmN` without waiting: held open, the port is the SM
/// (PortInfo:CapabilityMask.IsSM); EAGAIN while another process holds it.
pub(super) fn open_issm(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags((OFlag::O_NONBLOCK | OFlag::O_CLOEXEC).bits())
        .open(path)
}
