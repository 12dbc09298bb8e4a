//! Frames straight from the NIC: AF_XDP receive with a pool's region as the UMEM, against an
//! AF_PACKET receiver that allocates a `Vec<u8>` per packet and the io_uring receiver fed
//! from a pool, on a veth pair (one end in a network namespace), side by side in one run with
//! A/A pairs.
//!
//! A sender thread, inside the namespace, floods 64-byte Ethernet frames (AF_PACKET,
//! `sendmmsg` of 32) at the veth end there; the receiving thread, in the root namespace,
//! takes them from the other end, reads each packet's sequence number (the packet is touched)
//! and frees it. Receivers, one at a time, each for the same window, in rotating order:
//!
//! * `xdp`: [`idxpool::xdp::XdpSocket`] (libxdp's default redirect program, the pool's region
//!   as UMEM); frames come back as handles and go back through the socket's cache;
//! * `vec`: an AF_PACKET socket, `recvmmsg` of 64 into fixed buffers, then a `Vec<u8>` per
//!   packet (the copy an application keeps), dropped after parsing;
//! * `uring`: [`idxpool::uring::UringRx`] with a multishot `recv` on the same kind of
//!   AF_PACKET socket, the provided buffers fed from a pool;
//! * `vec'` and `xdp'`: the A/A pairs (the same receivers again).
//!
//! With `--buffers`, the packet-buffer cells instead: `xdpbuf` and `uringbuf` (the same
//! receivers over a `Pool<PacketBuf>`, each receive writing the buffer's header) against `xdp`
//! and `uring` with their A/A pairs, and a reflector over `PacketBuf`s (every received packet
//! sent back out with `transmit_bufs`) whose TX completions go through the socket's cache
//! (`fwd`, `fwd'`) or straight to the fill ring (`fwdrec`, `XdpConfig::recycle_tx`).
//!
//! Per cell: packets/s received, the receiving thread's CPU time per packet (user and system,
//! getrusage(RUSAGE_THREAD)), the whole process's CPU per packet (sender included: on veth
//! the kernel's receive work runs in the sender's softirq), drops, and heap allocations per
//! packet on the receiving thread (a counting global allocator, per thread). Then the ratios,
//! computed per round and reported as medians, and a verdict.
//!
//! `cargo run --release --features xdp,uring --example xdp_rx -- --quick` (as root)

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell as StdCell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use idxpool::uring::{RxConfig, UringRx};
use idxpool::xdp::{XdpConfig, XdpMode, XdpSocket};
use idxpool::{PoolBuilder, StrideMode};

#[path = "../tests/support/veth_lab.rs"]
mod veth_lab;
use veth_lab::{frame, process_cpu, seq_of, thread_cpu, Lab, PacketSock};

const HELP: &str = "\
xdp_rx: 64-byte frames received on a veth pair, three ways side by side (one run, A/A pairs):
  xdp    AF_XDP socket whose UMEM is an idxpool pool's region (frames are handles)
  vec    AF_PACKET socket, recvmmsg of 64, a Vec<u8> allocated per packet
  uring  io_uring multishot recv on an AF_PACKET socket, buffers fed from a pool
  vec', xdp'  the A/A pairs
A sender thread in a network namespace floods the other end of the pair (AF_PACKET sendmmsg).
Per cell: packets/s, the receiving thread's CPU ns per packet (user, system), the process's
CPU ns per packet (sender included), drops, heap allocations per packet (receiving thread).

