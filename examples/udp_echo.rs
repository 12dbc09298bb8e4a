//! A UDP echo server over pool buffers: a receiver thread fills `Pool<PacketBuf>` buffers
//! from a real socket (`recv_from` into the tailroom, `append` of the received length, the
//! sender's address written into the headroom with `prepend`) and passes each buffer's 4-byte
//! handle through a `HandleChannel` to a worker thread, which strips the address and echoes the
//! data back with `send_to`. A client sends N datagrams (a window in flight) and checks every
//! echo byte for byte.
//!
//! The same program is written two more ways, as a user would without packet buffers, and the
//! three run side by side in one run with an A/A pair:
//!
//! * `packetbuf`: `Pool<PacketBuf>` + `HandleChannel`; length and address in the buffer;
//! * `beside`: `Pool<[u8]>` + `std::sync::mpsc::sync_channel` of `(handle, len, SocketAddr)`:
//!   the length (and the address) kept beside the handle;
//! * `vec`: a `Vec<u8>` per datagram (`vec![0; 2048]`, truncated to the length) +
//!   `sync_channel` of `(Vec<u8>, SocketAddr)`.
//!
//! Prints, per variant, the server's CPU time per packet (receiver + worker threads, from
//! `CLOCK_THREAD_CPUTIME_ID`: user and kernel, so the four system calls per echo dominate),
//! its user-space part (`getrusage(RUSAGE_THREAD)`, tick-sampled), heap allocations per packet
//! (a counting global allocator, whole process while the client runs; the client allocates
//! nothing per packet), echoes per second, medians over the repetitions, and the ratios
//! against `beside` with the A/A (`packetbuf` twice). For user-space instructions per packet,
//! run one variant under callgrind (`--only`, BENCHMARKS.md "UDP echo").
//!
//! `cargo run --release --example udp_echo -- --quick`; `cargo test --example udp_echo` runs
//! every variant on loopback and checks every echo and every buffer.

use std::alloc::{GlobalAlloc, Layout, System};
use std::error::Error;
use std::io::ErrorKind;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV6, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::sync_channel;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use idxpool::packet::{RoomError, DEFAULT_HEADROOM};
use idxpool::{Handle, HandleChannel, PacketBuf, Pool, PoolBuilder};

const HELP: &str = "\
udp_echo: a UDP echo server on loopback (receiver thread -> worker thread), three ways side by
side in one run with an A/A pair:
  packetbuf   Pool<PacketBuf> buffers (length and sender address in the buffer) + HandleChannel
  beside      Pool<[u8]> buffers + sync_channel of (handle, len, SocketAddr)
  vec         a Vec<u8> per datagram + sync_channel of (Vec<u8>, SocketAddr)
  packetbuf2  packetbuf again (the A/A pair)
A client sends N datagrams, at most --window in flight, and checks every echo byte for byte.
Per variant: server CPU ns per packet (receiver + worker, thread CPU time, user + kernel),
its user part (getrusage, tick-sampled), heap allocations per packet (whole process while the
client runs), echoes/s; medians over the repetitions, ratios to beside, the A/A spread.

usage: udp_echo [--quick] [--packets N] [--reps R] [--sizes 64,1500] [--window W]
                [--only VARIANT] [--help]
  --quick     2000 packets, 3 reps, sizes 64 and 1500: about 1 s
  --packets   datagrams per variant and repetition (default 40000)
  --reps      repetitions, the variants in a rotated order each time (default 5)
  --sizes     datagram sizes, 8..=1500; 0 = mixed sizes 8..=1500 (default 64,1500)
  --window    datagrams in flight (default 32)
  --only      one variant, once per size (for callgrind: see BENCHMARKS.md)
Default run: about 14 s on a quiet 2-vCPU machine. Fails (exit 1) if an echo is missing or
differs, or a pool does not get every buffer back.
";

// ---- counting allocator -----------------------------------------------------------------------

struct Counting;
static ALLOCS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
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

