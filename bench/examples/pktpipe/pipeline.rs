//! The pktpipe pipeline: an l2fwd-like RX -> worker -> TX chain over an idxpool mbuf pool and a
//! [`HandleRing`](idxpool::HandleRing). Shared by `examples/pktpipe/main.rs` and
//! `tests/pktpipe.rs` (included there with `#[path]`), so the test checks the very code the
//! example measures.
//!
//! * RX thread: allocates mbufs in bursts of [`BURST`] (`get_bulk` through its per-thread
//!   cache, like `rte_pktmbuf_alloc_bulk`), copies a frame into each (the NIC's DMA), fills the
//!   metadata (length, port, the flow hash a NIC computes for RSS, a sequence number) and
//!   produces the burst into the ring; when the ring is full it waits (back-pressure, so no
//!   packet is dropped and counts are exact).
//! * Worker thread: consumes bursts of up to [`BURST`], parses Ethernet / VLAN / IPv4 / IPv6 /
//!   UDP / TCP with etherparse, swaps the MAC addresses (l2fwd), counts packets, bytes and
//!   5-tuple flows, then "transmits" by freeing the burst: one `pool.put` per packet
//!   (`rte_pktmbuf_free` in a loop) or one `pool.put_bulk` per burst (`rte_pktmbuf_free_bulk`).
//!   Optionally prefetches the next mbuf's first two cache lines (metadata + packet headers)
//!   one iteration ahead (`Prefetch::Next`), or every mbuf of the burst at once, on RX after
//!   the allocation and on the worker after the ring (`Prefetch::Burst`, VPP's pattern).
#![allow(dead_code)] // the test uses a subset

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::net::IpAddr;
use std::path::Path;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use etherparse::{NetSlice, PacketBuilder, SlicedPacket, TransportSlice};
use idxpool::handle_ring::{HandleRing, SlotRepr, Zeroing};
use idxpool::{Brand, Pool};
use idxpool_bench::{pin, spin};

/// Packets per RX allocation, ring transfer and TX free (DPDK's usual burst).
pub const BURST: usize = 32;
/// Data room of an mbuf (RTE_MBUF_DEFAULT_DATAROOM).
pub const DATA_ROOM: usize = 2048;
/// Ethernet frame check sequence: counted in frame sizes and Gbit/s, not stored (NICs strip it).
pub const FCS: usize = 4;
/// The standard IMIX: 64, 576 and 1500-byte frames at 7:4:1, interleaved.
pub const IMIX: [usize; 12] = [64, 576, 64, 64, 1500, 64, 576, 64, 64, 576, 64, 576];
/// The frame sizes of RFC 2544 tables (and of the memnic figures in reference.md).
pub const STANDARD_SIZES: [usize; 7] = [64, 128, 256, 512, 1024, 1280, 1518];

/// An mbuf-like packet buffer: one pool object. The first cache line is metadata, the frame
/// starts at offset 64 (as DPDK's headroom keeps headers off the metadata line).
#[repr(C, align(64))]
pub struct Mbuf {
    /// Frame length in `data` (bytes, without FCS).
    pub len: u16,
    /// Input port.
    pub port: u16,
    /// Flow hash (what a NIC's RSS hash would give).
    pub flow_hash: u32,
    /// RX sequence number.
    pub seq: u64,
    _pad: [u8; 48],
    /// The frame.
    pub data: [u8; DATA_ROOM],
}

impl Mbuf {
    /// An empty buffer.
    pub const fn empty() -> Self {
        Mbuf {
            len: 0,
            port: 0,
            flow_hash: 0,
            seq: 0,
            _pad: [0; 48],
            data: [0; DATA_ROOM],
        }
    }
}

/// One input frame (without FCS) and its precomputed flow hash.
#[derive(Clone, Debug)]
pub struct Frame {
    /// The bytes the RX thread copies into an mbuf.
    pub data: Vec<u8>,
    /// Flow hash stored in the mbuf metadata.
    pub hash: u32,
}

impl Frame {
    fn new(data: Vec<u8>) -> Self {
        let hash = match parse(&data) {
            Ok(p) => p.key.map_or(0, |k| {
                let mut h = FxHasher::default();
                std::hash::Hash::hash(&k, &mut h);
                h.finish() as u32
            }),
            Err(()) => 0,
        };
        Frame { data, hash }
    }
}