usage: xdp_rx [--quick] [--secs S] [--reps N] [--size B] [--block] [--sleep-us U] [--mode M]
              [--frame 2048|2112] [--buffers [--pair xdp|uring|fwd]]
       xdp_rx --only xdp|vec|uring|xdpbuf|uringbuf|fwd|fwdrec --packets N
              (one receiver, N packets: for callgrind)
  --buffers the packet-buffer cells instead: xdp, xdpbuf, xdp' (AF_XDP over Pool<PacketBuf>,
            the header written from each descriptor), uring, uringbuf, uring' (the same for
            io_uring), fwd, fwdrec, fwd' (a reflector over Pool<PacketBuf>: every packet sent
            back out; TX completions through the cache, or recycled to the fill ring)
  --pair    with --buffers: only one baseline, its variant and its A/A (xdp|uring|fwd),
            three cells a round, so that more rounds fit
  --quick   1 round of 0.3 s cells: about 3 s in all
  --secs    measured seconds per cell (default 0.5)
  --reps    rounds, each running every receiver once; medians reported (default 7: ~25 s)
  --size    frame size in bytes (60..=1514; default 64)
  --block   each receiver waits in its own blocking call (poll(2), recvmmsg MSG_WAITFORONE,
            io_uring_enter) when idle; default: every receiver drains, then sleeps
            (--sleep-us, default 1000: one moderation for all, so the CPU per packet is the
            receive path's, not the wake-ups')
  --frame   bytes per object = per UMEM frame (each pool's stride): 2048 (the default;
            aligned chunks; a power of two, so the same line of every frame falls in the same
            few L1/L2 sets) or 2112 (33 lines, spread over all sets as StrideMode::Auto
            spreads objects; unaligned chunks)
  --mode    the XDP hook: skb (generic, the default: one copy into the UMEM), drv (veth's
            driver hook: the skb is turned into an xdp_buff first), auto (libxdp's choice)
Needs root (a veth pair, a network namespace, an XDP program) and AF_XDP; says why and
exits 0 when it cannot run. io_uring cells are skipped when io_uring is disabled.
";

// ---- counting allocator (per thread) ----------------------------------------------------------

struct Counting;
thread_local! {
    static THREAD_ALLOCS: StdCell<u64> = const { StdCell::new(0) };
}

fn count() {
    // `try_with`: a thread being torn down allocates nothing we measure.
    let _ = THREAD_ALLOCS.try_with(|c| c.set(c.get() + 1));
}

fn thread_allocs() -> u64 {
    THREAD_ALLOCS.with(|c| c.get())
}

// SAFETY: forwards every call to the system allocator unchanged; only counts (a const
// thread-local Cell: no allocation, no destructor).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        count();
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.realloc(p, l, n) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

// ---- the receivers ----------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rx {
    Xdp,
    Vec,
    Uring,
    /// `XdpSocket` over `Pool<PacketBuf>`: the header written from each RX descriptor.
    XdpBuf,
    /// `UringRx` over `Pool<PacketBuf>`: the header written from each completion.
    UringBuf,
    /// A reflector: `XdpSocket` (RX and TX) over `Pool<PacketBuf>`, each received buffer
    /// sent back out; TX completions through the socket's cache.
    Fwd,
    /// The same, TX completions straight to the fill ring (`XdpConfig::recycle_tx`).
    FwdRecycle,
}

/// How a receiver waits when it finds nothing: `Sleep` drains, then sleeps `--sleep-us` (the same
/// moderation for every receiver: each wake-up takes a batch, and the CPU per packet is the
/// receive path's, not the scheduler's); `Block` uses each receiver's own blocking wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wait {
    Sleep,
    Block,
}

static WAIT_BLOCK: AtomicBool = AtomicBool::new(false);
/// `--only`'s packet count: the receiver stops after this many (0: the window decides).
static CAP: AtomicU64 = AtomicU64::new(0);
/// The XDP program's hook: 0 generic (SKB), 1 driver, 2 libxdp's choice.
static MODE: AtomicU8 = AtomicU8::new(0);
/// `--frame 2112`: objects (= UMEM frames) of 33 cache lines instead of 2048 bytes.
static FRAME_ODD: AtomicBool = AtomicBool::new(false);

/// Bytes per object and UMEM frame (`--frame`).
fn frame_bytes() -> usize {
    if FRAME_ODD.load(Ordering::Relaxed) {
        2112
    } else {
        2048
    }
}

/// `--sleep-us`: the idle nap of `Wait::Sleep` (default 1 ms: at the rates veth reaches here,
/// a few hundred packets per wake-up, so the wake-up's cost is a few ns per packet and the
/// rings, 2,048 deep, never fill).
static SLEEP_US: AtomicU64 = AtomicU64::new(1000);

fn nap() {
    std::thread::sleep(Duration::from_micros(SLEEP_US.load(Ordering::Relaxed)));
}

fn wait_mode() -> Wait {
    if WAIT_BLOCK.load(Ordering::Relaxed) {
        Wait::Block
    } else {
        Wait::Sleep
    }
}

/// What a receiving thread measured over its window.
#[derive(Clone, Copy, Debug, Default)]
struct Meas {
    packets: u64,
    user_ns: u64,
    sys_ns: u64,
    allocs: u64,
    /// Sum of sequence numbers: the packets were read (and keeps the reads alive).
    checksum: u64,
}

/// Shared between the main thread and a receiver: 0 warm-up, 1 measuring, 2 stop.
struct Phase {
    phase: std::sync::atomic::AtomicU8,
}

/// The receiving loop's window bookkeeping: call `tick` once per batch.
struct Window {
    started: bool,
    base: Meas,
    cpu0: (Duration, Duration),
    packets: u64,
    checksum: u64,
}

impl Window {
    fn new() -> Self {
        Window {
            started: false,
            base: Meas::default(),
            cpu0: (Duration::ZERO, Duration::ZERO),
            packets: 0,
            checksum: 0,
        }
    }
    /// Returns false when the window is over.
    #[inline]
    fn tick(&mut self, ph: &Phase) -> bool {
        let cap = CAP.load(Ordering::Relaxed);
        if cap > 0 && self.packets >= cap {
            return false;
        }
        match ph.phase.load(Ordering::Relaxed) {
            0 => true,
            1 => {
                if !self.started {
                    self.started = true;
                    self.cpu0 = thread_cpu();
                    self.base = Meas {
                        packets: self.packets,
                        allocs: thread_allocs(),
                        ..Meas::default()
                    };
                }
                true
            }
            _ => false,
        }
    }
    #[inline]
    fn seen(&mut self, seq: u64) {
        self.packets += 1;
        self.checksum = self.checksum.wrapping_add(seq);
    }
    fn finish(self) -> Meas {
        let (u1, s1) = thread_cpu();
        let allocs = thread_allocs();
        if !self.started {
            return Meas::default();
        }
        Meas {
            packets: self.packets - self.base.packets,
            user_ns: (u1 - self.cpu0.0).as_nanos() as u64,
            sys_ns: (s1 - self.cpu0.1).as_nanos() as u64,
            allocs: allocs - self.base.allocs,
            checksum: self.checksum,
        }
    }
}

