//! A veth pair with one end in a network namespace, for the AF_XDP tests and `xdp_rx`
//! (shared by `#[path]`; scripts/veth-lab.sh is the same set-up for a shell). Raw Ethernet
//! frames of a local experimental EtherType (0x88B5), no IP: AF_PACKET sender and receiver,
//! a thread that enters the namespace, and the calling thread's CPU time.
#![allow(dead_code)]

use std::ffi::CString;
use std::io;
use std::process::Command;
use std::time::Duration;

/// IEEE 802 local experimental EtherType 1.
pub const ETHERTYPE: u16 = 0x88B5;

/// A veth pair: `a` in this namespace, `b` in namespace `ns`. Removed on drop.
pub struct Lab {
    pub a: String,
    pub b: String,
    pub ns: String,
    pub mac_a: [u8; 6],
    pub mac_b: [u8; 6],
}

fn run(args: &[&str]) -> Result<String, String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|e| format!("{}: {e}", args.join(" ")))?;
    if !out.status.success() {
        return Err(format!(
            "`{}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn parse_mac(s: &str) -> Result<[u8; 6], String> {
    let v: Vec<u8> = s
        .trim()
        .split(':')
        .map(|x| u8::from_str_radix(x, 16))
        .collect::<Result<_, _>>()
        .map_err(|e| format!("bad MAC {s:?}: {e}"))?;
    v.try_into().map_err(|_| format!("bad MAC {s:?}"))
}

impl Lab {
    /// Makes the pair `<tag>a` / `<tag>b` (tag of at most 12 characters) and namespace
    /// `<tag>ns`. `Err` says why it cannot (not root, no `ip`, no veth), for a skip.
    pub fn up(tag: &str) -> Result<Lab, String> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err("not root (a veth pair and a network namespace need CAP_NET_ADMIN)".into());
        }
        let (a, b, ns) = (format!("{tag}a"), format!("{tag}b"), format!("{tag}ns"));
        if !std::path::Path::new("/sys/fs/bpf").exists()
            || !std::fs::read_to_string("/proc/mounts")
                .unwrap_or_default()
                .contains(" /sys/fs/bpf bpf ")
        {
            // libxdp keeps its dispatcher in bpffs; without it, it falls back to one program.
            let _ = run(&["mount", "-t", "bpf", "bpf", "/sys/fs/bpf"]);
        }
        let _ = run(&["ip", "link", "del", &a]);
        let _ = run(&["ip", "netns", "del", &ns]);
        run(&["ip", "netns", "add", &ns])?;
        let lab = Lab {
            a: a.clone(),
            b: b.clone(),
            ns: ns.clone(),
            mac_a: [0; 6],
            mac_b: [0; 6],
        };
        run(&[
            "ip",
            "link",
            "add",
            &a,
            "numrxqueues",
            "1",
            "numtxqueues",
            "1",
            "type",
            "veth",
            "peer",
            "name",
            &b,
            "numrxqueues",
            "1",
            "numtxqueues",
            "1",
        ])?;
        run(&["ip", "link", "set", &b, "netns", &ns])?;
        // No IPv6 on the pair: its neighbour discovery would be the only other traffic.
        let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{a}/disable_ipv6"), "1");
        let _ = run(&[
            "ip",
            "netns",
            "exec",
            &ns,
            "sysctl",
            "-qw",
            &format!("net.ipv6.conf.{b}.disable_ipv6=1"),
        ]);
        run(&["ip", "link", "set", &a, "up"])?;
        run(&["ip", "-n", &ns, "link", "set", &b, "up"])?;
        let mut lab = lab;
        lab.mac_a = parse_mac(
            &std::fs::read_to_string(format!("/sys/class/net/{a}/address"))
                .map_err(|e| e.to_string())?,
        )?;
        lab.mac_b = parse_mac(&run(&[
            "ip",
            "netns",
            "exec",
            &ns,
            "cat",
            &format!("/sys/class/net/{b}/address"),
        ])?)?;
        Ok(lab)
    }

    /// Runs `f` on a new thread that has entered the namespace (the veth end `b` is there).
    pub fn in_ns<R: Send + 'static>(
        &self,
        f: impl FnOnce() -> R + Send + 'static,
    ) -> std::thread::JoinHandle<Result<R, String>> {
        let path = format!("/var/run/netns/{}", self.ns);
        std::thread::spawn(move || {
            enter_netns(&path)?;
            Ok(f())
        })
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = run(&["ip", "link", "del", &self.a]);
        let _ = run(&["ip", "netns", "del", &self.ns]);
    }
}

/// Moves the calling thread into the network namespace at `path`.
pub fn enter_netns(path: &str) -> Result<(), String> {
    let c = CString::new(path).unwrap();
    // SAFETY: a NUL-terminated path.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(format!("open {path}: {}", io::Error::last_os_error()));
    }
    // SAFETY: a namespace fd we opened; setns affects this thread only.
    let rc = unsafe { libc::setns(fd, libc::CLONE_NEWNET) };
    let e = io::Error::last_os_error();
    // SAFETY: our fd.
    unsafe { libc::close(fd) };
    if rc != 0 {
        return Err(format!("setns {path}: {e}"));
    }
    Ok(())
}

