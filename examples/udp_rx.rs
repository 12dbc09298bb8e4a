//! A UDP receive path on a real socket, in the style of DPDK's l2fwd: a sender thread
//! blasts datagrams over loopback with `sendmmsg`; a receiver takes them with a multishot
//! io_uring `recv` from a provided-buffer ring and hands them to a worker thread, which parses
//! and frees them. Three receivers, side by side in one run, with an A/A pair:
//!
//! * `pool`: the ring is fed from an idxpool pool (`idxpool::uring::UringRx`); a packet is a
//!   4-byte handle, passed through the crate's `HandleRing`; the worker puts it back through
//!   its own `LocalCache`, and the receiver re-arms the ring in bulk from its cache;
//! * `vec`: the same io_uring receive into a fixed buffer ring, then a `Vec<u8>` allocated per
//!   packet (the copy the application keeps), the buffer re-armed at once;
//! * `freelist`: the buffer ring filled from a plain `Vec<Box<[u8]>>` free list; the worker
//!   sends each box back to the receiver, which re-arms from the list in bulk.
//!
//! Prints packets/s, CPU ns per packet (receiver + worker threads), drops, and heap
//! allocations per packet counted by a counting global allocator; then a verdict.
//!
//! `cargo run --release --features uring --example udp_rx -- --quick`

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::net::UdpSocket;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use idxpool::handle_ring::Zeroing;
use idxpool::uring::{RxConfig, UringRx};
use idxpool::{HandleRing, LocalCache, PoolBuilder};
use io_uring::{cqueue, opcode, types, IoUring};

const HELP: &str = "\
udp_rx: a UDP receiver on a real loopback socket, three ways side by side (one run, A/A pair):
  pool      io_uring buffer ring fed from an idxpool pool; handles through a HandleRing
  vec       the same io_uring receive, a Vec<u8> allocated per packet
  freelist  io_uring buffer ring filled from a plain Vec<Box<[u8]>> free list
A sender thread blasts datagrams (sendmmsg, 32 per call); the receiver hands each packet to a
worker thread that parses and frees it. Per cell: packets/s received, CPU ns per packet
(receiver + worker), drops (sent but not received), heap allocations per packet (counting
global allocator, measured window only). Ends with a verdict per datagram size.

usage: udp_rx [--quick] [--sizes 64,1500] [--secs S] [--reps N] [--help]
  --quick     1 rep of 0.3 s per cell: about 4 s in all
  --sizes     datagram sizes in bytes (4..=2040; default 64,1500)
  --secs      measured seconds per cell (default 0.5)
  --reps      rounds, each running every receiver once; medians are reported (default 7:
              about 40 s in all)
Needs io_uring (/proc/sys/kernel/io_uring_disabled = 0); says so and exits 0 otherwise.
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

// ---- shared pieces ----------------------------------------------------------------------------

const BUF: usize = 2048;
/// Bytes before the payload: the received length is stamped in the first 4. Small, so the
/// stamp shares its cache line with the payload's start, which the kernel's copy (in the
/// receiver thread) just wrote: a hit, not a miss per packet.
const HEADROOM: usize = 8;
const LENT: u32 = 4096;
const BURST: usize = 64;
/// Completions each receiver waits for per `io_uring_enter` (or 1 ms), all three alike.
const WAIT_BATCH: usize = 32;

/// Measurement phase: 0 warm-up, 1 measuring, 2 stop.
struct Phase {
    phase: AtomicU8,
    rx_done: AtomicBool,
    sent: [AtomicU64; 3],
    received: [AtomicU64; 3],
    cpu_ns: [AtomicU64; 3],
    rx_cpu_ns: [AtomicU64; 3],
    /// User-space CPU of the receiver and the worker together (getrusage, tick-sampled split).
    user_ns: [AtomicU64; 3],
    /// The same, of the receiver alone.
    rx_user_ns: [AtomicU64; 3],
    /// The pool receiver's re-arm bursts, buffers lent and ring-tail publishes (whole run).
    rearm: [AtomicU64; 3],
}

impl Phase {
    fn get(&self) -> u8 {
        self.phase.load(Ordering::Relaxed)
    }
}