/// `n` objects of `N` bytes at a stride of `N`: one UMEM frame each.
fn pool<const N: usize>(n: u32) -> Arc<idxpool::Pool<[u8; N]>> {
    Arc::new(
        PoolBuilder::<[u8; N]>::zeroed(n)
            .stride(StrideMode::Natural)
            .build()
            .expect("pool"),
    )
}

#[inline(never)]
fn receiver_xdp<const N: usize>(ifname: &str, ph: &Phase) -> Result<Meas, String> {
    let p = pool::<N>(4096);
    let mut cfg = XdpConfig::new(ifname);
    cfg.fill_size = 2048;
    cfg.rx_size = 2048;
    cfg.mode = match MODE.load(Ordering::Relaxed) {
        1 => XdpMode::Drv,
        2 => XdpMode::Auto,
        _ => XdpMode::Skb,
    };
    let mut xsk = XdpSocket::new(p, &cfg).map_err(|e| e.to_string())?;
    let mut frames = Vec::with_capacity(256);
    let mut w = Window::new();
    let block = wait_mode() == Wait::Block;
    while w.tick(ph) {
        let wait = block.then_some(Duration::from_millis(10));
        if xsk.poll(&mut frames, wait).map_err(|e| e.to_string())? == 0 && !block {
            nap();
        }
        for f in &frames {
            w.seen(seq_of(xsk.bytes(f)).unwrap_or(0));
        }
        xsk.put_frames(&mut frames);
    }
    let m = w.finish();
    let s = xsk.stats();
    if s.bad_descriptors > 0 {
        return Err(format!("xdp: {} bad descriptors", s.bad_descriptors));
    }
    Ok(m)
}

type BufPool = idxpool::Pool<idxpool::PacketBuf>;

/// Packet buffers of `frame_bytes()` (16-byte header + the room): one AF_XDP frame each.
fn buf_pool(n: u32) -> Arc<BufPool> {
    Arc::new(
        PoolBuilder::packet_bufs(n, frame_bytes() - 16, 0)
            .stride(StrideMode::Natural)
            .build()
            .expect("packet buffer pool"),
    )
}

/// The XDP hook `--mode` chose.
fn xdp_mode() -> XdpMode {
    match MODE.load(Ordering::Relaxed) {
        1 => XdpMode::Drv,
        2 => XdpMode::Auto,
        _ => XdpMode::Skb,
    }
}

/// Frame headroom of the packet-buffer sockets: 16 (header) + 48 + 256 (the kernel's) puts
/// the packet at object byte 320, on a cache line, as the `[u8; 2048]` pool's at 256.
const BUF_FRAME_HEADROOM: u32 = 48;

#[inline(never)]
fn receiver_xdpbuf(ifname: &str, ph: &Phase) -> Result<Meas, String> {
    let p = buf_pool(4096);
    let mut cfg = XdpConfig::new(ifname);
    cfg.fill_size = 2048;
    cfg.rx_size = 2048;
    cfg.frame_headroom = BUF_FRAME_HEADROOM;
    cfg.mode = xdp_mode();
    let mut xsk = XdpSocket::new(p.clone(), &cfg).map_err(|e| e.to_string())?;
    let mut frames = Vec::with_capacity(256);
    let mut w = Window::new();
    let block = wait_mode() == Wait::Block;
    while w.tick(ph) {
        let wait = block.then_some(Duration::from_millis(10));
        if xsk.poll(&mut frames, wait).map_err(|e| e.to_string())? == 0 && !block {
            nap();
        }
        for f in &frames {
            // The packet as the buffer's header describes it.
            w.seen(seq_of(p.get_ref(&f.handle).as_slice()).unwrap_or(0));
        }
        xsk.put_frames(&mut frames);
    }
    let m = w.finish();
    let s = xsk.stats();
    if s.bad_descriptors > 0 {
        return Err(format!("xdpbuf: {} bad descriptors", s.bad_descriptors));
    }
    Ok(m)
}