// ---- time -------------------------------------------------------------------------------------

/// CPU time of the calling thread, user and kernel (exact).
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to write.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// User-space CPU time of the calling thread (getrusage(RUSAGE_THREAD)): the kernel splits
/// the exact total by samples at the scheduler tick, so it is exact only over many ticks.
fn thread_user_ns() -> u64 {
    // SAFETY: a zeroed rusage is valid output space; RUSAGE_THREAD is the calling thread.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    ru.ru_utime.tv_sec as u64 * 1_000_000_000 + ru.ru_utime.tv_usec as u64 * 1000
}

/// A thread's CPU time since `start`.
#[derive(Clone, Copy, Default, Debug)]
struct Cpu {
    total: u64,
    user: u64,
}

impl Cpu {
    fn now() -> Cpu {
        Cpu {
            total: thread_cpu_ns(),
            user: thread_user_ns(),
        }
    }
    fn since(self) -> Cpu {
        let n = Cpu::now();
        Cpu {
            total: n.total - self.total,
            user: n.user - self.user,
        }
    }
    fn plus(self, o: Cpu) -> Cpu {
        Cpu {
            total: self.total + o.total,
            user: self.user + o.user,
        }
    }
}

// ---- the server -------------------------------------------------------------------------------

/// The three programs (and the A/A twin of the first).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Variant {
    /// `Pool<PacketBuf>` + `HandleChannel`: length and sender address in the buffer.
    PacketBuf,
    /// `Pool<[u8]>` + `sync_channel` of `(handle, len, SocketAddr)`.
    Beside,
    /// `Vec<u8>` per datagram + `sync_channel` of `(Vec<u8>, SocketAddr)`.
    Vec,
    /// `PacketBuf` again: the A/A pair.
    PacketBuf2,
}

const ALL: [Variant; 4] = [
    Variant::PacketBuf,
    Variant::Beside,
    Variant::Vec,
    Variant::PacketBuf2,
];

impl Variant {
    fn name(self) -> &'static str {
        match self {
            Variant::PacketBuf => "packetbuf",
            Variant::Beside => "beside",
            Variant::Vec => "vec",
            Variant::PacketBuf2 => "packetbuf2",
        }
    }
}

/// Buffer room: headroom + data + tailroom (the data room of a `Pool<[u8]>` buffer and of a
/// `Vec`: the same 2048 bytes).
const ROOM: usize = 2048;
/// How long the receiver waits in `recv_from` before it looks at the stop flag.
const POLL: Duration = Duration::from_millis(10);

/// What the server reports when it stops.
#[derive(Debug)]
pub struct ServerReport {
    /// Datagrams echoed by the worker.
    pub echoed: u64,
    /// Datagrams received but not echoed (a failed `send_to`, a buffer that could not take
    /// the address): 0 on loopback.
    pub dropped: u64,
    /// CPU of the receiver and the worker threads, from the start of their loops.
    cpu: Cpu,
    /// `(available, in_use, capacity)` of the pool after both threads ended (`None` for `vec`).
    pub pool: Option<(usize, usize, usize)>,
}

/// A running server: its address and how to stop it.
pub struct Server {
    /// Where the client sends.
    pub addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: JoinHandle<ServerReport>,
}

impl Server {
    /// Binds 127.0.0.1 on a free port and starts the receiver and worker threads of `v`
    /// with a pool of `buffers` buffers (the `sync_channel`s are bounded to `buffers` too).
    pub fn start(v: Variant, buffers: u32) -> Result<Server, Box<dyn Error>> {
        let sock = UdpSocket::bind("127.0.0.1:0")?;
        sock.set_read_timeout(Some(POLL))?;
        let addr = sock.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = match v {
            Variant::PacketBuf | Variant::PacketBuf2 => serve_packetbuf(sock, s, buffers)?,
            Variant::Beside => serve_beside(sock, s, buffers)?,
            Variant::Vec => serve_vec(sock, s, buffers)?,
        };
        Ok(Server { addr, stop, thread })
    }