/// Records a thread's counter and CPU time at the start and the end of the measured window.
struct Window {
    last: u8,
    cpu0: u64,
    user0: u64,
    n0: u64,
}

impl Window {
    fn new() -> Self {
        Window {
            last: 0,
            cpu0: 0,
            user0: 0,
            n0: 0,
        }
    }
    /// Call once per loop iteration with the thread's running count; returns the phase.
    fn tick(
        &mut self,
        ph: &Phase,
        n: u64,
        count: &AtomicU64,
        (cpu, user, user_part): (&AtomicU64, &AtomicU64, &AtomicU64),
    ) -> u8 {
        let p = ph.get();
        if p != self.last {
            if p == 1 {
                self.cpu0 = thread_cpu_ns();
                self.user0 = thread_user_ns();
                self.n0 = n;
            } else if p == 2 && self.last == 1 {
                cpu.fetch_add(thread_cpu_ns() - self.cpu0, Ordering::Relaxed);
                let u = thread_user_ns() - self.user0;
                user.fetch_add(u, Ordering::Relaxed);
                user_part.fetch_add(u, Ordering::Relaxed);
                count.fetch_add(n - self.n0, Ordering::Relaxed);
            }
            self.last = p;
        }
        p
    }
}

/// User-space CPU time of the calling thread (getrusage(RUSAGE_THREAD)): the kernel samples
/// the user/system split at the scheduler tick and scales the exact total by it, so it is
/// exact only in sum over many ticks (long windows, several rounds).
fn thread_user_ns() -> u64 {
    // SAFETY: a zeroed rusage is valid output space; RUSAGE_THREAD is the calling thread.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    ru.ru_utime.tv_sec as u64 * 1_000_000_000 + ru.ru_utime.tv_usec as u64 * 1000
}

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to write.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// What the worker does with each datagram: its sequence number and a checksum of the first
/// and last bytes (touches the first and the last line of the payload).
#[inline(always)]
fn parse(b: &[u8], acc: &mut u64) {
    if b.len() >= 4 {
        let seq = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        *acc = acc.wrapping_add(u64::from(seq) ^ u64::from(b[b.len() - 1]));
    }
}

/// A bounded single-producer single-consumer queue of any `T` (for the two baselines, which
/// move `Vec<u8>`s and boxes instead of handles). Lamport's ring with cached indices.
struct Spsc<T> {
    slots: Box<[UnsafeCell<MaybeUninit<T>>]>,
    head: CachePadded<AtomicUsize>,
    tail: CachePadded<AtomicUsize>,
}

// SAFETY: each slot is written by the producer before the release store of `tail` and read by
// the consumer after the acquire load of it (and the reverse for `head`); T moves between
// threads, so T: Send.
unsafe impl<T: Send> Sync for Spsc<T> {}

impl<T> Spsc<T> {
    fn new(n: usize) -> Arc<Self> {
        Arc::new(Spsc {
            slots: (0..n.next_power_of_two())
                .map(|_| UnsafeCell::new(MaybeUninit::uninit()))
                .collect(),
            head: CachePadded::new(AtomicUsize::new(0)),
            tail: CachePadded::new(AtomicUsize::new(0)),
        })
    }
    /// Producer side only.
    fn push(&self, v: T) -> Result<(), T> {
        let t = self.tail.load(Ordering::Relaxed);
        if t - self.head.load(Ordering::Acquire) == self.slots.len() {
            return Err(v);
        }
        let slot = &self.slots[t & (self.slots.len() - 1)];
        // SAFETY: the slot is free (t - head < len) and only the producer writes it.
        unsafe { (*slot.get()).write(v) };
        self.tail.store(t + 1, Ordering::Release);
        Ok(())
    }
    /// Consumer side only.
    fn pop(&self) -> Option<T> {
        let h = self.head.load(Ordering::Relaxed);
        if h == self.tail.load(Ordering::Acquire) {
            return None;
        }
        let slot = &self.slots[h & (self.slots.len() - 1)];
        // SAFETY: h < tail: the producer wrote this slot (acquire above) and only the consumer
        // reads it, once.
        let v = unsafe { (*slot.get()).assume_init_read() };
        self.head.store(h + 1, Ordering::Release);
        Some(v)
    }
}