// ---- flows ---------------------------------------------------------------------------------

/// A 5-tuple. Non-TCP/UDP IP packets (and IP fragments, whose ports are not parsed) have
/// ports 0; non-IP frames have no flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowKey {
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// IP protocol number of the payload (after IPv6 extension headers).
    pub proto: u8,
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
}

impl std::fmt::Display for FlowKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let proto = match self.proto {
            6 => "tcp".to_string(),
            17 => "udp".to_string(),
            1 => "icmp".to_string(),
            58 => "icmpv6".to_string(),
            p => format!("proto {p}"),
        };
        let ep = |a: &IpAddr, p: u16| match a {
            IpAddr::V4(a) => format!("{a}:{p}"),
            IpAddr::V6(a) => format!("[{a}]:{p}"),
        };
        write!(
            f,
            "{proto} {} -> {}",
            ep(&self.src, self.sport),
            ep(&self.dst, self.dport)
        )
    }
}

/// Packets and bytes of one flow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowStats {
    /// Packets.
    pub packets: u64,
    /// Frame bytes (without FCS).
    pub bytes: u64,
}

/// A small fast hasher (rustc's FxHash): flow lookups are per packet, SipHash would dominate.
#[derive(Default, Clone, Copy)]
pub struct FxHasher(u64);

impl FxHasher {
    #[inline(always)]
    fn add(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().expect("8 bytes")));
        }
        for &b in chunks.remainder() {
            self.add(b as u64);
        }
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(i as u64)
    }
    #[inline]
    fn write_u16(&mut self, i: u16) {
        self.add(i as u64)
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(i as u64)
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i)
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64)
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

/// Flow table.
pub type FlowMap = HashMap<FlowKey, FlowStats, BuildHasherDefault<FxHasher>>;

/// What the worker learned from one frame.
#[derive(Clone, Copy, Debug)]
pub struct Parsed {
    /// The 5-tuple, for IP frames.
    pub key: Option<FlowKey>,
    /// One or two VLAN tags.
    pub vlan: bool,
    /// 4 or 6 for IP, 0 otherwise.
    pub ip: u8,
    /// The transport header etherparse decoded: 6 (TCP), 17 (UDP), 0 otherwise.
    pub l4: u8,
}

/// Parses an Ethernet frame with etherparse (strict: a malformed or truncated header is an
/// error).
pub fn parse(data: &[u8]) -> Result<Parsed, ()> {
    let p = SlicedPacket::from_ethernet(data).map_err(|_| ())?;
    let vlan = p.vlan.is_some();
    let Some(net) = &p.net else {
        return Ok(Parsed {
            key: None,
            vlan,
            ip: 0,
            l4: 0,
        });
    };
    let (src, dst, ip) = match net {
        NetSlice::Ipv4(v4) => (
            IpAddr::V4(v4.header().source_addr()),
            IpAddr::V4(v4.header().destination_addr()),
            4,
        ),
        NetSlice::Ipv6(v6) => (
            IpAddr::V6(v6.header().source_addr()),
            IpAddr::V6(v6.header().destination_addr()),
            6,
        ),
    };
    let proto = net.ip_payload_ref().map_or(0, |pl| pl.ip_number.0);
    let (sport, dport, l4) = match &p.transport {
        Some(TransportSlice::Udp(u)) => (u.source_port(), u.destination_port(), 17),
        Some(TransportSlice::Tcp(t)) => (t.source_port(), t.destination_port(), 6),
        _ => (0, 0, 0),
    };
    Ok(Parsed {
        key: Some(FlowKey {
            src,
            dst,
            proto,
            sport,
            dport,
        }),
        vlan,
        ip,
        l4,
    })
}

// ---- inputs --------------------------------------------------------------------------------