#[inline(never)]
fn receiver_fwd(ifname: &str, ph: &Phase, recycle: bool) -> Result<Meas, String> {
    let p = buf_pool(4096);
    let mut cfg = XdpConfig::new(ifname);
    cfg.fill_size = 2048;
    cfg.rx_size = 2048;
    cfg.tx = true;
    cfg.recycle_tx = recycle;
    cfg.frame_headroom = BUF_FRAME_HEADROOM;
    cfg.mode = xdp_mode();
    let mut xsk = XdpSocket::new(p.clone(), &cfg).map_err(|e| e.to_string())?;
    let mut frames = Vec::with_capacity(256);
    let mut bufs = Vec::with_capacity(256);
    let mut w = Window::new();
    let block = wait_mode() == Wait::Block;
    while w.tick(ph) {
        let wait = block.then_some(Duration::from_millis(10));
        if xsk.poll(&mut frames, wait).map_err(|e| e.to_string())? == 0 && !block {
            nap();
        }
        for mut f in frames.drain(..) {
            let b = p.get_mut(&mut f.handle);
            w.seen(seq_of(b).unwrap_or(0));
            b.copy_within(6..12, 0); // back to the sender
            bufs.push(f.handle);
        }
        if !bufs.is_empty() {
            xsk.transmit_bufs(&mut bufs).map_err(|e| e.to_string())?;
            // The TX ring full: the rest are dropped (back to the pool).
            for h in bufs.drain(..) {
                xsk.put(h);
            }
        }
    }
    let m = w.finish();
    let s = xsk.stats();
    if s.bad_descriptors > 0 {
        return Err(format!("fwd: {} bad descriptors", s.bad_descriptors));
    }
    if recycle && s.tx_recycled == 0 && s.tx_completed > 0 {
        return Err("fwd: recycling on, nothing recycled".into());
    }
    Ok(m)
}

#[inline(never)]
fn receiver_vec(ifname: &str, ph: &Phase) -> Result<Meas, String> {
    const B: usize = 64;
    let s = PacketSock::new(ifname, 4 << 20)?;
    s.set_timeout(Duration::from_millis(10));
    let mut bufs = vec![[0u8; 2048]; B];
    let mut iov: Vec<libc::iovec> = bufs
        .iter_mut()
        .map(|b| libc::iovec {
            iov_base: b.as_mut_ptr().cast(),
            iov_len: b.len(),
        })
        .collect();
    // SAFETY: zeroed mmsghdrs are valid; each points at one iovec below.
    let mut msgs: Vec<libc::mmsghdr> = (0..B).map(|_| unsafe { std::mem::zeroed() }).collect();
    for (m, v) in msgs.iter_mut().zip(iov.iter_mut()) {
        m.msg_hdr.msg_iov = v;
        m.msg_hdr.msg_iovlen = 1;
    }
    let mut w = Window::new();
    let flags = match wait_mode() {
        Wait::Block => libc::MSG_WAITFORONE,
        Wait::Sleep => libc::MSG_DONTWAIT,
    };
    while w.tick(ph) {
        // SAFETY: msgs and their iovecs point into `bufs`, alive and unmoved. Blocking: the
        // first receive waits (SO_RCVTIMEO bounds it), the rest of the batch does not.
        let n = unsafe {
            libc::recvmmsg(
                s.fd(),
                msgs.as_mut_ptr(),
                B as u32,
                flags,
                std::ptr::null_mut(),
            )
        };
        if n <= 0 && flags == libc::MSG_DONTWAIT {
            nap();
        }
        for k in 0..n.max(0) as usize {
            let len = msgs[k].msg_len as usize;
            let v: Vec<u8> = bufs[k][..len].to_vec(); // the copy the application keeps
            w.seen(seq_of(&v).unwrap_or(0));
            drop(std::hint::black_box(v));
        }
    }
    Ok(w.finish())
}

#[inline(never)]
fn receiver_uring<const N: usize>(ifname: &str, ph: &Phase) -> Result<Meas, String> {
    let s = PacketSock::new(ifname, 4 << 20)?;
    let p = pool::<N>(4096);
    let cfg = RxConfig {
        wait_batch: 32,
        ..RxConfig::default()
    };
    let mut rx = UringRx::new(p.clone(), cfg).map_err(|e| e.to_string())?;
    rx.recv_multishot(s.fd()).map_err(|e| e.to_string())?;
    let mut packets = Vec::with_capacity(1024);
    let mut back = Vec::with_capacity(1024);
    let mut w = Window::new();
    let block = wait_mode() == Wait::Block;
    while w.tick(ph) {
        let wait = block.then_some(Duration::from_millis(10));
        if rx.poll(&mut packets, wait).map_err(|e| e.to_string())? == 0 && !block {
            nap();
        }
        for pk in packets.drain(..) {
            w.seen(seq_of(rx.bytes(&pk)).unwrap_or(0));
            back.push(pk.handle);
        }
        p.put_bulk(&mut back);
    }
    let m = w.finish();
    drop(rx);
    drop(s);
    Ok(m)
}