    /// Stops the receiver (within [`POLL`]), lets the worker drain the channel, joins both.
    pub fn stop(self) -> ServerReport {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().expect("server thread")
    }
}

fn timed_out(e: &std::io::Error) -> bool {
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
}

/// Bytes of the sender's address in the headroom: family, 0, port, then the IP (and for IPv6
/// the flow info and scope id).
const ADDR_V4: usize = 8;
const ADDR_V6: usize = 28;

/// Writes `a` in front of the data (into the headroom), as a header the worker strips.
///
/// # Errors
/// [`RoomError`] when the headroom is shorter than the address: the buffer is unchanged.
pub fn push_addr(b: &mut PacketBuf, a: SocketAddr) -> Result<(), RoomError> {
    match a {
        SocketAddr::V4(a) => {
            let h = b.prepend(ADDR_V4)?;
            h[0] = 4;
            h[1] = 0;
            h[2..4].copy_from_slice(&a.port().to_be_bytes());
            h[4..8].copy_from_slice(&a.ip().octets());
        }
        SocketAddr::V6(a) => {
            let h = b.prepend(ADDR_V6)?;
            h[0] = 6;
            h[1] = 0;
            h[2..4].copy_from_slice(&a.port().to_be_bytes());
            h[4..20].copy_from_slice(&a.ip().octets());
            h[20..24].copy_from_slice(&a.flowinfo().to_be_bytes());
            h[24..28].copy_from_slice(&a.scope_id().to_be_bytes());
        }
    }
    Ok(())
}

/// Reads and strips the address [`push_addr`] wrote; `None` (buffer unchanged) when the data
/// does not start with one.
pub fn pop_addr(b: &mut PacketBuf) -> Option<SocketAddr> {
    let d = b.as_slice();
    let port = |d: &[u8]| u16::from_be_bytes([d[2], d[3]]);
    let (a, n) = match d.first()? {
        4 if d.len() >= ADDR_V4 => {
            let ip: [u8; 4] = d[4..8].try_into().ok()?;
            (
                SocketAddr::new(IpAddr::V4(Ipv4Addr::from(ip)), port(d)),
                ADDR_V4,
            )
        }
        6 if d.len() >= ADDR_V6 => {
            let ip: [u8; 16] = d[4..20].try_into().ok()?;
            let flow = u32::from_be_bytes(d[20..24].try_into().ok()?);
            let scope = u32::from_be_bytes(d[24..28].try_into().ok()?);
            (
                SocketAddr::V6(SocketAddrV6::new(Ipv6Addr::from(ip), port(d), flow, scope)),
                ADDR_V6,
            )
        }
        _ => return None,
    };
    b.strip_front(n).ok()?;
    Some(a)
}

type PbPool = Arc<Pool<PacketBuf>>;

fn serve_packetbuf(
    sock: UdpSocket,
    stop: Arc<AtomicBool>,
    buffers: u32,
) -> Result<JoinHandle<ServerReport>, Box<dyn Error>> {
    let pool: PbPool = Arc::new(
        PoolBuilder::packet_bufs(buffers, ROOM, DEFAULT_HEADROOM)
            .cache_size(32.min(buffers / 4))
            .prefault(true)
            .name("udp_echo")
            .build()?,
    );
    let (tx, rx) = HandleChannel::new(pool.clone())?;
    let out = sock.try_clone()?;
    let wpool = pool.clone();
    let worker = std::thread::spawn(move || {
        let t0 = Cpu::now();
        let (echoed, dropped) = worker_packetbuf(&wpool, &rx, &out);
        (echoed, dropped, t0.since())
    });
    Ok(std::thread::spawn(move || {
        let t0 = Cpu::now();
        let mut dropped = receiver_packetbuf(&pool, &tx, &sock, &stop);
        drop(tx); // the last sender: the worker drains the channel, then sees the disconnect
        let cpu = t0.since();
        let (echoed, wdropped, wcpu) = worker.join().expect("worker");
        dropped += wdropped;
        ServerReport {
            echoed,
            dropped,
            cpu: cpu.plus(wcpu),
            pool: Some((pool.available(), pool.in_use(), pool.capacity() as usize)),
        }
    }))
}