/// Builds one synthetic frame of `size` bytes on the wire (`size - 4` stored, FCS excluded)
/// for flow number `flow`. Flow kinds rotate over IPv4/UDP (5 of 8), IPv4/TCP, VLAN +
/// IPv4/UDP and IPv6/UDP; a kind whose headers do not fit the size falls back to IPv4/UDP.
pub fn synthetic_frame(size: usize, flow: usize) -> Frame {
    let len = size.saturating_sub(FCS).max(60);
    let src_mac = [0x02, 0, 0, 0, 0, 0x01];
    let dst_mac = [0x02, 0, 0, 0, 0, 0x02];
    let f = flow as u16;
    let v4src = [10, 0, (flow >> 8) as u8, flow as u8];
    let v4dst = [192, 168, 1, (flow % 4) as u8 + 1];
    let sport = 1024 + f;
    let dport = 5000 + f % 4;
    let mut out = Vec::with_capacity(len);
    let kind = flow % 8;
    let build = |kind: usize, out: &mut Vec<u8>| -> bool {
        let b = PacketBuilder::ethernet2(src_mac, dst_mac);
        macro_rules! emit {
            ($builder:expr) => {{
                let builder = $builder;
                let hdr = builder.size(0);
                if hdr > len {
                    return false;
                }
                let payload = vec![0x5a; len - hdr];
                builder.write(out, &payload).is_ok()
            }};
        }
        match kind {
            5 => emit!(b.ipv4(v4src, v4dst, 64).tcp(sport, dport, 1, 65535)),
            6 => emit!(b
                .single_vlan(etherparse::VlanId::try_new(100 + f % 8).expect("vlan id"))
                .ipv4(v4src, v4dst, 64)
                .udp(sport, dport)),
            7 => {
                let mut s6 = [0u8; 16];
                s6[0] = 0xfd;
                s6[14..].copy_from_slice(&f.to_be_bytes());
                let mut d6 = [0u8; 16];
                d6[0] = 0xfd;
                d6[15] = 1;
                emit!(b.ipv6(s6, d6, 64).udp(sport, dport))
            }
            _ => emit!(b.ipv4(v4src, v4dst, 64).udp(sport, dport)),
        }
    };
    if !build(kind, &mut out) {
        out.clear();
        assert!(
            build(0, &mut out),
            "IPv4/UDP fits any frame of 64 B or more"
        );
    }
    debug_assert_eq!(out.len(), len);
    Frame::new(out)
}

/// Synthetic traffic: `flows` flows, frame sizes cycling over `sizes` (wire sizes, FCS
/// included). Frame `j` is flow `j % flows` at size `sizes[j % sizes.len()]`; the RX thread
/// replays the list in order.
pub fn synthetic_frames(sizes: &[usize], flows: usize) -> Vec<Frame> {
    let flows = flows.max(1);
    let n = flows.max(sizes.len()) * if sizes.len() > 1 { sizes.len() } else { 1 };
    (0..n)
        .map(|j| synthetic_frame(sizes[j % sizes.len()], j % flows))
        .collect()
}

/// Frames of a capture and what was left out.
#[derive(Debug, Default)]
pub struct Capture {
    /// Ethernet frames, in file order (truncated to [`DATA_ROOM`] if longer).
    pub frames: Vec<Frame>,
    /// Packets on a non-Ethernet interface (not replayed).
    pub skipped_linktype: usize,
    /// Frames longer than the data room (truncated).
    pub truncated: usize,
}

/// Reads a pcap or pcapng file (pcap-parser, whole file in memory). Only Ethernet interfaces
/// are replayed. Legacy pcap must be little-endian (as pcap-parser's `PcapCapture` reads it).
pub fn load_capture(path: &Path) -> Result<Capture, String> {
    use pcap_parser::traits::PcapNGPacketBlock;
    use pcap_parser::{Block, Linktype, PcapCapture, PcapNGCapture};
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut cap = Capture::default();
    let push = |data: &[u8], cap: &mut Capture| {
        let mut d = data.to_vec();
        if d.len() > DATA_ROOM {
            d.truncate(DATA_ROOM);
            cap.truncated += 1;
        }
        cap.frames.push(Frame::new(d));
    };
    if bytes.starts_with(&[0x0a, 0x0d, 0x0d, 0x0a]) {
        let ng = PcapNGCapture::from_file(&bytes)
            .map_err(|e| format!("{}: pcapng: {e:?}", path.display()))?;
        for section in &ng.sections {
            let mut linktypes = Vec::new();
            for block in &section.blocks {
                match block {
                    Block::InterfaceDescription(idb) => linktypes.push(idb.linktype),
                    Block::EnhancedPacket(epb) => {
                        if linktypes.get(epb.if_id as usize) == Some(&Linktype::ETHERNET) {
                            push(epb.packet_data(), &mut cap);
                        } else {
                            cap.skipped_linktype += 1;
                        }
                    }
                    Block::SimplePacket(spb) => {
                        if linktypes.first() == Some(&Linktype::ETHERNET) {
                            push(spb.packet_data(), &mut cap);
                        } else {
                            cap.skipped_linktype += 1;
                        }
                    }
                    _ => {}
                }
            }
        }
    } else {
        let pc = PcapCapture::from_file(&bytes)
            .map_err(|e| format!("{}: pcap: {e:?}", path.display()))?;
        for b in &pc.blocks {
            if pc.header.network == Linktype::ETHERNET {
                push(b.data, &mut cap);
            } else {
                cap.skipped_linktype += 1;
            }
        }
    }
    Ok(cap)
}