#[inline(never)]
fn receiver_uringbuf(ifname: &str, ph: &Phase) -> Result<Meas, String> {
    let s = PacketSock::new(ifname, 4 << 20)?;
    let p = buf_pool(4096);
    // Data at room byte 48, object byte 64: on a cache line, as the Pod pool's at 0.
    let cfg = RxConfig {
        wait_batch: 32,
        headroom: 48,
        ..RxConfig::default()
    };
    let mut rx = UringRx::new(p.clone(), cfg).map_err(|e| e.to_string())?;
    rx.recv_multishot(s.fd()).map_err(|e| e.to_string())?;
    let mut packets = Vec::with_capacity(1024);
    let mut back = Vec::with_capacity(1024);
    let mut w = Window::new();
    let block = wait_mode() == Wait::Block;
    while w.tick(ph) {
        let wait = block.then_some(Duration::from_millis(10));
        if rx.poll(&mut packets, wait).map_err(|e| e.to_string())? == 0 && !block {
            nap();
        }
        for pk in packets.drain(..) {
            // The packet as the buffer's header describes it.
            w.seen(seq_of(p.get_ref(&pk.handle).as_slice()).unwrap_or(0));
            back.push(pk.handle);
        }
        p.put_bulk(&mut back);
    }
    let m = w.finish();
    drop(rx);
    drop(s);
    Ok(m)
}

// ---- the sender -------------------------------------------------------------------------------

/// Floods `b` (in the namespace) with `size`-byte frames to `dst` until `stop`; counts them.
fn sender(
    lab: &Lab,
    size: usize,
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicU64>,
) -> std::thread::JoinHandle<Result<(), String>> {
    const N: usize = 32;
    let (b, dst, src) = (lab.b.clone(), lab.mac_a, lab.mac_b);
    lab.in_ns(move || {
        let s = PacketSock::new(&b, 0).expect("sender socket");
        let mut bufs: Vec<Vec<u8>> = (0..N as u64).map(|k| frame(dst, src, k, size)).collect();
        let mut iov: Vec<libc::iovec> = bufs
            .iter_mut()
            .map(|f| libc::iovec {
                iov_base: f.as_mut_ptr().cast(),
                iov_len: f.len(),
            })
            .collect();
        // SAFETY: zeroed mmsghdrs are valid; each points at one iovec.
        let mut msgs: Vec<libc::mmsghdr> = (0..N).map(|_| unsafe { std::mem::zeroed() }).collect();
        for (m, v) in msgs.iter_mut().zip(iov.iter_mut()) {
            m.msg_hdr.msg_iov = v;
            m.msg_hdr.msg_iovlen = 1;
        }
        let mut seq = 0u64;
        while !stop.load(Ordering::Relaxed) {
            for f in bufs.iter_mut() {
                f[14..22].copy_from_slice(&seq.to_le_bytes());
                seq += 1;
            }
            // SAFETY: msgs and their iovecs point into `bufs`, alive and unmoved here.
            let r = unsafe { libc::sendmmsg(s.fd(), msgs.as_mut_ptr(), N as u32, 0) };
            if r > 0 {
                sent.fetch_add(r as u64, Ordering::Relaxed);
            } else {
                std::thread::yield_now();
            }
        }
    })
}

// ---- cells and report -------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, Default)]
struct Cell {
    pps: f64,
    user: f64,
    sys: f64,
    proc_ns: f64,
    drops: f64,
    allocs: f64,
}

impl Cell {
    fn rx_ns(&self) -> f64 {
        self.user + self.sys
    }
}

fn receive(rx: Rx, ifname: &str, ph: &Phase) -> Result<Meas, String> {
    match rx {
        Rx::Xdp if FRAME_ODD.load(Ordering::Relaxed) => receiver_xdp::<2112>(ifname, ph),
        Rx::Xdp => receiver_xdp::<2048>(ifname, ph),
        Rx::Vec => receiver_vec(ifname, ph),
        Rx::Uring if FRAME_ODD.load(Ordering::Relaxed) => receiver_uring::<2112>(ifname, ph),
        Rx::Uring => receiver_uring::<2048>(ifname, ph),
        Rx::XdpBuf => receiver_xdpbuf(ifname, ph),
        Rx::UringBuf => receiver_uringbuf(ifname, ph),
        Rx::Fwd => receiver_fwd(ifname, ph, false),
        Rx::FwdRecycle => receiver_fwd(ifname, ph, true),
    }
}

fn run(rx: Rx, ifname: &str, secs: f64, sent: &AtomicU64) -> Result<Cell, String> {
    let ph = Arc::new(Phase {
        phase: std::sync::atomic::AtomicU8::new(0),
    });
    let name = ifname.to_string();
    let ph2 = ph.clone();
    let h = std::thread::spawn(move || receive(rx, &name, &ph2));
    std::thread::sleep(Duration::from_secs_f64((secs * 0.3).max(0.1))); // set-up and warm-up
    if h.is_finished() {
        return h
            .join()
            .unwrap()
            .map(|_| Cell::default())
            .and(Err("receiver ended early".into()));
    }
    let (pu0, ps0) = process_cpu();
    let s0 = sent.load(Ordering::Relaxed);
    let t0 = Instant::now();
    ph.phase.store(1, Ordering::SeqCst);
    std::thread::sleep(Duration::from_secs_f64(secs));
    ph.phase.store(2, Ordering::SeqCst);
    let wall = t0.elapsed().as_secs_f64();
    let s1 = sent.load(Ordering::Relaxed);
    let (pu1, ps1) = process_cpu();
    let m = h.join().map_err(|_| "receiver panicked".to_string())??;
    std::hint::black_box(m.checksum);
    let got = m.packets.max(1) as f64;
    let offered = (s1 - s0) as f64;
    Ok(Cell {
        pps: m.packets as f64 / wall,
        user: m.user_ns as f64 / got,
        sys: m.sys_ns as f64 / got,
        proc_ns: ((pu1 - pu0) + (ps1 - ps0)).as_nanos() as f64 / got,
        drops: if offered > 0.0 {
            (1.0 - m.packets as f64 / offered).max(0.0)
        } else {
            0.0
        },
        allocs: m.allocs as f64 / got,
    })
}