/// Receives into the tailroom of a fresh buffer, makes the datagram the data, writes the
/// sender's address into the headroom, sends the 4-byte handle. Returns the datagrams dropped.
#[inline(never)]
fn receiver_packetbuf(
    pool: &PbPool,
    tx: &idxpool::channel::Sender<PbPool>,
    sock: &UdpSocket,
    stop: &AtomicBool,
) -> u64 {
    let mut dropped = 0;
    let mut held: Option<Handle<PacketBuf>> = None;
    while !stop.load(Ordering::Relaxed) {
        // The implicit per-thread cache first; when the pool is dry (every buffer in flight),
        // wait for the worker's puts: the pool is the backpressure.
        let mut h = match held.take().map_or_else(|| pool.get(), Ok) {
            Ok(h) => h,
            Err(_) => match pool.get_wait(POLL) {
                Ok(h) => h,
                Err(_) => continue,
            },
        };
        let b = pool.get_mut(&mut h);
        match sock.recv_from(b.spare_mut()) {
            Ok((n, from)) => {
                // n <= spare_mut().len(): the append fits; a fresh buffer has the default
                // headroom (112 bytes), room for either address.
                if b.append(n).is_err() || push_addr(b, from).is_err() {
                    dropped += 1;
                    pool.put(h);
                    continue;
                }
                if let Err(e) = tx.send(h) {
                    dropped += 1;
                    pool.put(e.into_inner());
                }
            }
            Err(_) => held = Some(h), // a timeout (look at the stop flag) or an error
        }
    }
    if let Some(h) = held {
        pool.put(h);
    }
    dropped
}

/// Strips the address, echoes the data, gives the buffer back (the next get resets it).
#[inline(never)]
fn worker_packetbuf(
    pool: &PbPool,
    rx: &idxpool::channel::Receiver<PbPool>,
    out: &UdpSocket,
) -> (u64, u64) {
    let (mut echoed, mut dropped) = (0, 0);
    for mut h in rx {
        let b = pool.get_mut(&mut h);
        match pop_addr(b) {
            Some(to) if out.send_to(b, to).is_ok() => echoed += 1,
            _ => dropped += 1,
        }
        pool.put(h);
    }
    (echoed, dropped)
}

type BytesPool = Arc<Pool<[u8]>>;
type Beside = (Handle<[u8]>, u32, SocketAddr);

fn serve_beside(
    sock: UdpSocket,
    stop: Arc<AtomicBool>,
    buffers: u32,
) -> Result<JoinHandle<ServerReport>, Box<dyn Error>> {
    let pool: BytesPool = Arc::new(
        PoolBuilder::bytes(buffers, ROOM, 64)
            .cache_size(32.min(buffers / 4))
            .prefault(true)
            .name("udp_echo_beside")
            .build()?,
    );
    let (tx, rx) = sync_channel::<Beside>(buffers as usize);
    let out = sock.try_clone()?;
    let wpool = pool.clone();
    let worker = std::thread::spawn(move || {
        let t0 = Cpu::now();
        let (echoed, dropped) = worker_beside(&wpool, rx, &out);
        (echoed, dropped, t0.since())
    });
    Ok(std::thread::spawn(move || {
        let t0 = Cpu::now();
        let mut dropped = receiver_beside(&pool, &tx, &sock, &stop);
        drop(tx);
        let cpu = t0.since();
        let (echoed, wdropped, wcpu) = worker.join().expect("worker");
        dropped += wdropped;
        ServerReport {
            echoed,
            dropped,
            cpu: cpu.plus(wcpu),
            pool: Some((pool.available(), pool.in_use(), pool.capacity() as usize)),
        }
    }))
}