// ---- the pipeline --------------------------------------------------------------------------

/// How TX frees a burst.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FreeMode {
    /// One `pool.put` per packet (each call finds the thread's cache).
    PerPacket,
    /// One `pool.put_bulk` per burst.
    Bulk,
}

/// Prefetching of mbufs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prefetch {
    /// None.
    Off,
    /// The worker prefetches the next mbuf's first two lines one packet ahead (ixgbe TX).
    Next,
    /// VPP's pattern: the whole burst's first lines are prefetched for writing
    /// (`pool.prefetch_all`, `vlib_prefetch_buffer_header` over a frame) right after RX's
    /// `get_bulk` and after the worker's `consume_burst`, before any of them is written or
    /// parsed; the worker then takes the burst's objects with `pool.get_mut_all`.
    Burst,
}

impl Prefetch {
    /// `off`, `next` or `burst`.
    pub fn name(self) -> &'static str {
        match self {
            Prefetch::Off => "off",
            Prefetch::Next => "next",
            Prefetch::Burst => "burst",
        }
    }
}

/// Pipeline switches.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// TX free mode.
    pub free: FreeMode,
    /// Prefetching of mbufs (RX and worker).
    pub prefetch: Prefetch,
    /// Ring zeroing (batched as ptr_ring, or immediate).
    pub zeroing: Zeroing,
    /// Ring slots.
    pub ring_size: usize,
    /// Pin RX to the first CPU and the worker to the second (None: not pinned, the default;
    /// see `idxpool_bench::pin`).
    pub pin: Option<[usize; 2]>,
    /// Parse headers and count flows (true), or only swap MACs and count packets and bytes
    /// (false: DPDK l2fwd's per-packet work, where per-packet overheads such as the free path
    /// weigh most).
    pub parse: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            free: FreeMode::Bulk,
            prefetch: Prefetch::Off,
            zeroing: Zeroing::Batched,
            ring_size: 1024,
            pin: None,
            parse: true,
        }
    }
}

/// When the RX thread stops.
#[derive(Clone, Copy, Debug)]
pub enum Limit {
    /// Replay the frame list this many times.
    Loops(u64),
    /// Replay the frame list (cyclically) for this long.
    Duration(Duration),
}

/// What a run counted.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    /// Packets processed by the worker.
    pub packets: u64,
    /// Frame bytes processed (without FCS).
    pub bytes: u64,
    /// Frames with a VLAN tag.
    pub vlan: u64,
    /// IPv4 frames.
    pub ipv4: u64,
    /// IPv6 frames.
    pub ipv6: u64,
    /// TCP segments.
    pub tcp: u64,
    /// UDP datagrams.
    pub udp: u64,
    /// IP frames with another (or an unparsed) transport.
    pub other_l4: u64,
    /// Non-IP frames.
    pub non_ip: u64,
    /// Frames etherparse rejected.
    pub parse_errors: u64,
    /// Per-flow counters.
    pub flows: FlowMap,
    /// Wall time of the run (RX start to both threads done).
    pub elapsed: Duration,
    /// Times RX found the ring full and waited.
    pub rx_waits: u64,
    /// Times RX found the pool empty (for this thread) and waited.
    pub rx_pool_empty: u64,
    /// Times the worker found the ring empty and waited.
    pub worker_idle: u64,
    /// XOR of the MAC-swapped frames' first 8 bytes (keeps the swap from being optimised out).
    pub checksum: u64,
}