impl<T> Drop for Spsc<T> {
    fn drop(&mut self) {
        while self.pop().is_some() {}
    }
}

/// What a worker does when its queue is empty: spin a little, then sleep 50 us (a spinning
/// worker would burn the CPU the sender and the receiver need on a 2-CPU machine, and inflate
/// the CPU time per packet).
fn idle(empty_polls: &mut u32) {
    *empty_polls += 1;
    if *empty_polls < 64 {
        std::hint::spin_loop();
    } else {
        std::thread::sleep(Duration::from_micros(50));
    }
}

fn push_spin<T>(q: &Spsc<T>, mut v: T) {
    while let Err(back) = q.push(v) {
        v = back;
        std::thread::yield_now();
    }
}

/// A provided-buffer ring registered by hand, for the two baselines.
struct RawRing {
    mem: memmap2::MmapMut,
    mask: u16,
    tail: u16,
}

impl RawRing {
    fn new(ring: &IoUring, entries: u32, bgid: u16) -> std::io::Result<Self> {
        let mem = memmap2::MmapMut::map_anon(entries as usize * 16)?;
        // SAFETY: page-aligned memory of `entries` 16-byte slots, kept until after the ring
        // (dropped first by the receivers: declared before) is closed.
        unsafe {
            ring.submitter().register_buf_ring_with_flags(
                mem.as_ptr() as u64,
                entries as u16,
                bgid,
                0,
            )?
        };
        Ok(RawRing {
            mem,
            mask: (entries - 1) as u16,
            tail: 0,
        })
    }
    fn push(&mut self, addr: u64, len: u32, bid: u16) {
        let off = usize::from(self.tail & self.mask) * 16;
        let p = self.mem.as_mut_ptr().wrapping_add(off);
        // SAFETY: slot `off` is inside the mapping and past the published tail (never more
        // buffers than entries), so the kernel does not read it now; bytes 14..16 (the tail,
        // in slot 0) are not written.
        unsafe {
            p.cast::<u64>().write(addr);
            p.add(8).cast::<u32>().write(len);
            p.add(12).cast::<u16>().write(bid);
        }
        self.tail = self.tail.wrapping_add(1);
    }
    fn publish(&mut self) {
        // SAFETY: bytes 14..16 of slot 0 are the ring's tail, 2-aligned, read by the kernel
        // with an acquire load.
        unsafe { &*self.mem.as_mut_ptr().wrapping_add(14).cast::<AtomicU16>() }
            .store(self.tail, Ordering::Release);
    }
}

fn arm(ring: &mut IoUring, fd: i32, bgid: u16) {
    let e = opcode::RecvMulti::new(types::Fd(fd), bgid)
        .build()
        .user_data(1);
    // SAFETY: a receive with buffer selection references no user memory.
    while unsafe { ring.submission().push(&e) }.is_err() {
        let _ = ring.submit();
    }
}

fn wait(ring: &mut IoUring) {
    let ts = types::Timespec::new().nsec(1_000_000);
    let args = types::SubmitArgs::new().timespec(&ts);
    let _ = ring.submitter().submit_with_args(WAIT_BATCH, &args);
}

// ---- the three receivers ----------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Variant {
    Pool,
    Vec,
    FreeList,
}

impl Variant {
    fn name(self) -> &'static str {
        match self {
            Variant::Pool => "pool",
            Variant::Vec => "vec",
            Variant::FreeList => "freelist",
        }
    }
}