fn ifindex(name: &str) -> Result<i32, String> {
    let c = CString::new(name).unwrap();
    // SAFETY: a NUL-terminated name.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        return Err(format!(
            "no interface {name}: {}",
            io::Error::last_os_error()
        ));
    }
    Ok(i as i32)
}

/// An AF_PACKET raw socket bound to an interface, for `ETHERTYPE` frames.
pub struct PacketSock {
    fd: i32,
    ifindex: i32,
}

impl PacketSock {
    /// Opens and binds (on the calling thread's namespace). `rcvbuf`: SO_RCVBUFFORCE bytes, or 0.
    pub fn new(ifname: &str, rcvbuf: usize) -> Result<PacketSock, String> {
        let ifindex = ifindex(ifname)?;
        // SAFETY: plain socket(2).
        let fd = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                i32::from(ETHERTYPE.to_be()),
            )
        };
        if fd < 0 {
            return Err(format!("socket(AF_PACKET): {}", io::Error::last_os_error()));
        }
        let s = PacketSock { fd, ifindex };
        // SAFETY: a zeroed sockaddr_ll is valid; filled below.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = ETHERTYPE.to_be();
        sll.sll_ifindex = ifindex;
        // SAFETY: a valid sockaddr_ll of its size.
        let rc = unsafe {
            libc::bind(
                fd,
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        if rc != 0 {
            return Err(format!(
                "bind AF_PACKET {ifname}: {}",
                io::Error::last_os_error()
            ));
        }
        if rcvbuf > 0 {
            let v = rcvbuf as libc::c_int;
            // SAFETY: an int option.
            unsafe {
                libc::setsockopt(
                    fd,
                    libc::SOL_SOCKET,
                    libc::SO_RCVBUFFORCE,
                    (&v as *const libc::c_int).cast(),
                    4,
                )
            };
        }
        Ok(s)
    }

    pub fn fd(&self) -> i32 {
        self.fd
    }

    /// Receive timeout for blocking reads.
    pub fn set_timeout(&self, d: Duration) {
        let tv = libc::timeval {
            tv_sec: d.as_secs() as _,
            tv_usec: d.subsec_micros() as _,
        };
        // SAFETY: a timeval option.
        unsafe {
            libc::setsockopt(
                self.fd,
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&tv as *const libc::timeval).cast(),
                std::mem::size_of::<libc::timeval>() as u32,
            )
        };
    }

    /// Sends `frames` (each a whole Ethernet frame) with one sendmmsg; returns how many went.
    pub fn send_many(&self, frames: &[&[u8]]) -> usize {
        let mut iov: Vec<libc::iovec> = frames
            .iter()
            .map(|f| libc::iovec {
                iov_base: f.as_ptr() as *mut _,
                iov_len: f.len(),
            })
            .collect();
        // SAFETY: zeroed mmsghdrs are valid; each points at one iovec.
        let mut msgs: Vec<libc::mmsghdr> = (0..frames.len())
            .map(|_| unsafe { std::mem::zeroed() })
            .collect();
        for (m, v) in msgs.iter_mut().zip(iov.iter_mut()) {
            m.msg_hdr.msg_iov = v;
            m.msg_hdr.msg_iovlen = 1;
        }
        // SAFETY: msgs and the iovecs they point at live across the call.
        let rc = unsafe { libc::sendmmsg(self.fd, msgs.as_mut_ptr(), msgs.len() as u32, 0) };
        rc.max(0) as usize
    }

    /// One blocking receive into `buf`: the frame's length, or None on timeout/error.
    pub fn recv_into(&self, buf: &mut [u8]) -> Option<usize> {
        // SAFETY: buf is writable for its length.
        let rc = unsafe { libc::recv(self.fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
        (rc > 0).then_some(rc as usize)
    }

    /// Index of the interface it is bound to.
    pub fn ifindex(&self) -> i32 {
        self.ifindex
    }
}

impl Drop for PacketSock {
    fn drop(&mut self) {
        // SAFETY: our fd.
        unsafe { libc::close(self.fd) };
    }
}

/// A 64-byte (or `len`-byte) test frame to `dst` from `src` carrying `seq` after the header.
pub fn frame(dst: [u8; 6], src: [u8; 6], seq: u64, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len.max(22)];
    f[0..6].copy_from_slice(&dst);
    f[6..12].copy_from_slice(&src);
    f[12..14].copy_from_slice(&ETHERTYPE.to_be_bytes());
    f[14..22].copy_from_slice(&seq.to_le_bytes());
    f
}

/// The sequence number a `frame` carries, if it is one.
pub fn seq_of(f: &[u8]) -> Option<u64> {
    (f.len() >= 22 && f[12..14] == ETHERTYPE.to_be_bytes())
        .then(|| u64::from_le_bytes(f[14..22].try_into().unwrap()))
}

/// CPU time of the calling thread: (user, system), from getrusage(RUSAGE_THREAD).
pub fn thread_cpu() -> (Duration, Duration) {
    // SAFETY: a zeroed rusage is valid output space.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_THREAD on the calling thread.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    (tv(ru.ru_utime), tv(ru.ru_stime))
}

/// CPU time of the whole process: (user, system), from getrusage(RUSAGE_SELF).
pub fn process_cpu() -> (Duration, Duration) {
    // SAFETY: as thread_cpu.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    (tv(ru.ru_utime), tv(ru.ru_stime))
}