impl Summary {
    /// Million packets per second.
    pub fn mpps(&self) -> f64 {
        self.packets as f64 / self.elapsed.as_secs_f64() / 1e6
    }

    /// Gigabits per second of L2 frames including the 4-byte FCS (excluding preamble and
    /// inter-frame gap).
    pub fn gbps(&self) -> f64 {
        (self.bytes + FCS as u64 * self.packets) as f64 * 8.0 / self.elapsed.as_secs_f64() / 1e9
    }

    /// The `n` biggest flows by packets (then bytes, then key, for a stable order).
    pub fn top_flows(&self, n: usize) -> Vec<(FlowKey, FlowStats)> {
        let mut v: Vec<_> = self.flows.iter().map(|(k, s)| (*k, *s)).collect();
        v.sort_by(|a, b| {
            (b.1.packets, b.1.bytes)
                .cmp(&(a.1.packets, a.1.bytes))
                .then(a.0.cmp(&b.0))
        });
        v.truncate(n);
        v
    }
}

/// Waits a little: spin first, then yield (the machine may have fewer cores than threads).
/// Pinned threads poll like DPDK lcores: they spin much longer before yielding.
#[inline]
fn wait(spins: &mut u32, pinned: bool) {
    spin::backoff(spins, spin::spin_limit(pinned), spin::After::Yield);
}

/// Prefetches the first two cache lines of an mbuf: its metadata and the packet headers.
#[inline(always)]
fn prefetch_mbuf(p: NonNull<Mbuf>) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let p = p.as_ptr() as *const i8;
        // SAFETY: a prefetch is a hint: it never faults and does not access memory
        // architecturally; SSE is part of the x86_64 baseline.
        #[allow(unused_unsafe)]
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(p);
            _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(64));
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// The worker's per-packet work: parse (if `full`), count, swap MACs.
#[inline]
fn process(m: &mut Mbuf, s: &mut Summary, full: bool) {
    let len = m.len as usize;
    let frame = &mut m.data[..len];
    s.packets += 1;
    s.bytes += len as u64;
    if !full {
        if len >= 12 {
            let (dst, rest) = frame.split_at_mut(6);
            dst.swap_with_slice(&mut rest[..6]);
            s.checksum ^= u64::from_le_bytes(frame[..8].try_into().expect("8 bytes"));
        }
        return;
    }
    match parse(frame) {
        Ok(p) => {
            s.vlan += p.vlan as u64;
            match p.ip {
                4 => s.ipv4 += 1,
                6 => s.ipv6 += 1,
                _ => s.non_ip += 1,
            }
            match p.l4 {
                6 => s.tcp += 1,
                17 => s.udp += 1,
                _ if p.ip != 0 => s.other_l4 += 1,
                _ => {}
            }
            if let Some(k) = p.key {
                let f = s.flows.entry(k).or_default();
                f.packets += 1;
                f.bytes += len as u64;
            }
        }
        Err(()) => s.parse_errors += 1,
    }
    if len >= 12 {
        let (dst, rest) = frame.split_at_mut(6);
        dst.swap_with_slice(&mut rest[..6]);
        s.checksum ^= u64::from_le_bytes(frame[..8].try_into().expect("8 bytes"));
    }
}