#[inline(never)]
fn receiver_beside(
    pool: &BytesPool,
    tx: &std::sync::mpsc::SyncSender<Beside>,
    sock: &UdpSocket,
    stop: &AtomicBool,
) -> u64 {
    let mut dropped = 0;
    let mut held: Option<Handle<[u8]>> = None;
    while !stop.load(Ordering::Relaxed) {
        let mut h = match held.take().map_or_else(|| pool.get(), Ok) {
            Ok(h) => h,
            Err(_) => match pool.get_wait(POLL) {
                Ok(h) => h,
                Err(_) => continue,
            },
        };
        match sock.recv_from(pool.get_mut(&mut h)) {
            Ok((n, from)) => {
                if let Err(e) = tx.send((h, n as u32, from)) {
                    dropped += 1;
                    pool.put(e.0 .0);
                }
            }
            Err(_) => held = Some(h),
        }
    }
    if let Some(h) = held {
        pool.put(h);
    }
    dropped
}

#[inline(never)]
fn worker_beside(
    pool: &BytesPool,
    rx: std::sync::mpsc::Receiver<Beside>,
    out: &UdpSocket,
) -> (u64, u64) {
    let (mut echoed, mut dropped) = (0, 0);
    for (h, len, to) in rx {
        match out.send_to(&pool.get_ref(&h)[..len as usize], to) {
            Ok(_) => echoed += 1,
            Err(_) => dropped += 1,
        }
        pool.put(h);
    }
    (echoed, dropped)
}

fn serve_vec(
    sock: UdpSocket,
    stop: Arc<AtomicBool>,
    buffers: u32,
) -> Result<JoinHandle<ServerReport>, Box<dyn Error>> {
    let (tx, rx) = sync_channel::<(Vec<u8>, SocketAddr)>(buffers as usize);
    let out = sock.try_clone()?;
    let worker = std::thread::spawn(move || {
        let t0 = Cpu::now();
        let (echoed, dropped) = worker_vec(rx, &out);
        (echoed, dropped, t0.since())
    });
    Ok(std::thread::spawn(move || {
        let t0 = Cpu::now();
        let mut dropped = receiver_vec(&tx, &sock, &stop);
        drop(tx);
        let cpu = t0.since();
        let (echoed, wdropped, wcpu) = worker.join().expect("worker");
        dropped += wdropped;
        ServerReport {
            echoed,
            dropped,
            cpu: cpu.plus(wcpu),
            pool: None,
        }
    }))
}

#[inline(never)]
fn receiver_vec(
    tx: &std::sync::mpsc::SyncSender<(Vec<u8>, SocketAddr)>,
    sock: &UdpSocket,
    stop: &AtomicBool,
) -> u64 {
    let mut dropped = 0;
    let mut held: Option<Vec<u8>> = None;
    while !stop.load(Ordering::Relaxed) {
        let mut buf = held.take().unwrap_or_else(|| vec![0u8; ROOM]);
        match sock.recv_from(&mut buf) {
            Ok((n, from)) => {
                buf.truncate(n);
                if tx.send((buf, from)).is_err() {
                    dropped += 1;
                }
            }
            Err(_) => held = Some(buf),
        }
    }
    dropped
}

#[inline(never)]
fn worker_vec(rx: std::sync::mpsc::Receiver<(Vec<u8>, SocketAddr)>, out: &UdpSocket) -> (u64, u64) {
    let (mut echoed, mut dropped) = (0, 0);
    for (buf, to) in rx {
        match out.send_to(&buf, to) {
            Ok(_) => echoed += 1,
            Err(_) => dropped += 1,
        }
    }
    (echoed, dropped)
}

// ---- the client -------------------------------------------------------------------------------

/// Datagram sizes the client sends.
#[derive(Clone, Copy, Debug)]
pub enum Sizes {
    /// Every datagram this many bytes (8..=1500).
    Fixed(usize),
    /// 8..=1500 bytes, varying with the sequence number.
    Mixed,
}

