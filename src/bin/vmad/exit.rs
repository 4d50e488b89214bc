//! Exit statuses: a script can tell a bad command line from a timeout, a
//! missing device, a refused permission and an I/O error without parsing
//! messages. The values are sysexits.h's, which other tools use too.

use std::io;

use vmad::error::errno;

/// The EXIT STATUS section of `vmad --help` and vmad(1); `docs/tools.md` has the same table.
pub(crate) const EXIT_HELP: &str = "\
Exit status (sysexits.h values):
  0   success
  1   any other failure
  64  usage: a bad flag, argument or value (EINVAL)
  65  data: a file that is not a capture vmad can read
  66  no input: the file cannot be opened
  69  no device: no such CA or port, no ibsim to attach to (ENODEV)
  70  software: a vmad limit it should not hit (ENOSPC, EMSGSIZE, EAGAIN)
  71  OS: out of memory, address in use (ENOMEM, EADDRINUSE)
  74  I/O error (EIO), e.g. writing the capture file
  75  timeout: no answer within -t and --retries (ETIMEDOUT)
  76  protocol: the peer answered with an error status, or garbage
  77  permission denied (EPERM, EACCES, EROFS)
  78  unsupported by this transport or build (EOPNOTSUPP)

Environment:
  VMAD_TRANSPORT  the default of --transport (sim, ibsim, kernel, hybrid, verbs, roce)
  IBSIM_SOCKNAME, IBSIM_SERVER_NAME, IBSIM_SERVER_PORT, SIM_HOST
                  where ibsim runs and which node to attach to (--transport ibsim)
  VMAD_FABRIC     a `vmad fabric` server's control socket (set by eval \"$(vmad fabric up)\");
                  with VMAD_TRANSPORT unset, --transport defaults to ibsim, its protocol";

/// What `vmad` exits with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Exit {
    /// Any failure the others do not name.
    Failure = 1,
    /// A bad flag, argument or value (EX_USAGE); EINVAL from the stack.
    Usage = 64,
    /// Input that cannot be decoded: a file that is not a capture (EX_DATAERR).
    Data = 65,
    /// An input file that cannot be opened (EX_NOINPUT).
    NoInput = 66,
    /// No such CA or port, no ibsim to attach to: ENODEV (EX_UNAVAILABLE).
    NoDevice = 69,
    /// vmad's own fault: a buffer or table limit it should not hit (EX_SOFTWARE).
    Software = 70,
    /// The OS refused a resource: memory, an address in use (EX_OSERR).
    Os = 71,
    /// A read or write failed: EIO, a capture file (EX_IOERR).
    Io = 74,
    /// No answer within the timeout and retries: ETIMEDOUT (EX_TEMPFAIL).
    Timeout = 75,
    /// The peer answered, with an error status (EX_PROTOCOL).
    Protocol = 76,
    /// Not permitted: EPERM, EACCES (EX_NOPERM).
    Permission = 77,
    /// The transport or this build cannot do it: EOPNOTSUPP (EX_CONFIG).
    Unsupported = 78,
}

impl Exit {
    /// The status for an errno from vmad's stack ([`vmad::Error::errno`]) or the OS.
    pub(crate) fn from_errno(e: i32) -> Exit {
        match e {
            errno::EINVAL => Exit::Usage,
            errno::ENODEV | ENXIO => Exit::NoDevice,
            errno::ETIMEDOUT => Exit::Timeout,
            errno::EPERM | EACCES => Exit::Permission,
            errno::EIO => Exit::Io,
            errno::EOPNOTSUPP | errno::EPROTONOSUPPORT => Exit::Unsupported,
            errno::ENOMEM | errno::EADDRINUSE => Exit::Os,
            errno::ENOSPC | errno::EMSGSIZE | errno::EAGAIN => Exit::Software,
            _ => Exit::Failure,
        }
    }

    /// For an OS error: its errno when it has one, else an I/O error.
    pub(crate) fn from_io(e: &io::Error) -> Exit {
        match e.kind() {
            // EROFS too: a capture path that cannot be written however it is asked.
            io::ErrorKind::PermissionDenied | io::ErrorKind::ReadOnlyFilesystem => {
                return Exit::Permission
            }
            // A capture whose bytes are not what their header says.
            io::ErrorKind::InvalidData | io::ErrorKind::UnexpectedEof => return Exit::Data,
            _ => {}
        }
        match e.raw_os_error() {
            Some(n) if n == errno::ENODEV || n == ENXIO => Exit::NoDevice,
            Some(n) if n == errno::ETIMEDOUT => Exit::Timeout,
            Some(n) if n == errno::EADDRINUSE || n == errno::ENOMEM => Exit::Os,
            _ => Exit::Io,
        }
    }