fn receiver_pool(sock: UdpSocket, ph: Arc<Phase>) -> std::thread::JoinHandle<()> {
    let pool = Arc::new(
        PoolBuilder::<[u8; BUF]>::zeroed(2 * LENT)
            .cache_size(256)
            .prefault(true)
            .name("udp_rx")
            .build()
            .expect("pool"),
    );
    let (mut tx, mut rxq) =
        HandleRing::new(pool.clone(), 4096, Zeroing::Batched).expect("handle ring");
    let wph = ph.clone();
    let worker = std::thread::spawn(move || {
        let pool = rxq.ring().pool().clone();
        let mut cache = LocalCache::new(pool.clone());
        let mut burst = Vec::with_capacity(BURST);
        let (mut n, mut acc, mut w, mut empty) = (0u64, 0u64, Window::new(), 0u32);
        loop {
            let p = w.tick(
                &wph,
                n,
                &wph.received[0],
                (&wph.cpu_ns[0], &wph.user_ns[0], &AtomicU64::new(0)),
            );
            if rxq.consume_burst(&mut burst, BURST) == 0 {
                if p == 2 && wph.rx_done.load(Ordering::Acquire) && rxq.is_empty() {
                    break;
                }
                idle(&mut empty);
                continue;
            }
            empty = 0;
            for h in &burst {
                if let Ok(b) = idxpool::uring::payload(&pool, h, HEADROOM) {
                    parse(b, &mut acc);
                }
            }
            n += burst.len() as u64;
            cache.put_bulk(&mut burst);
        }
        std::hint::black_box(acc);
    });
    std::thread::spawn(move || {
        let cfg = RxConfig {
            lend: LENT,
            burst: 256,
            headroom: HEADROOM as u32,
            wait_batch: WAIT_BATCH as u32,
            ..RxConfig::default()
        };
        let mut rx = UringRx::new(pool, cfg).expect("UringRx");
        rx.recv_multishot(sock.as_raw_fd()).expect("recv");
        let mut pkts = Vec::with_capacity(4096);
        let mut hs = Vec::with_capacity(4096);
        let mut w = Window::new();
        loop {
            let n = rx.stats().packets;
            if w.tick(
                &ph,
                n,
                &AtomicU64::new(0),
                (&ph.rx_cpu_ns[0], &ph.user_ns[0], &ph.rx_user_ns[0]),
            ) == 2
            {
                break;
            }
            let _ = rx.poll(&mut pkts, Some(Duration::from_millis(1)));
            hs.extend(pkts.drain(..).map(|p| p.handle));
            while !hs.is_empty() {
                if tx.produce_burst(&mut hs) == 0 {
                    std::thread::yield_now();
                }
            }
        }
        ph.rx_done.store(true, Ordering::Release);
        let st = rx.stats();
        ph.rearm[0].store(st.rearm_bursts, Ordering::Relaxed);
        ph.rearm[1].store(st.buffers_lent, Ordering::Relaxed);
        ph.rearm[2].store(st.tail_publishes, Ordering::Relaxed);
        drop(rx); // cancels, unregisters, returns the lent buffers
        drop(sock);
        worker.join().unwrap();
    })
}

fn receiver_vec(sock: UdpSocket, ph: Arc<Phase>) -> std::thread::JoinHandle<()> {
    let q: Arc<Spsc<Vec<u8>>> = Spsc::new(4096);
    let (wq, wph) = (q.clone(), ph.clone());
    let worker = std::thread::spawn(move || {
        let (mut n, mut acc, mut w, mut empty) = (0u64, 0u64, Window::new(), 0u32);
        loop {
            let p = w.tick(
                &wph,
                n,
                &wph.received[1],
                (&wph.cpu_ns[1], &wph.user_ns[1], &AtomicU64::new(0)),
            );
            let mut got = 0;
            while let Some(v) = wq.pop() {
                parse(&v, &mut acc);
                drop(v);
                got += 1;
                if got == BURST {
                    break;
                }
            }
            n += got as u64;
            if got == 0 {
                if p == 2 && wph.rx_done.load(Ordering::Acquire) {
                    break;
                }
                idle(&mut empty);
            } else {
                empty = 0;
            }
        }
        std::hint::black_box(acc);
    });
    std::thread::spawn(move || {
        let mut ring = IoUring::builder()
            .setup_cqsize(8192)
            .build(256)
            .expect("io_uring");
        let mut slab = vec![0u8; LENT as usize * BUF];
        slab.iter_mut().step_by(4096).for_each(|b| *b = 1); // prefault, as the pool's
        let mut br = RawRing::new(&ring, LENT, 0).expect("buffer ring");
        let base = slab.as_mut_ptr() as u64;
        for bid in 0..LENT {
            br.push(base + u64::from(bid) * BUF as u64, BUF as u32, bid as u16);
        }
        br.publish();
        let fd = sock.as_raw_fd();
        arm(&mut ring, fd, 0);
        let (mut n, mut w) = (0u64, Window::new());
        loop {
            if w.tick(
                &ph,
                n,
                &AtomicU64::new(0),
                (&ph.rx_cpu_ns[1], &ph.user_ns[1], &ph.rx_user_ns[1]),
            ) == 2
            {
                break;
            }
            wait(&mut ring);
            let mut rearm = false;
            let mut returned = false;
            for cqe in ring.completion() {
                if let Some(bid) = cqueue::buffer_select(cqe.flags()) {
                    let off = usize::from(bid) * BUF;
                    if cqe.result() > 0 {
                        let v = slab[off..off + cqe.result() as usize].to_vec();
                        push_spin(&q, v);
                        n += 1;
                    }
                    br.push(base + off as u64, BUF as u32, bid);
                    returned = true;
                }
                if !cqueue::more(cqe.flags()) {
                    rearm = true;
                }
            }
            if returned {
                br.publish();
            }
            if rearm {
                arm(&mut ring, fd, 0);
            }
        }
        ph.rx_done.store(true, Ordering::Release);
        drop(ring); // before the slab and the ring memory
        drop(br);
        drop(slab);
        worker.join().unwrap();
    })
}