impl Sizes {
    fn of(self, seq: u64) -> usize {
        match self {
            Sizes::Fixed(n) => n,
            Sizes::Mixed => 8 + (seq.wrapping_mul(613) % 1493) as usize,
        }
    }
}

/// The datagram for `seq`: the sequence number, then bytes that depend on it and on their
/// position (so a swapped, shifted or truncated echo differs).
fn fill(buf: &mut [u8], seq: u64) {
    buf[..8].copy_from_slice(&seq.to_le_bytes());
    let k = (seq as u8).wrapping_mul(31) | 1;
    for (i, b) in buf[8..].iter_mut().enumerate() {
        *b = k.wrapping_mul(i as u8).wrapping_add((seq >> 8) as u8);
    }
}

/// What the client saw.
#[derive(Debug, Default)]
pub struct ClientReport {
    /// Datagrams sent.
    pub sent: u64,
    /// Echoes equal to what was sent, byte for byte, each sequence number once.
    pub good: u64,
    /// Echoes that differed (length, bytes, an unknown or repeated sequence number).
    pub bad: u64,
    /// Datagrams never echoed (the client gave up 1 s after the last echo).
    pub missing: u64,
    /// Heap allocations in the whole process while the datagrams were in flight.
    pub allocs: u64,
    /// From the first send to the last echo.
    pub wall: Duration,
}

/// Sends `n` datagrams to `server`, at most `window` in flight, and checks every echo.
pub fn client(
    server: SocketAddr,
    n: u64,
    sizes: Sizes,
    window: u64,
) -> Result<ClientReport, Box<dyn Error>> {
    let sock = UdpSocket::bind("127.0.0.1:0")?;
    sock.connect(server)?;
    sock.set_read_timeout(Some(Duration::from_secs(1)))?;
    let mut seen = vec![false; n as usize];
    let (mut out, mut want, mut back) = (vec![0u8; 1500], vec![0u8; 1500], vec![0u8; ROOM]);
    let mut r = ClientReport::default();
    let a0 = ALLOCS.load(Ordering::Relaxed);
    let t0 = Instant::now();
    let mut received = 0u64;
    while received < n {
        while r.sent < n && r.sent - received < window {
            let len = sizes.of(r.sent);
            fill(&mut out[..len], r.sent);
            sock.send(&out[..len])?;
            r.sent += 1;
        }
        let len = match sock.recv(&mut back) {
            Ok(len) => len,
            Err(e) if timed_out(&e) => break,
            Err(e) => return Err(e.into()),
        };
        received += 1;
        let ok = len >= 8 && {
            let seq = u64::from_le_bytes(back[..8].try_into().expect("8 bytes"));
            seq < n && !seen[seq as usize] && sizes.of(seq) == len && {
                fill(&mut want[..len], seq);
                seen[seq as usize] = true;
                want[..len] == back[..len]
            }
        };
        if ok {
            r.good += 1;
        } else {
            r.bad += 1;
        }
    }
    r.wall = t0.elapsed();
    r.allocs = ALLOCS.load(Ordering::Relaxed) - a0;
    r.missing = n - received;
    Ok(r)
}

/// One server, one client, `n` datagrams: both reports.
pub fn echo_run(
    v: Variant,
    buffers: u32,
    n: u64,
    sizes: Sizes,
    window: u64,
) -> Result<(ClientReport, ServerReport), Box<dyn Error>> {
    let server = Server::start(v, buffers)?;
    let c = client(server.addr, n, sizes, window);
    let s = server.stop();
    Ok((c?, s))
}

// ---- the measurement --------------------------------------------------------------------------

const BUFFERS: u32 = 1024;