/// The packet-buffer cell `--buffers` measures against baseline `base`.
fn variant_of(base: &str) -> &'static str {
    match base {
        "xdp" => "xdpbuf",
        "uring" => "uringbuf",
        _ => "fwdrec",
    }
}

/// `--buffers`' ratios: each variant against its baseline, with the baseline's A/A, as
/// medians of per-round ratios (the receiving thread's CPU, user + system).
fn report_buffers(rounds: &[std::collections::HashMap<&str, Cell>], uring_ok: bool) {
    let ratio =
        |a: &str, b: &str| median(rounds.iter().map(|r| r[a].rx_ns() / r[b].rx_ns()).collect());
    let mut pairs = vec![("xdpbuf", "xdp", "xdp'"), ("fwdrec", "fwd", "fwd'")];
    if uring_ok {
        pairs.insert(1, ("uringbuf", "uring", "uring'"));
    }
    println!();
    for (v, base, aa) in pairs {
        if !rounds.first().is_some_and(|r| r.contains_key(v)) {
            continue; // `--pair` ran another triple
        }
        println!(
            "{v}/{base}: receiving-thread CPU per packet {:.3} (A/A {base}'/{base} {:.3}; \
             {base}'s median of both: {:.3})",
            ratio(v, base),
            ratio(aa, base),
            median(
                rounds
                    .iter()
                    .map(|r| 2.0 * r[v].rx_ns() / (r[base].rx_ns() + r[aa].rx_ns()))
                    .collect()
            ),
        );
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mut secs, mut reps, mut size) = (0.5f64, 7usize, 64usize);
    let mut only: Option<Rx> = None;
    let mut buffers = false;
    let mut pair: Option<String> = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut num = |what: &str| -> f64 {
            it.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{what} needs a number"))
        };
        match a.as_str() {
            "-h" | "--help" => {
                print!("{HELP}");
                return;
            }
            "--quick" => {
                secs = 0.3;
                reps = 1;
            }
            "--secs" => secs = num("--secs"),
            "--reps" => reps = num("--reps") as usize,
            "--size" => size = (num("--size") as usize).clamp(60, 1514),
            "--block" => WAIT_BLOCK.store(true, Ordering::Relaxed),
            "--only" => {
                only = Some(match it.next().map(String::as_str) {
                    Some("xdp") => Rx::Xdp,
                    Some("vec") => Rx::Vec,
                    Some("uring") => Rx::Uring,
                    Some("xdpbuf") => Rx::XdpBuf,
                    Some("uringbuf") => Rx::UringBuf,
                    Some("fwd") => Rx::Fwd,
                    Some("fwdrec") => Rx::FwdRecycle,
                    other => {
                        eprintln!("--only xdp|vec|uring|xdpbuf|uringbuf|fwd|fwdrec, not {other:?}");
                        std::process::exit(2);
                    }
                })
            }
            "--buffers" => buffers = true,
            "--pair" => match it.next().map(String::as_str) {
                Some(b @ ("xdp" | "uring" | "fwd")) => pair = Some(b.to_string()),
                other => {
                    eprintln!("--pair xdp|uring|fwd, not {other:?}");
                    std::process::exit(2);
                }
            },
            "--packets" => CAP.store(num("--packets") as u64, Ordering::Relaxed),
            "--sleep-us" => SLEEP_US.store(num("--sleep-us") as u64, Ordering::Relaxed),
            "--frame" => match it.next().map(String::as_str) {
                Some("2048") => FRAME_ODD.store(false, Ordering::Relaxed),
                Some("2112") => FRAME_ODD.store(true, Ordering::Relaxed),
                other => {
                    eprintln!("--frame 2048|2112, not {other:?}");
                    std::process::exit(2);
                }
            },
            "--mode" => {
                let m = match it.next().map(String::as_str) {
                    Some("skb") => 0,
                    Some("drv") => 1,
                    Some("auto") => 2,
                    other => {
                        eprintln!("--mode skb|drv|auto, not {other:?}");
                        std::process::exit(2);
                    }
                };
                MODE.store(m, Ordering::Relaxed);
            }
            other => {
                eprintln!("unknown argument {other}\n{HELP}");
                std::process::exit(2);
            }
        }
    }
    if let Err(why) = idxpool::xdp::available() {
        println!("xdp_rx skipped: {why}");
        return;
    }
    let lab = match Lab::up(&format!("xr{}", std::process::id() % 100_000)) {
        Ok(l) => l,
        Err(why) => {
            println!("xdp_rx skipped: cannot make a veth pair: {why}");
            return;
        }
    };
    // Can an XDP socket be bound here at all (program attach, UMEM registration)?
    if let Err(e) = XdpSocket::new(pool::<2048>(64), &XdpConfig::new(&lab.a)) {
        println!(
            "xdp_rx skipped: the kernel refuses an AF_XDP socket on {}: {e}",
            lab.a
        );
        return;
    }
    let uring_ok = match idxpool::uring::available() {
        Ok(()) => true,
        Err(why) => {
            println!("uring cells skipped: {why}");
            false
        }
    };
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_default();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "xdp_rx: {size}-byte frames, {reps} round(s) of {secs} s cells; veth {} <-> {} (netns {}); \
         {cpu}; load {}",
        lab.a,
        lab.b,
        lab.ns,
        load.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
    );
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let snd = sender(&lab, size, stop.clone(), sent.clone());
    if let Some(rx) = only {
        // One receiver for `--packets` packets, measured from its first: for instruction
        // counts (run under callgrind twice with two counts; the difference divided by the
        // difference of counts is the loop's cost per packet, set-up excluded).
        let ph = Phase {
            phase: std::sync::atomic::AtomicU8::new(1),
        };
        let r = receive(rx, &lab.a, &ph);
        stop.store(true, Ordering::Relaxed);
        let _ = snd.join();
        match r {
            Ok(m) => println!("{rx:?}: {} packets, {} allocations", m.packets, m.allocs),
            Err(e) => println!("{rx:?} failed: {e}"),
        }
        return;
    }

    // Cells: xdp, vec, uring, vec' (A/A of vec), xdp' (A/A of xdp); order rotated per round.
    // `--buffers`: the packet-buffer receivers against today's, and the reflector with and
    // without recycling, each with its A/A.
    let mut order: Vec<(&str, Rx)> = if buffers {
        vec![
            ("xdp", Rx::Xdp),
            ("xdpbuf", Rx::XdpBuf),
            ("xdp'", Rx::Xdp),
            ("uring", Rx::Uring),
            ("uringbuf", Rx::UringBuf),
            ("uring'", Rx::Uring),
            ("fwd", Rx::Fwd),
            ("fwdrec", Rx::FwdRecycle),
            ("fwd'", Rx::Fwd),
        ]
    } else {
        vec![
            ("xdp", Rx::Xdp),
            ("vec", Rx::Vec),
            ("uring", Rx::Uring),
            ("vec'", Rx::Vec),
            ("xdp'", Rx::Xdp),
        ]
    };
    if !uring_ok {
        order.retain(|(_, r)| !matches!(*r, Rx::Uring | Rx::UringBuf));
    }
    if let (true, Some(base)) = (buffers, &pair) {
        // One baseline, its variant and its A/A: three cells a round, so more rounds fit.
        let keep = [
            base.clone(),
            format!("{base}'"),
            variant_of(base).to_string(),
        ];
        order.retain(|(n, _)| keep.iter().any(|k| k == n));
    }
    let names: Vec<&str> = order.iter().map(|(n, _)| *n).collect();
    let mut rounds: Vec<std::collections::HashMap<&str, Cell>> = Vec::new();
    for rep in 0..reps {
        let mut round = std::collections::HashMap::new();
        for k in 0..order.len() {
            let (name, rx) = order[(k + rep) % order.len()];
            match run(rx, &lab.a, secs, &sent) {
                Ok(c) => {
                    round.insert(name, c);
                }
                Err(e) => {
                    println!("cell {name} failed: {e}");
                    stop.store(true, Ordering::Relaxed);
                    let _ = snd.join();
                    drop(lab);
                    std::process::exit(1);
                }
            }
        }
        rounds.push(round);
    }
    stop.store(true, Ordering::Relaxed);
    let _ = snd.join();

    println!(
        "\n{:<7} {:>10} {:>9} {:>9} {:>9} {:>10} {:>7} {:>8}",
        "rx", "pps", "user ns", "sys ns", "rx ns", "process ns", "drops", "allocs"
    );
    println!(
        "{:<7} {:>10} {:>9} {:>9} {:>9} {:>10} {:>7} {:>8}",
        "", "", "/pkt", "/pkt", "/pkt", "/pkt", "", "/pkt"
    );
    let med =
        |name: &str, f: &dyn Fn(&Cell) -> f64| median(rounds.iter().map(|r| f(&r[name])).collect());
    for n in &names {
        println!(
            "{:<7} {:>10.0} {:>9.0} {:>9.0} {:>9.0} {:>10.0} {:>6.1}% {:>8.3}",
            n,
            med(n, &|c| c.pps),
            med(n, &|c| c.user),
            med(n, &|c| c.sys),
            med(n, &|c| c.rx_ns()),
            med(n, &|c| c.proc_ns),
            100.0 * med(n, &|c| c.drops),
            med(n, &|c| c.allocs),
        );
    }
    if buffers {
        report_buffers(&rounds, uring_ok);
        drop(lab);
        return;
    }
    // Ratios side by side: per round, then the median.
    let ratio = |a: &str, b: &str, f: &dyn Fn(&Cell) -> f64| {
        median(rounds.iter().map(|r| f(&r[a]) / f(&r[b])).collect())
    };
    // The user/system split of getrusage is sampled at the scheduler tick (only the sum is
    // exact): user-space ratios are taken on the means over rounds, not per-round ratios.
    let mean_ratio = |a: &str, b: &str, f: &dyn Fn(&Cell) -> f64| {
        let m = |n: &str| rounds.iter().map(|r| f(&r[n])).sum::<f64>() / rounds.len() as f64;
        m(a) / m(b)
    };
    let aa = |a: &str, b: &str, f: &dyn Fn(&Cell) -> f64| {
        median(
            rounds
                .iter()
                .map(|r| (f(&r[a]) / f(&r[b]) - 1.0).abs())
                .collect(),
        )
    };
    let rx_ns = |c: &Cell| c.rx_ns();
    let user = |c: &Cell| c.user;
    let proc_ns = |c: &Cell| c.proc_ns;
    let pps = |c: &Cell| c.pps;
    println!();
    println!(
        "ratios (median of per-round ratios): xdp/vec receiving-thread CPU per packet {:.3} \
         (A/A vec/vec' {:.1}%, xdp/xdp' {:.1}%); process CPU per packet {:.3} (A/A {:.1}%); \
         packets/s {:.2}x (A/A {:.1}%)",
        ratio("xdp", "vec", &rx_ns),
        100.0 * aa("vec", "vec'", &rx_ns),
        100.0 * aa("xdp", "xdp'", &rx_ns),
        ratio("xdp", "vec", &proc_ns),
        100.0 * aa("vec", "vec'", &proc_ns),
        ratio("xdp", "vec", &pps),
        100.0 * aa("vec", "vec'", &pps),
    );
    if uring_ok {
        println!(
            "ratios: uring/vec user-space CPU per packet {:.3} (means over rounds; A/A vec/vec' \
             {:.1}%); receiving-thread CPU per packet {:.3} (A/A {:.1}%); process CPU per packet \
             {:.3}",
            mean_ratio("uring", "vec", &user),
            100.0 * (mean_ratio("vec", "vec'", &user) - 1.0).abs(),
            ratio("uring", "vec", &rx_ns),
            100.0 * aa("vec", "vec'", &rx_ns),
            ratio("uring", "vec", &proc_ns),
        );
    }
    // The verdict compares medians, as udp_rx does: each side is the mean of its two
    // identical cells' medians (xdp and xdp', vec and vec'), and each A/A is how far apart
    // those two medians are.
    let pair = |a: &str, b: &str, f: &dyn Fn(&Cell) -> f64| {
        let (x, y) = (med(a, f), med(b, f));
        ((x + y) / 2.0, (x - y).abs() / ((x + y) / 2.0))
    };
    let (xdp_ns, aa_xdp) = pair("xdp", "xdp'", &rx_ns);
    let (vec_ns, aa_vec) = pair("vec", "vec'", &rx_ns);
    let x = xdp_ns / vec_ns;
    let noise = aa_xdp.max(aa_vec);
    let (xdp_p, aa_xdp_p) = pair("xdp", "xdp'", &proc_ns);
    let (vec_p, aa_vec_p) = pair("vec", "vec'", &proc_ns);
    println!(
        "medians: xdp {xdp_ns:.0} ns, vec {vec_ns:.0} ns of receiving-thread CPU per packet \
         (A/A xdp/xdp' {:.1}%, vec/vec' {:.1}%); process CPU per packet xdp {xdp_p:.0} ns, vec \
         {vec_p:.0} ns: {:.3}x (A/A {:.1}%, {:.1}%)",
        100.0 * aa_xdp,
        100.0 * aa_vec,
        xdp_p / vec_p,
        100.0 * aa_xdp_p,
        100.0 * aa_vec_p,
    );
    println!(
        "verdict: AF_XDP with the pool as UMEM spends {x:.2}x the Vec-per-packet AF_PACKET \
         receiver's CPU per packet on the receiving thread (target <= 0.5: {}; A/A {:.1}%, \
         target <= 10%: {}), {:.3} heap allocations per packet (target 0: {})",
        if x <= 0.5 { "met" } else { "not met" },
        100.0 * noise,
        if noise <= 0.10 { "met" } else { "not met" },
        med("xdp", &|c| c.allocs),
        if med("xdp", &|c| c.allocs) == 0.0 {
            "met"
        } else {
            "not met"
        },
    );
    if uring_ok {
        let u = mean_ratio("uring", "vec", &user);
        if u.is_finite() {
            println!(
                "verdict: the io_uring receiver spends {u:.2}x the Vec path's user-space CPU per \
                 packet (target <= 0.5: {})",
                if u <= 0.5 { "met" } else { "not met" }
            );
        } else {
            println!(
                "verdict: user-space CPU per packet not measurable in windows this short (the \
                 tick-sampled user time of the Vec receiver was 0): run more or longer rounds"
            );
        }
    }
    drop(lab);
}