fn receiver_freelist(sock: UdpSocket, ph: Arc<Phase>) -> std::thread::JoinHandle<()> {
    let q: Arc<Spsc<(Box<[u8]>, u32)>> = Spsc::new(4096);
    let back: Arc<Spsc<Box<[u8]>>> = Spsc::new(2 * LENT as usize);
    let (wq, wback, wph) = (q.clone(), back.clone(), ph.clone());
    let worker = std::thread::spawn(move || {
        let (mut n, mut acc, mut w, mut empty) = (0u64, 0u64, Window::new(), 0u32);
        loop {
            let p = w.tick(
                &wph,
                n,
                &wph.received[2],
                (&wph.cpu_ns[2], &wph.user_ns[2], &AtomicU64::new(0)),
            );
            let mut got = 0;
            while let Some((b, len)) = wq.pop() {
                parse(&b[..len as usize], &mut acc);
                push_spin(&wback, b);
                got += 1;
                if got == BURST {
                    break;
                }
            }
            n += got as u64;
            if got == 0 {
                if p == 2 && wph.rx_done.load(Ordering::Acquire) {
                    break;
                }
                idle(&mut empty);
            } else {
                empty = 0;
            }
        }
        std::hint::black_box(acc);
    });
    std::thread::spawn(move || {
        let mut ring = IoUring::builder()
            .setup_cqsize(8192)
            .build(256)
            .expect("io_uring");
        let total = 2 * LENT as usize;
        let mut free: Vec<Box<[u8]>> = (0..total)
            .map(|_| vec![1u8; BUF].into_boxed_slice()) // written: prefaulted, as the pool's
            .collect();
        let mut slots: Vec<Option<Box<[u8]>>> = (0..LENT).map(|_| None).collect();
        let mut free_bids: Vec<u16> = (0..LENT as u16).rev().collect();
        let mut br = RawRing::new(&ring, LENT, 0).expect("buffer ring");
        let fd = sock.as_raw_fd();
        let refill = |free: &mut Vec<Box<[u8]>>,
                      slots: &mut Vec<Option<Box<[u8]>>>,
                      free_bids: &mut Vec<u16>,
                      br: &mut RawRing| {
            let mut any = false;
            while let Some(bid) = free_bids.pop() {
                let Some(mut b) = free.pop() else {
                    free_bids.push(bid);
                    break;
                };
                br.push(b.as_mut_ptr() as u64, BUF as u32, bid);
                slots[usize::from(bid)] = Some(b);
                any = true;
            }
            if any {
                br.publish();
            }
        };
        refill(&mut free, &mut slots, &mut free_bids, &mut br);
        arm(&mut ring, fd, 0);
        let (mut n, mut w) = (0u64, Window::new());
        loop {
            if w.tick(
                &ph,
                n,
                &AtomicU64::new(0),
                (&ph.rx_cpu_ns[2], &ph.user_ns[2], &ph.rx_user_ns[2]),
            ) == 2
            {
                break;
            }
            wait(&mut ring);
            let mut rearm = false;
            for cqe in ring.completion() {
                if let Some(bid) = cqueue::buffer_select(cqe.flags()) {
                    if let Some(b) = slots[usize::from(bid)].take() {
                        free_bids.push(bid);
                        if cqe.result() > 0 {
                            push_spin(&q, (b, cqe.result() as u32));
                            n += 1;
                        } else {
                            free.push(b);
                        }
                    }
                }
                if !cqueue::more(cqe.flags()) {
                    rearm = true;
                }
            }
            while let Some(b) = back.pop() {
                free.push(b);
            }
            refill(&mut free, &mut slots, &mut free_bids, &mut br);
            if rearm {
                arm(&mut ring, fd, 0);
            }
        }
        ph.rx_done.store(true, Ordering::Release);
        drop(ring); // before the boxes and the ring memory
        drop(slots);
        drop(br);
        worker.join().unwrap();
    })
}