struct Sample {
    cpu_ns: f64,
    user_ns: f64,
    allocs: f64,
    rate: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Runs one cell and checks it; `Err` names what went wrong.
fn cell(v: Variant, n: u64, sizes: Sizes, window: u64) -> Result<Sample, Box<dyn Error>> {
    let (c, s) = echo_run(v, BUFFERS, n, sizes, window)?;
    if c.good != n || c.bad != 0 || c.missing != 0 || s.dropped != 0 {
        return Err(format!("{}: {c:?} {s:?}", v.name()).into());
    }
    if let Some((avail, in_use, cap)) = s.pool {
        if avail != cap || in_use != 0 {
            return Err(format!(
                "{}: pool has {avail} of {cap} buffers back ({in_use} in use)",
                v.name()
            )
            .into());
        }
    }
    Ok(Sample {
        cpu_ns: s.cpu.total as f64 / n as f64,
        user_ns: s.cpu.user as f64 / n as f64,
        allocs: c.allocs as f64 / n as f64,
        rate: n as f64 / c.wall.as_secs_f64(),
    })
}

fn parse_variant(s: &str) -> Option<Variant> {
    ALL.into_iter().find(|v| v.name() == s)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mut packets, mut reps, mut window) = (40_000u64, 5usize, 32u64);
    let mut sizes = vec![64usize, 1500];
    let mut only = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || it.next().cloned().unwrap_or_default();
        match a.as_str() {
            "-h" | "--help" => {
                print!("{HELP}");
                return;
            }
            "--quick" => {
                packets = 2000;
                reps = 3;
            }
            "--packets" => packets = val().parse().unwrap_or(packets),
            "--reps" => reps = val().parse().unwrap_or(reps).max(1),
            "--window" => window = val().parse().unwrap_or(window).max(1),
            "--sizes" => {
                sizes = val()
                    .split(',')
                    .filter_map(|x| x.trim().parse().ok())
                    .filter(|&s| s == 0 || (8..=1500).contains(&s))
                    .collect()
            }
            "--only" => {
                let s = val();
                only = Some(parse_variant(&s).unwrap_or_else(|| {
                    eprintln!("udp_echo: unknown variant {s:?}\n\n{HELP}");
                    std::process::exit(2)
                }))
            }
            other => {
                eprintln!("udp_echo: unknown argument {other:?}\n\n{HELP}");
                std::process::exit(2);
            }
        }
    }
    let (variants, reps) = match only {
        Some(v) => (vec![v], 1),
        None => (ALL.to_vec(), reps),
    };
    let mut load = String::new();
    if let Ok(s) = std::fs::read_to_string("/proc/loadavg") {
        load = s.split_whitespace().take(3).collect::<Vec<_>>().join(" ");
    }
    println!(
        "udp_echo: {packets} datagrams per cell, window {window}, {reps} reps, {} CPUs, load {load}",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let mut failed = false;
    for &size in &sizes {
        let sz = if size == 0 {
            Sizes::Mixed
        } else {
            Sizes::Fixed(size)
        };
        let mut samples: Vec<Vec<Sample>> = variants.iter().map(|_| Vec::new()).collect();
        for rep in 0..reps {
            for k in 0..variants.len() {
                let i = (k + rep) % variants.len();
                match cell(variants[i], packets, sz, window) {
                    Ok(s) => samples[i].push(s),
                    Err(e) => {
                        eprintln!("FAILED: {e}");
                        failed = true;
                    }
                }
            }
        }
        let label = if size == 0 {
            "mixed 8..1500 B".to_string()
        } else {
            format!("{size} B")
        };
        println!("\n{label}: medians of {reps}");
        println!(
            "{:<11} {:>12} {:>12} {:>14} {:>12} {:>14}",
            "variant", "cpu ns/pkt", "user ns/pkt", "allocs/pkt", "echoes/s", "cpu / beside"
        );
        let med = |i: usize, f: fn(&Sample) -> f64| median(samples[i].iter().map(f).collect());
        let beside = variants
            .iter()
            .position(|&v| v == Variant::Beside)
            .map(|i| med(i, |s| s.cpu_ns));
        for (i, v) in variants.iter().enumerate() {
            let cpu = med(i, |s| s.cpu_ns);
            println!(
                "{:<11} {:>12.0} {:>12.0} {:>14.4} {:>12.0} {:>14}",
                v.name(),
                cpu,
                med(i, |s| s.user_ns),
                med(i, |s| s.allocs),
                med(i, |s| s.rate),
                beside.map_or("-".into(), |b| format!("{:.3}", cpu / b))
            );
        }
        if variants.len() == ALL.len() {
            let a = med(0, |s| s.cpu_ns);
            let aa = med(3, |s| s.cpu_ns);
            println!(
                "A/A (packetbuf2 / packetbuf): {:.3}; packetbuf / beside {:.3}: {}",
                aa / a,
                a / beside.unwrap_or(f64::NAN),
                if (a / beside.unwrap_or(f64::NAN) - 1.0).abs() <= (aa / a - 1.0).abs() {
                    "within the A/A"
                } else if a < beside.unwrap_or(f64::NAN) {
                    "lower, beyond the A/A"
                } else {
                    "higher, beyond the A/A"
                }
            );
        }
    }
    if failed {
        std::process::exit(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(v: Variant, buffers: u32, n: u64, sizes: Sizes, window: u64) {
        let (c, s) = echo_run(v, buffers, n, sizes, window).expect("echo run");
        assert_eq!(
            (c.sent, c.good, c.bad, c.missing),
            (n, n, 0, 0),
            "{v:?}: every datagram echoed intact once"
        );
        assert_eq!((s.echoed, s.dropped), (n, 0), "{v:?}: server counts");
        if let Some((avail, in_use, cap)) = s.pool {
            assert_eq!(
                (avail, in_use),
                (cap, 0),
                "{v:?}: every buffer back in the pool"
            );
        }
    }

    #[test]
    fn every_variant_echoes_every_datagram_intact_and_loses_no_buffer() {
        for v in ALL {
            check(v, 256, 3000, Sizes::Mixed, 32);
        }
    }

    /// Fewer buffers than datagrams in flight: the receiver waits in `get_wait` for the
    /// worker's puts (the pool is the backpressure), and nothing is lost.
    #[test]
    fn a_pool_smaller_than_the_window_waits_and_loses_nothing() {
        check(Variant::PacketBuf, 4, 2000, Sizes::Fixed(1500), 64);
        check(Variant::Beside, 4, 2000, Sizes::Fixed(1500), 64);
    }

    #[test]
    fn the_smallest_and_largest_datagrams() {
        check(Variant::PacketBuf, 64, 500, Sizes::Fixed(8), 16);
        check(Variant::PacketBuf, 64, 500, Sizes::Fixed(1500), 16);
    }

    #[test]
    fn addresses_round_trip_through_the_headroom() {
        let pool = PoolBuilder::packet_bufs(4, 256, 32).build().unwrap();
        let mut b = pool.get_pooled().unwrap();
        b.extend_from_slice(b"data").unwrap();
        for a in [
            "127.0.0.1:9".parse::<SocketAddr>().unwrap(),
            SocketAddr::V6(SocketAddrV6::new(Ipv6Addr::LOCALHOST, 65535, 7, 3)),
        ] {
            push_addr(&mut b, a).unwrap();
            assert_eq!(pop_addr(&mut b), Some(a));
            assert_eq!(b.as_slice(), b"data");
            assert_eq!(b.headroom(), 32);
        }
        // Too little headroom: a typed error, the buffer unchanged.
        let tight = PoolBuilder::packet_bufs(1, 64, 4).build().unwrap();
        let mut t = tight.get_pooled().unwrap();
        t.extend_from_slice(b"xy").unwrap();
        assert!(push_addr(&mut t, "127.0.0.1:9".parse().unwrap()).is_err());
        assert_eq!((t.as_slice(), t.headroom()), (&b"xy"[..], 4));
        // Data that does not start with an address: None, unchanged.
        assert_eq!(pop_addr(&mut t), None);
        assert_eq!(t.as_slice(), b"xy");
    }
}