    /// For an error of vmad's stack. An `Io` error keeps its OS errno, so a
    /// capture file in a directory the user cannot write is a permission error.
    pub(crate) fn from_error(e: &vmad::Error) -> Exit {
        match e {
            vmad::Error::Io(io) => Exit::from_io(io),
            e => Exit::from_errno(e.errno()),
        }
    }
}

/// EACCES: the OS's "permission denied" (vmad's own errors use EPERM).
const EACCES: i32 = 13;
/// ENXIO ("no such device or address"): what opening a missing device node gives.
const ENXIO: i32 = 6;

/// A command's failure: the message printed, and the exit status.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) msg: String,
    pub(crate) exit: Exit,
}

impl Failure {
    pub(crate) fn new(exit: Exit, msg: impl Into<String>) -> Failure {
        Failure {
            msg: msg.into(),
            exit,
        }
    }

    /// A bad argument or value.
    pub(crate) fn usage(msg: impl Into<String>) -> Failure {
        Failure::new(Exit::Usage, msg)
    }

    /// The peer answered with an error status.
    pub(crate) fn protocol(msg: impl Into<String>) -> Failure {
        Failure::new(Exit::Protocol, msg)
    }

    /// No answer in time.
    pub(crate) fn timeout(msg: impl Into<String>) -> Failure {
        Failure::new(Exit::Timeout, msg)
    }
}

impl From<vmad::Error> for Failure {
    fn from(e: vmad::Error) -> Failure {
        Failure::new(Exit::from_error(&e), e.to_string())
    }
}

impl From<io::Error> for Failure {
    fn from(e: io::Error) -> Failure {
        Failure::new(Exit::from_io(&e), e.to_string())
    }
}

impl From<vmad::wire::Error> for Failure {
    fn from(e: vmad::wire::Error) -> Failure {
        Failure::new(Exit::Protocol, format!("malformed answer: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every errno vmad's stack can return lands on the documented status.
    #[test]
    fn errno_to_exit_table() {
        use errno::*;
        let table = [
            (EINVAL, Exit::Usage, 64),
            (ENODEV, Exit::NoDevice, 69),
            (ETIMEDOUT, Exit::Timeout, 75),
            (EPERM, Exit::Permission, 77),
            (EIO, Exit::Io, 74),
            (EOPNOTSUPP, Exit::Unsupported, 78),
            (EPROTONOSUPPORT, Exit::Unsupported, 78),
            (EADDRINUSE, Exit::Os, 71),
            (ENOMEM, Exit::Os, 71),
            (ENOSPC, Exit::Software, 70),
            (EMSGSIZE, Exit::Software, 70),
            (EAGAIN, Exit::Software, 70),
            (12345, Exit::Failure, 1),
        ];
        for (e, want, code) in table {
            assert_eq!(Exit::from_errno(e), want, "errno {e}");
            assert_eq!(want as u8, code, "{want:?}");
        }
    }

    /// The help text names every status the enum has, with its number.
    #[test]
    fn help_lists_every_status() {
        let all = [
            Exit::Failure,
            Exit::Usage,
            Exit::Data,
            Exit::NoInput,
            Exit::NoDevice,
            Exit::Software,
            Exit::Os,
            Exit::Io,
            Exit::Timeout,
            Exit::Protocol,
            Exit::Permission,
            Exit::Unsupported,
        ];
        let listed: Vec<u8> = EXIT_HELP
            .lines()
            .filter_map(|l| l.split_whitespace().next()?.parse().ok())
            .filter(|&n: &u8| n != 0)
            .collect();
        let codes: Vec<u8> = all.iter().map(|&e| e as u8).collect();
        assert_eq!(listed, codes);
    }

    #[test]
    fn vmad_errors_map_through_their_errno() {
        let cases = [
            (vmad::Error::NoDevice("mlx5_9".into()), Exit::NoDevice),
            (vmad::Error::TimedOut, Exit::Timeout),
            (vmad::Error::NotPermitted("qkey"), Exit::Permission),
            (vmad::Error::Unsupported("qp0"), Exit::Unsupported),
            (vmad::Error::InvalidArgument("qpn"), Exit::Usage),
            (vmad::Error::Io(io::Error::other("x")), Exit::Io),
            (
                vmad::Error::Io(io::Error::from(io::ErrorKind::PermissionDenied)),
                Exit::Permission,
            ),
            (
                vmad::Error::Io(io::Error::from_raw_os_error(errno::EADDRINUSE)),
                Exit::Os,
            ),
        ];
        for (e, want) in cases {
            assert_eq!(Failure::from(e).exit, want);
        }
    }
}