fn sender(
    sock: UdpSocket,
    size: usize,
    ph: Arc<Phase>,
    slot: usize,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        const N: usize = 32;
        let mut bufs = vec![vec![0xa5u8; size]; N];
        let mut iov: Vec<libc::iovec> = Vec::with_capacity(N);
        // SAFETY: an all-zero mmsghdr is valid (null name, no control).
        let mut msgs: Vec<libc::mmsghdr> = (0..N).map(|_| unsafe { std::mem::zeroed() }).collect();
        for b in &mut bufs {
            iov.push(libc::iovec {
                iov_base: b.as_mut_ptr().cast(),
                iov_len: b.len(),
            });
        }
        for (m, v) in msgs.iter_mut().zip(iov.iter_mut()) {
            m.msg_hdr.msg_iov = v;
            m.msg_hdr.msg_iovlen = 1;
        }
        let (mut seq, mut sent, mut w) = (0u32, 0u64, Window::new());
        loop {
            let none = || AtomicU64::new(0);
            if w.tick(&ph, sent, &ph.sent[slot], (&none(), &none(), &none())) == 2 {
                break;
            }
            for b in &mut bufs {
                b[..4].copy_from_slice(&seq.to_le_bytes());
                seq = seq.wrapping_add(1);
            }
            // SAFETY: msgs and their iovecs point into `bufs`, alive and unmoved here.
            let r = unsafe { libc::sendmmsg(sock.as_raw_fd(), msgs.as_mut_ptr(), N as u32, 0) };
            if r > 0 {
                sent += r as u64;
            } else {
                std::thread::yield_now();
            }
        }
    })
}

struct Cell {
    /// Re-arm bursts, buffers lent, tail publishes (pool receiver only).
    rearm: [u64; 3],
    pps: f64,
    ns: f64,
    rx_ns: f64,
    /// User-space ns per packet, receiver + worker, and the receiver's part.
    user: f64,
    rx_user: f64,
    drops: f64,
    allocs: f64,
}