/// Runs RX and worker threads over `frames` until `limit`, through a handle ring of
/// `cfg.ring_size` slots, and returns what the worker counted. `pool` must hold at least
/// `ring_size + 2 x BURST` mbufs plus what the two threads' caches may keep.
///
/// # Panics
/// If the ring cannot be created (`ring_size == 0`).
pub fn run_pipeline<B: Brand, R: SlotRepr>(
    pool: &Pool<Mbuf, B, R>,
    frames: &[Frame],
    cfg: &Config,
    limit: Limit,
) -> Summary {
    if frames.is_empty() {
        return Summary::default();
    }
    let (mut tx, mut rx) = HandleRing::new(pool, cfg.ring_size, cfg.zeroing).expect("handle ring");
    let done = AtomicBool::new(false);
    let start = Instant::now();
    let ((rx_waits, rx_pool_empty), mut summary) = std::thread::scope(|s| {
        let done = &done;
        let rx_thread = s.spawn(move || {
            if let Some([cpu, _]) = cfg.pin {
                pin::pin_current(cpu);
            }
            let total = match limit {
                Limit::Loops(n) => Some(n * frames.len() as u64),
                Limit::Duration(_) => None,
            };
            let deadline = match limit {
                Limit::Duration(d) => Some(Instant::now() + d),
                Limit::Loops(_) => None,
            };
            let mut sent = 0u64;
            let mut fi = 0usize;
            let mut waits = 0u64;
            let mut empty = 0u64;
            let mut burst = Vec::with_capacity(BURST);
            loop {
                let n = match total {
                    Some(t) => ((t - sent) as usize).min(BURST),
                    None => BURST,
                };
                if n == 0 || deadline.is_some_and(|d| Instant::now() >= d) {
                    break;
                }
                let mut spins = 0;
                while pool.get_bulk(&mut burst, n).is_err() {
                    empty += 1;
                    wait(&mut spins, cfg.pin.is_some());
                }
                if cfg.prefetch == Prefetch::Burst {
                    pool.resolver().prefetch_all(&burst);
                }
                for h in burst.iter_mut() {
                    let f = &frames[fi];
                    fi += 1;
                    if fi == frames.len() {
                        fi = 0;
                    }
                    let m = pool.get_mut(h);
                    m.data[..f.data.len()].copy_from_slice(&f.data);
                    m.len = f.data.len() as u16;
                    m.port = 0;
                    m.flow_hash = f.hash;
                    m.seq = sent;
                    sent += 1;
                }
                let mut spins = 0;
                while !burst.is_empty() {
                    if tx.produce_burst(&mut burst) == 0 {
                        waits += 1;
                        wait(&mut spins, cfg.pin.is_some());
                    }
                }
            }
            drop(tx);
            done.store(true, Ordering::Release);
            (waits, empty)
        });
        let rx_ref = &mut rx;
        let worker = s.spawn(move || {
            if let Some([_, cpu]) = cfg.pin {
                pin::pin_current(cpu);
            }
            let mut sum = Summary::default();
            let mut burst = Vec::with_capacity(BURST);
            let mut spins = 0;
            loop {
                if rx_ref.consume_burst(&mut burst, BURST) == 0 {
                    // Release/Acquire on `done`: every produce happened before it.
                    if !done.load(Ordering::Acquire) {
                        sum.worker_idle += 1;
                        wait(&mut spins, cfg.pin.is_some());
                        continue;
                    }
                    if rx_ref.consume_burst(&mut burst, BURST) == 0 {
                        break;
                    }
                }
                spins = 0;
                let n = burst.len();
                match cfg.prefetch {
                    Prefetch::Burst => {
                        // VPP: the frame's headers in flight at once, then process them.
                        pool.resolver().prefetch_all(&burst);
                        for m in pool.resolver().get_mut_all(&mut burst) {
                            process(m, &mut sum, cfg.parse);
                        }
                    }
                    Prefetch::Next => {
                        for i in 0..n {
                            if i + 1 < n {
                                prefetch_mbuf(pool.as_ptr(&burst[i + 1]));
                            }
                            process(pool.get_mut(&mut burst[i]), &mut sum, cfg.parse);
                        }
                    }
                    Prefetch::Off => {
                        for h in burst.iter_mut() {
                            process(pool.get_mut(h), &mut sum, cfg.parse);
                        }
                    }
                }
                match cfg.free {
                    FreeMode::PerPacket => {
                        for h in burst.drain(..) {
                            pool.put(h);
                        }
                    }
                    FreeMode::Bulk => pool.put_bulk(&mut burst),
                }
            }
            sum
        });
        (
            rx_thread.join().expect("rx thread"),
            worker.join().expect("worker thread"),
        )
    });
    summary.elapsed = start.elapsed();
    summary.rx_waits = rx_waits;
    summary.rx_pool_empty = rx_pool_empty;
    drop(rx);
    summary
}