fn udp_pair() -> (UdpSocket, UdpSocket) {
    let rx = UdpSocket::bind("127.0.0.1:0").expect("bind");
    let tx = UdpSocket::bind("127.0.0.1:0").expect("bind");
    let size: libc::c_int = 4 << 20;
    // SAFETY: a valid socket and a c_int option of its size.
    unsafe {
        libc::setsockopt(
            rx.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&size as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
    tx.connect(rx.local_addr().unwrap()).expect("connect");
    (rx, tx)
}

fn run(v: Variant, size: usize, secs: f64) -> Cell {
    let slot = match v {
        Variant::Pool => 0,
        Variant::Vec => 1,
        Variant::FreeList => 2,
    };
    let ph = Arc::new(Phase {
        phase: AtomicU8::new(0),
        rx_done: AtomicBool::new(false),
        sent: Default::default(),
        received: Default::default(),
        cpu_ns: Default::default(),
        rx_cpu_ns: Default::default(),
        user_ns: Default::default(),
        rx_user_ns: Default::default(),
        rearm: Default::default(),
    });
    let (rx, tx) = udp_pair();
    let r = match v {
        Variant::Pool => receiver_pool(rx, ph.clone()),
        Variant::Vec => receiver_vec(rx, ph.clone()),
        Variant::FreeList => receiver_freelist(rx, ph.clone()),
    };
    std::thread::sleep(Duration::from_millis(20)); // the receive is armed
    let s = sender(tx, size, ph.clone(), slot);
    std::thread::sleep(Duration::from_secs_f64((secs * 0.3).max(0.1))); // warm-up
    let a0 = ALLOCS.load(Ordering::Relaxed);
    let t0 = Instant::now();
    ph.phase.store(1, Ordering::SeqCst);
    std::thread::sleep(Duration::from_secs_f64(secs));
    ph.phase.store(2, Ordering::SeqCst);
    let wall = t0.elapsed().as_secs_f64();
    let a1 = ALLOCS.load(Ordering::Relaxed);
    s.join().unwrap();
    r.join().unwrap();
    let got = ph.received[slot].load(Ordering::Relaxed).max(1) as f64;
    let sent = ph.sent[slot].load(Ordering::Relaxed) as f64;
    Cell {
        rearm: [0, 1, 2].map(|i| ph.rearm[i].load(Ordering::Relaxed)),
        pps: got / wall,
        ns: (ph.cpu_ns[slot].load(Ordering::Relaxed) + ph.rx_cpu_ns[slot].load(Ordering::Relaxed))
            as f64
            / got,
        rx_ns: ph.rx_cpu_ns[slot].load(Ordering::Relaxed) as f64 / got,
        user: ph.user_ns[slot].load(Ordering::Relaxed) as f64 / got,
        rx_user: ph.rx_user_ns[slot].load(Ordering::Relaxed) as f64 / got,
        drops: if sent > 0.0 {
            (1.0 - got / sent).max(0.0)
        } else {
            0.0
        },
        allocs: (a1 - a0) as f64 / got,
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mut quick, mut sizes, mut secs, mut reps) = (false, vec![64usize, 1500], 0.5f64, 7usize);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "-h" | "--help" => {
                print!("{HELP}");
                return;
            }
            "--quick" => quick = true,
            "--sizes" => {
                sizes = it
                    .next()
                    .map(|s| s.split(',').filter_map(|x| x.trim().parse().ok()).collect())
                    .unwrap_or_default()
            }
            "--secs" => secs = it.next().and_then(|s| s.parse().ok()).unwrap_or(secs),
            "--reps" => reps = it.next().and_then(|s| s.parse().ok()).unwrap_or(reps),
            other => {
                eprintln!("udp_rx: unknown argument {other:?}\n\n{HELP}");
                std::process::exit(2);
            }
        }
    }
    if quick {
        secs = 0.3;
        reps = 1;
    }
    sizes.retain(|&s| (4..=BUF - HEADROOM).contains(&s));
    if sizes.is_empty() || reps == 0 || secs <= 0.0 {
        eprintln!("udp_rx: nothing to measure (sizes 4..=2040, reps >= 1, secs > 0)");
        std::process::exit(2);
    }
    if let Err(why) = idxpool::uring::available() {
        println!("udp_rx: skipped: io_uring unavailable here ({why})");
        return;
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "udp_rx: loopback UDP, sender -> receiver (io_uring multishot recv, buffer ring of {LENT}) \
         -> worker; {reps} round(s) of {secs} s per cell; {} CPUs; load average {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        load.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
    );
    let order = [
        Variant::Pool,
        Variant::Vec,
        Variant::FreeList,
        Variant::Pool,
    ];
    let mut verdicts = Vec::new();
    for &size in &sizes {
        println!("\n{size} B datagrams");
        println!(
            "  {:<10} {:>12} {:>12} {:>10} {:>12} {:>10} {:>8} {:>13}",
            "receiver",
            "packets/s",
            "CPU ns/pkt",
            "(rx part)",
            "user ns/pkt",
            "(rx part)",
            "drops",
            "allocs/pkt"
        );
        let mut cells: Vec<Vec<Cell>> = (0..order.len()).map(|_| Vec::new()).collect();
        for rep in 0..reps {
            // Each round starts one receiver later, so that no receiver always runs first or
            // last (the machine's load drifts within a round).
            for j in 0..order.len() {
                let k = (j + rep) % order.len();
                cells[k].push(run(order[k], size, secs));
            }
        }
        let med = |k: usize, f: fn(&Cell) -> f64| median(cells[k].iter().map(f).collect());
        // The user/system split is tick-sampled: user-space figures are means over rounds.
        let mean = |k: usize, f: fn(&Cell) -> f64| {
            cells[k].iter().map(f).sum::<f64>() / cells[k].len().max(1) as f64
        };
        for (k, &v) in order.iter().enumerate() {
            let label = if k == 3 { "pool (A/A)" } else { v.name() };
            println!(
                "  {:<10} {:>12.0} {:>12.0} {:>10.0} {:>12.0} {:>10.0} {:>7.1}% {:>13.3}",
                label,
                med(k, |c| c.pps),
                med(k, |c| c.ns),
                med(k, |c| c.rx_ns),
                mean(k, |c| c.user),
                mean(k, |c| c.rx_user),
                100.0 * med(k, |c| c.drops),
                med(k, |c| c.allocs)
            );
        }
        let r: [u64; 3] =
            [0, 1, 2].map(|i| cells[0].iter().chain(&cells[3]).map(|c| c.rearm[i]).sum());
        println!(
            "  pool receiver: {} re-arm bursts of {:.1} buffers on average, {:.2} ring-tail \
             publishes per burst",
            r[0],
            r[1] as f64 / r[0].max(1) as f64,
            r[2] as f64 / r[0].max(1) as f64
        );
        let (pa, pb) = (med(0, |c| c.pps), med(3, |c| c.pps));
        let pool = (pa + pb) / 2.0;
        let noise = (pa - pb).abs() / pool;
        let (na, nb) = (med(0, |c| c.ns), med(3, |c| c.ns));
        let ns_pool = (na + nb) / 2.0;
        let ns_noise = (na - nb).abs() / ns_pool;
        // A ratio counts only when it is further from 1 than the A/A pair is apart.
        let judge = |ratio: f64, noise: f64| {
            if (ratio - 1.0).abs() <= noise {
                "within noise"
            } else {
                "beyond noise"
            }
        };
        let (pv, pf) = (pool / med(1, |c| c.pps), pool / med(2, |c| c.pps));
        let (cv, cf) = (ns_pool / med(1, |c| c.ns), ns_pool / med(2, |c| c.ns));
        verdicts.push(format!(
            "{size} B: pool-backed receives {pv:.2}x the packets/s of Vec-per-packet ({}) and \
             {pf:.2}x the free-list ring's ({}), A/A {:.1}%; it spends {cv:.2}x vec's CPU per \
             packet ({}) and {cf:.2}x the free list's ({}), A/A {:.1}%; heap allocations per \
             packet: pool {:.3}, vec {:.3}, freelist {:.3}",
            judge(pv, noise),
            judge(pf, noise),
            100.0 * noise,
            judge(cv, ns_noise),
            judge(cf, ns_noise),
            100.0 * ns_noise,
            (med(0, |c| c.allocs) + med(3, |c| c.allocs)) / 2.0,
            med(1, |c| c.allocs),
            med(2, |c| c.allocs),
        ));
        let (ua, ub) = (mean(0, |c| c.user), mean(3, |c| c.user));
        let u_pool = (ua + ub) / 2.0;
        verdicts.push(format!(
            "{size} B: user-space CPU per packet (receiver + worker, means over rounds): pool \
             {u_pool:.0} ns, vec {:.0} ns: {:.2}x (A/A {:.1}%); the receiver's alone: pool {:.0} \
             ns, vec {:.0} ns: {:.2}x",
            mean(1, |c| c.user),
            u_pool / mean(1, |c| c.user),
            100.0 * (ua - ub).abs() / u_pool.max(1e-9),
            (mean(0, |c| c.rx_user) + mean(3, |c| c.rx_user)) / 2.0,
            mean(1, |c| c.rx_user),
            (mean(0, |c| c.rx_user) + mean(3, |c| c.rx_user)) / 2.0 / mean(1, |c| c.rx_user),
        ));
    }
    println!();
    for v in &verdicts {
        println!("verdict: {v}");
    }
    println!(
        "(a ratio is the pool's only beyond the A/A spread; packets/s is bounded by the sender, \
         which shares the CPUs; CPU ns/pkt counts the receiver and the worker threads)"
    );
}
