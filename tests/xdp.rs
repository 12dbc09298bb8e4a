//! AF_XDP with the pool's region as the UMEM (feature `xdp`), on a real veth pair in a network
//! namespace. Each test that needs the kernel skips, saying why, where AF_XDP cannot run (not
//! root, no veth, the kernel refusing XDP).
#![cfg(all(feature = "xdp", target_os = "linux"))]

#[path = "support/veth_lab.rs"]
mod veth_lab;

use std::sync::Arc;
use std::time::{Duration, Instant};

use idxpool::xdp::{Frame, LentTo, XdpConfig, XdpSocket};
use idxpool::{Pool, PoolBuilder, StrideMode};
use veth_lab::{frame, seq_of, Lab, PacketSock};

type P = Pool<[u8; 2048]>;

fn pool(n: u32) -> Arc<P> {
    Arc::new(
        PoolBuilder::<[u8; 2048]>::zeroed(n)
            .stride(StrideMode::Natural)
            .build()
            .unwrap(),
    )
}

/// A lab, or the reason to skip.
fn lab(tag: &str) -> Option<Lab> {
    if let Err(why) = idxpool::xdp::available() {
        println!("skipped: {why}");
        return None;
    }
    match Lab::up(tag) {
        Ok(l) => Some(l),
        Err(why) => {
            println!("skipped: {why}");
            None
        }
    }
}

/// Sends `n` 64-byte frames numbered from `first` from the namespace end of `lab`.
fn send(lab: &Lab, first: u64, n: u64) {
    let (b, dst, src) = (lab.b.clone(), lab.mac_a, lab.mac_b);
    lab.in_ns(move || {
        let s = PacketSock::new(&b, 0).unwrap();
        for seq in first..first + n {
            let f = frame(dst, src, seq, 64);
            while s.send_many(&[&f]) == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    })
    .join()
    .unwrap()
    .unwrap();
}

/// Polls until `want` frames arrived or `limit` passed.
fn recv(xsk: &mut XdpSocket<Arc<P>>, want: usize, limit: Duration) -> Vec<Frame<[u8; 2048]>> {
    let mut got = Vec::new();
    let t0 = Instant::now();
    while got.len() < want && t0.elapsed() < limit {
        xsk.poll(&mut got, Some(Duration::from_millis(20))).unwrap();
    }
    got
}

#[test]
fn received_frames_are_handles_of_the_pool() {
    let Some(lab) = lab("xtrx") else { return };
    let pool = pool(256);
    let mut xsk = XdpSocket::new(pool.clone(), &XdpConfig::new(&lab.a)).unwrap();
    xsk.refill();
    assert_eq!(pool.lent_to_kernel(), 64, "one burst lent");
    send(&lab, 0, 50);
    let got = recv(&mut xsk, 50, Duration::from_secs(5));
    assert_eq!(got.len(), 50, "stats {:?}", xsk.stats());
    for (k, f) in got.iter().enumerate() {
        let b = xsk.bytes(f);
        assert_eq!(b.len(), 64);
        assert_eq!(seq_of(b), Some(k as u64));
        assert_eq!(&b[0..6], &lab.mac_a);
    }
    let s = xsk.stats();
    assert_eq!(s.rx_packets, 50);
    assert_eq!(s.bad_descriptors, 0);
    assert!(s.fill_bursts <= s.frames_filled.div_ceil(1));
    for f in got {
        pool.put(f.handle);
    }
    assert_eq!(
        pool.lent_to_kernel(),
        xsk.lent(LentTo::Fill) as usize,
        "the count is the ledger's"
    );
    let r = xsk.audit();
    assert!(r.is_err(), "the test holds a clone of the Arc");
    drop(xsk);
    assert_eq!(pool.lent_to_kernel(), 0);
    assert!(pool.is_full());
}

#[test]
fn a_poll_appends_after_the_frames_already_held() {
    let Some(lab) = lab("xtap") else { return };
    let pool = pool(256);
    let mut xsk = XdpSocket::new(pool.clone(), &XdpConfig::new(&lab.a)).unwrap();
    // A frame the caller holds already (its handle from the pool, not received).
    let mut got = vec![Frame {
        handle: pool.get().unwrap(),
        offset: 7,
        len: 9,
    }];
    xsk.refill();
    send(&lab, 0, 20);
    let t0 = Instant::now();
    while got.len() < 21 && t0.elapsed() < Duration::from_secs(5) {
        xsk.poll(&mut got, Some(Duration::from_millis(20))).unwrap();
    }
    assert_eq!(got.len(), 21, "stats {:?}", xsk.stats());
    assert_eq!(
        (got[0].offset, got[0].len),
        (7, 9),
        "the held frame is kept, first"
    );
    for (k, f) in got[1..].iter().enumerate() {
        assert_eq!(
            seq_of(xsk.bytes(f)),
            Some(k as u64),
            "received in order after it"
        );
    }
    assert_eq!(xsk.stats().rx_packets, 20);
    for f in got {
        pool.put(f.handle);
    }
    drop(xsk);
    assert!(pool.is_full(), "nothing lost");
}

#[test]
fn the_fill_ring_runs_empty_and_nothing_is_lost() {
    let Some(lab) = lab("xtfill") else { return };
    let pool = pool(8);
    let mut cfg = XdpConfig::new(&lab.a);
    cfg.lend = 8;
    let mut xsk = XdpSocket::new(pool, &cfg).unwrap();
    assert_eq!(xsk.refill(), 8, "every frame lent");
    assert_eq!(xsk.refill(), 0, "nothing left to lend");
    // 20 frames on 8 lent buffers: the kernel writes 8 and drops the rest (its counter).
    send(&lab, 0, 20);
    let got = recv(&mut xsk, 8, Duration::from_secs(5));
    assert_eq!(got.len(), 8);
    let seqs: Vec<u64> = got.iter().map(|f| seq_of(xsk.bytes(f)).unwrap()).collect();
    assert_eq!(seqs, (0..8).collect::<Vec<_>>(), "the first 8, in order");
    // While the application holds all 8, a refill finds the pool empty: counted, nothing lent.
    assert_eq!(xsk.refill(), 0);
    assert!(xsk.stats().fill_starved >= 1, "{:?}", xsk.stats());
    let k = xsk.kernel_stats().unwrap();
    assert!(
        k.rx_fill_ring_empty_descs + k.rx_dropped >= 1,
        "the kernel counted its drops: {k:?}"
    );
    assert_eq!(xsk.pool().lent_to_kernel(), 0);
    for f in got {
        xsk.put(f.handle);
    }
    // The frames go back to the kernel and the path runs again.
    assert!(xsk.refill() > 0);
    send(&lab, 100, 5);
    let got = recv(&mut xsk, 5, Duration::from_secs(5));
    let seqs: Vec<u64> = got.iter().map(|f| seq_of(xsk.bytes(f)).unwrap()).collect();
    assert_eq!(seqs, (100..105).collect::<Vec<_>>());
    for f in got {
        xsk.put(f.handle);
    }
    // The socket holds the only references: audit while frames are lent.
    let r = xsk.audit().unwrap();
    assert_eq!(r.lent_to_kernel, xsk.lent(LentTo::Fill) as usize);
    assert_eq!(r.lent_to_kernel + r.in_ring + r.in_caches + r.in_use, 8);
    assert_eq!(xsk.stats().bad_descriptors, 0);
}

#[test]
fn a_socket_closed_with_frames_in_flight_gives_every_frame_back() {
    let Some(lab) = lab("xtclose") else { return };
    let mut pool = pool(64);
    {
        let mut xsk = XdpSocket::new(pool.clone(), &XdpConfig::new(&lab.a)).unwrap();
        xsk.refill();
        send(&lab, 0, 10);
        // Let them land in the RX ring, and take 3 out: held by the application.
        let held = recv(&mut xsk, 3, Duration::from_secs(5));
        assert!(held.len() >= 3);
        std::thread::sleep(Duration::from_millis(50));
        assert!(pool.lent_to_kernel() > 0);
        drop(xsk); // the rest: in the fill ring and unread in the RX ring
        assert_eq!(pool.lent_to_kernel(), 0, "every lent frame came back");
        for f in held {
            assert_eq!(f.len, 64, "held frames stay valid");
            pool.put(f.handle);
        }
    }
    assert!(pool.is_full());
    let r = Arc::get_mut(&mut pool).unwrap().audit().unwrap();
    assert_eq!((r.in_use, r.lent_to_kernel), (0, 0));
}

#[test]
fn the_pool_may_be_dropped_before_the_socket() {
    let Some(lab) = lab("xtpool") else { return };
    let pool = pool(64);
    let weak = Arc::downgrade(&pool);
    let mut xsk = XdpSocket::new(pool, &XdpConfig::new(&lab.a)).unwrap(); // the only Arc now
    xsk.refill();
    send(&lab, 0, 4);
    let got = recv(&mut xsk, 4, Duration::from_secs(5));
    assert_eq!(got.len(), 4);
    assert!(weak.upgrade().is_some(), "the socket keeps the pool alive");
    for f in got {
        xsk.pool().put(f.handle);
    }
    drop(xsk);
    assert!(weak.upgrade().is_none(), "and releases it after closing");
}

#[test]
fn transmitted_frames_complete_back_into_the_pool() {
    let Some(lab) = lab("xttx") else { return };
    // Receiver: AF_XDP on `a` (root namespace). Sender: a TX-only AF_XDP socket on `b`, in
    // the namespace, whose frames come from a second pool.
    let rx_pool = pool(256);
    let mut rx = XdpSocket::new(rx_pool.clone(), &XdpConfig::new(&lab.a)).unwrap();
    rx.refill();
    let (b, dst, src) = (lab.b.clone(), lab.mac_a, lab.mac_b);
    let sender = lab.in_ns(move || {
        let tx_pool = pool(128);
        let mut cfg = XdpConfig::new(&b);
        cfg.rx = false;
        cfg.tx = true;
        cfg.load_program = false;
        let mut tx = XdpSocket::new(tx_pool.clone(), &cfg).unwrap();
        let mut batch = Vec::new();
        for seq in 0..300u64 {
            let mut h = loop {
                // All frames in flight: reap completions until one is back.
                match tx.get() {
                    Ok(h) => break h,
                    Err(_) => {
                        tx.kick_tx().unwrap();
                        tx.complete();
                        std::thread::sleep(Duration::from_micros(200));
                    }
                }
            };
            tx_pool.get_mut(&mut h)[..64].copy_from_slice(&frame(dst, src, seq, 64));
            batch.push(Frame {
                handle: h,
                offset: 0,
                len: 64,
            });
            if batch.len() == 16 || seq == 299 {
                while !batch.is_empty() {
                    tx.transmit(&mut batch).unwrap();
                    tx.complete();
                }
                // Pace the sender so the receiver's fill ring keeps up (no drops to count).
                std::thread::sleep(Duration::from_micros(300));
            }
        }
        // Everything handed over completes.
        let t0 = Instant::now();
        while tx.lent(LentTo::Tx) > 0 && t0.elapsed() < Duration::from_secs(5) {
            tx.kick_tx().unwrap();
            tx.complete();
            std::thread::sleep(Duration::from_millis(1));
        }
        let s = tx.stats();
        let lent = tx.lent(LentTo::Tx);
        drop(tx);
        (s, lent, tx_pool.is_full(), tx_pool.lent_to_kernel())
    });
    let mut got = 0usize;
    let mut next = 0u64;
    let t0 = Instant::now();
    let mut frames = Vec::new();
    while got < 300 && t0.elapsed() < Duration::from_secs(10) {
        rx.poll(&mut frames, Some(Duration::from_millis(20)))
            .unwrap();
        for f in frames.drain(..) {
            if let Some(s) = seq_of(rx.bytes(&f)) {
                assert!(s >= next, "in order");
                next = s + 1;
                got += 1;
            }
            rx.put(f.handle);
        }
    }
    let (s, lent, full, tx_lent) = sender.join().unwrap().unwrap();
    assert_eq!(s.tx_frames, 300);
    assert_eq!(s.tx_completed, 300, "{s:?}");
    assert_eq!(s.bad_descriptors, 0);
    assert_eq!((lent, tx_lent), (0, 0));
    assert!(full, "every transmitted frame is back in its pool");
    assert!(
        got >= 290,
        "received {got} of 300 ({:?})",
        rx.kernel_stats()
    );
}

#[test]
fn unaligned_frames_of_an_odd_stride_are_received() {
    let Some(lab) = lab("xtodd") else { return };
    // 3008 bytes = 47 cache lines: not a power of two, so XDP_UMEM_UNALIGNED_CHUNK_FLAG.
    let pool = Arc::new(PoolBuilder::<[u8; 3008]>::zeroed(64).build().unwrap());
    assert_eq!(pool.stride(), 3008);
    let mut xsk = XdpSocket::new(pool.clone(), &XdpConfig::new(&lab.a)).unwrap();
    assert!(!xsk.frame_map().aligned());
    xsk.refill();
    send(&lab, 7, 20);
    let mut got = Vec::new();
    let mut batch = Vec::new();
    let t0 = Instant::now();
    while got.len() < 20 && t0.elapsed() < Duration::from_secs(5) {
        xsk.poll(&mut batch, Some(Duration::from_millis(20)))
            .unwrap();
        for f in batch.drain(..) {
            if seq_of(xsk.bytes(&f)).is_some() {
                got.push(f);
            } else {
                xsk.put(f.handle);
            }
        }
    }
    assert_eq!(got.len(), 20);
    for (k, f) in got.into_iter().enumerate() {
        assert_eq!(seq_of(xsk.bytes(&f)), Some(7 + k as u64));
        pool.put(f.handle);
    }
    drop(xsk);
    assert!(pool.is_full());
}

// ---- no kernel needed -------------------------------------------------------------------------

#[test]
fn a_frame_returned_twice_is_refused_and_never_minted() {
    use idxpool::xdp::{DescriptorFault, FrameLedger};
    use idxpool::PoolError;
    let mut pool = pool(8);
    {
        let mut ledger = FrameLedger::new(pool.clone()).unwrap();
        let mut addrs = Vec::new();
        for _ in 0..4 {
            let h = pool.get().unwrap();
            addrs.push(ledger.lend(h, LentTo::Fill).map_err(|(_, e)| e).unwrap());
        }
        let h = pool.get().unwrap();
        let tx_addr = ledger.lend(h, LentTo::Tx).map_err(|(_, e)| e).unwrap();
        assert_eq!(pool.lent_to_kernel(), 5);
        let fault = |r: Result<_, PoolError>| match r {
            Err(PoolError::BadDescriptor { fault, .. }) => fault,
            other => panic!("expected a refusal, got {other:?}"),
        };
        // A broken peer returns frame 0 twice: the second is refused.
        let (h0, off) = ledger.reclaim(addrs[0] + 256, 64, LentTo::Fill).unwrap();
        assert_eq!(off, 256);
        assert_eq!(
            fault(ledger.reclaim(addrs[0] + 256, 64, LentTo::Fill)),
            DescriptorFault::NotLent
        );
        assert_eq!(
            fault(ledger.reclaim(addrs[0], 0, LentTo::Fill)),
            DescriptorFault::NotLent
        );
        // A TX frame on the RX ring, an RX frame on the completion ring: refused.
        assert_eq!(
            fault(ledger.reclaim(tx_addr, 64, LentTo::Fill)),
            DescriptorFault::NotLent
        );
        assert_eq!(
            fault(ledger.reclaim(addrs[1], 0, LentTo::Tx)),
            DescriptorFault::NotLent
        );
        // Past the UMEM, a packet past its frame: refused.
        assert_eq!(
            fault(ledger.reclaim(8 * 2048, 64, LentTo::Fill)),
            DescriptorFault::OutOfRange
        );
        assert_eq!(
            fault(ledger.reclaim(u64::MAX, 64, LentTo::Fill)),
            DescriptorFault::OutOfRange
        );
        assert_eq!(
            fault(ledger.reclaim(addrs[1] + 2000, 64, LentTo::Fill)),
            DescriptorFault::PastFrame
        );
        // A never-lent frame (free in the pool).
        let free = (0..8u64)
            .map(|i| i * 2048)
            .find(|a| !addrs.contains(a) && *a != tx_addr)
            .unwrap();
        assert_eq!(
            fault(ledger.reclaim(free, 64, LentTo::Fill)),
            DescriptorFault::NotLent
        );
        assert_eq!(ledger.refused(), 8);
        // Only the one good reclaim made a handle: 4 lent + h0 + 3 free = 8.
        assert_eq!(ledger.lent(LentTo::Fill), 3);
        assert_eq!(ledger.lent(LentTo::Tx), 1);
        assert_eq!(pool.lent_to_kernel(), 4);
        assert_eq!(pool.in_use(), 1, "exactly one handle out: h0");
        pool.put(h0);
        // The ledger's drop gives the lent frames back.
    }
    assert!(pool.is_full());
    let r = Arc::get_mut(&mut pool).unwrap().audit().unwrap();
    assert_eq!((r.in_use, r.lent_to_kernel), (0, 0));
}

#[test]
fn a_foreign_or_grown_handle_is_not_lent() {
    use idxpool::xdp::FrameLedger;
    use idxpool::PoolError;
    let a = pool(4);
    let b = pool(4);
    let mut ledger = FrameLedger::new(a.clone()).unwrap();
    let hb = b.get().unwrap();
    let (hb, e) = ledger.lend(hb, LentTo::Fill).unwrap_err();
    assert!(matches!(e, PoolError::ForeignHandle { .. }), "{e:?}");
    b.put(hb);
    // An object added by a grow after the ledger was made is no frame of the UMEM.
    let g = Arc::new(
        PoolBuilder::<[u8; 2048]>::zeroed(2)
            .stride(StrideMode::Natural)
            .max_capacity(8)
            .build()
            .unwrap(),
    );
    let mut ledger = FrameLedger::new(g.clone()).unwrap();
    g.grow(2).unwrap();
    let mut hs: Vec<_> = (0..4).map(|_| g.get().unwrap()).collect();
    let mut refused = 0;
    for h in hs.drain(..) {
        match ledger.lend(h, LentTo::Fill) {
            Ok(_) => {}
            Err((h, PoolError::IndexOutOfRange { capacity: 2, .. })) => {
                refused += 1;
                g.put(h);
            }
            Err((_, e)) => panic!("{e:?}"),
        }
    }
    assert_eq!(refused, 2);
    drop(ledger);
    assert!(g.is_full());
}

#[test]
fn bad_configs_are_typed_errors_and_lose_nothing() {
    use idxpool::xdp::UmemFault;
    use idxpool::{Backing, BackingPolicy, PoolError};
    fn fault<T: idxpool::bytemuck::Pod>(p: Arc<Pool<T>>, cfg: &XdpConfig) -> UmemFault {
        match XdpSocket::new(p.clone(), cfg) {
            Err(PoolError::Umem { fault, .. }) => {
                assert!(p.is_full(), "nothing taken");
                assert_eq!(p.lent_to_kernel(), 0);
                fault
            }
            Err(e) => panic!("expected a UMEM fault, got {e}"),
            Ok(_) => panic!("expected a UMEM fault, got a socket"),
        }
    }
    let cfg = XdpConfig::new("lo");
    // Frame size not the stride.
    let mut c = cfg.clone();
    c.frame_size = 4096;
    assert_eq!(
        fault(pool(8), &c),
        UmemFault::FrameSizeNotStride {
            frame_size: 4096,
            stride: 2048
        }
    );
    // The default stride pads a 2 KiB object to 2112 bytes: the object does not fill its frame.
    let padded = Arc::new(PoolBuilder::<[u8; 2048]>::zeroed(8).build().unwrap());
    assert_eq!(padded.stride(), 2112);
    assert_eq!(
        fault(padded, &cfg),
        UmemFault::ObjectNotFrame {
            object_size: 2048,
            stride: 2112
        }
    );
    // Frames below the kernel's 2048-byte chunk, or above the page.
    let small = Arc::new(
        PoolBuilder::<[u8; 1024]>::zeroed(8)
            .stride(StrideMode::Natural)
            .build()
            .unwrap(),
    );
    assert!(matches!(
        fault(small, &cfg),
        UmemFault::ChunkSize {
            stride: 1024,
            min: 2048,
            ..
        }
    ));
    let big = Arc::new(
        PoolBuilder::<[u8; 8192]>::zeroed(8)
            .stride(StrideMode::Natural)
            .build()
            .unwrap(),
    );
    assert!(matches!(
        fault(big, &cfg),
        UmemFault::ChunkSize { stride: 8192, .. }
    ));
    // Headroom that leaves no room after the kernel's 256 bytes.
    let mut c = cfg.clone();
    c.frame_headroom = 2048 - 256;
    assert_eq!(
        fault(pool(8), &c),
        UmemFault::Headroom {
            headroom: 1792,
            max: 1792
        }
    );
    // Ring sizes must be powers of two.
    let mut c = cfg.clone();
    c.fill_size = 1000;
    assert_eq!(
        fault(pool(8), &c),
        UmemFault::RingSize {
            ring: "fill",
            size: 1000
        }
    );
    let mut c = cfg.clone();
    c.tx = true;
    c.tx_size = 3;
    assert_eq!(
        fault(pool(8), &c),
        UmemFault::RingSize {
            ring: "tx",
            size: 3
        }
    );
    // A region not page aligned: the heap backing aligns to the object only.
    let mut misaligned = 0;
    for cap in 1..=16u32 {
        let p = Arc::new(
            PoolBuilder::<[u8; 2048]>::zeroed(cap)
                .stride(StrideMode::Natural)
                .backing(BackingPolicy::Require(Backing::Heap))
                .build()
                .unwrap(),
        );
        let base = p.base().as_ptr() as usize;
        if !base.is_multiple_of(4096) {
            misaligned += 1;
            assert_eq!(
                fault(p, &cfg),
                UmemFault::RegionNotPageAligned { base, page: 4096 }
            );
        }
    }
    assert!(
        misaligned > 0,
        "the heap gave page-aligned regions only: the case went untested"
    );
    // Neither RX nor TX; a NUL in the name.
    let mut c = cfg.clone();
    c.rx = false;
    assert!(matches!(
        XdpSocket::new(pool(8), &c),
        Err(PoolError::InvalidConfig { .. })
    ));
    let c = XdpConfig::new("a\0b");
    assert!(matches!(
        XdpSocket::new(pool(8), &c),
        Err(PoolError::InvalidConfig { .. })
    ));
}

#[test]
fn an_unknown_interface_is_a_kernel_error_and_loses_nothing() {
    if let Err(why) = idxpool::xdp::available() {
        println!("skipped: {why}");
        return;
    }
    let p = pool(8);
    match XdpSocket::new(p.clone(), &XdpConfig::new("nosuchif0")) {
        Err(idxpool::PoolError::Kernel { op, .. }) => assert_eq!(op, "xsk_socket__create"),
        other => panic!("{other:?}"),
    }
    assert!(p.is_full());
    assert_eq!(p.lent_to_kernel(), 0);
}

// ---- packet buffers ---------------------------------------------------------------------------

type BufPool = Pool<idxpool::PacketBuf>;

/// Packet buffers of one 2048-byte frame each (16-byte header + 2032-byte room), fresh ones
/// at `headroom`.
fn buf_pool(n: u32, headroom: usize) -> Arc<BufPool> {
    Arc::new(
        PoolBuilder::packet_bufs(n, 2032, headroom)
            .stride(StrideMode::Natural)
            .build()
            .unwrap(),
    )
}

/// Every buffer of `pool` used and given back dirty (data, a window moved into the headroom, a
/// tag), so that a receiver that lends buffers without a get's reset shows it if its receive
/// does not write the whole header.
fn dirty_all(pool: &Pool<idxpool::PacketBuf>) {
    let mut all = Vec::new();
    let n = pool.get_burst(&mut all, pool.capacity() as usize);
    assert_eq!(n, pool.capacity() as usize);
    for h in all.iter_mut() {
        let b = pool.get_mut(h);
        b.extend_from_slice(&[0x5a; 33]).unwrap();
        b.prepend(3).unwrap();
        b.set_tag(0xbad);
    }
    pool.put_bulk(&mut all);
}

#[test]
fn a_packet_buffer_descriptor_into_its_header_is_refused() {
    use idxpool::xdp::{DescriptorFault, FrameLedger};
    use idxpool::PoolError;
    let pool = buf_pool(4, 0);
    let mut ledger = FrameLedger::new(pool.clone()).unwrap();
    let h = pool.get().unwrap();
    let addr = ledger.lend(h, LentTo::Fill).map_err(|(_, e)| e).unwrap();
    for within in [0u64, 8, 15] {
        match ledger.reclaim(addr + within, 60, LentTo::Fill) {
            Err(PoolError::BadDescriptor { fault, .. }) => {
                assert_eq!(fault, DescriptorFault::InHeader)
            }
            other => panic!("a packet in the header must be refused: {other:?}"),
        }
    }
    let (h, off) = ledger.reclaim(addr + 16, 60, LentTo::Fill).unwrap();
    assert_eq!(off, 16, "the room's first byte is fine");
    pool.put(h);
    drop(ledger);
    assert!(pool.is_full());
}

#[test]
fn packet_buffers_receive_with_their_header_from_the_descriptor() {
    let Some(lab) = lab("xtbrx") else { return };
    // A distinctive default headroom (the header's constant word) and a frame headroom.
    let pool = buf_pool(256, 100);
    dirty_all(&pool);
    let mut cfg = XdpConfig::new(&lab.a);
    cfg.frame_headroom = 32;
    let mut xsk = XdpSocket::new(pool.clone(), &cfg).unwrap();
    xsk.refill();
    send(&lab, 0, 40);
    let mut got = Vec::new();
    let t0 = Instant::now();
    while got.len() < 40 && t0.elapsed() < Duration::from_secs(5) {
        xsk.poll(&mut got, Some(Duration::from_millis(20))).unwrap();
    }
    assert_eq!(got.len(), 40, "{:?}", xsk.stats());
    let data_at = 32 + idxpool::xdp::XDP_PACKET_HEADROOM as usize; // in the room
    for (k, f) in got.iter_mut().enumerate() {
        assert_eq!(f.offset as usize, 16 + data_at, "past the header");
        let want = xsk.bytes(f).to_vec();
        let b = pool.get_mut(&mut f.handle);
        assert_eq!(b.len(), 64, "length from the descriptor");
        assert_eq!(b.headroom(), data_at, "offset from the descriptor");
        assert_eq!(b.as_slice(), &want[..]);
        assert_eq!(seq_of(b), Some(k as u64));
        assert_eq!(&b[0..6], &lab.mac_a);
        assert_eq!(b.tag(), 0);
        assert_eq!(
            b.default_headroom(),
            100,
            "the header's constant word: never written by the kernel"
        );
        b.strip_front(14).unwrap(); // the Ethernet header, as rte_pktmbuf_adj
        assert_eq!(b.len(), 50);
    }
    assert_eq!(xsk.stats().bad_descriptors, 0);
    xsk.put_frames(&mut got);
    drop(xsk);
    assert!(pool.is_full());
    assert_eq!(pool.lent_to_kernel(), 0);
}

#[test]
fn packet_buffers_transmit_their_data_window() {
    let Some(lab) = lab("xtbtx") else { return };
    // Receiver on `a` (a Pod pool); a TX-only socket of packet buffers on `b`.
    let rx_pool = pool(256);
    let mut rx = XdpSocket::new(rx_pool.clone(), &XdpConfig::new(&lab.a)).unwrap();
    rx.refill();
    let (b, dst, src) = (lab.b.clone(), lab.mac_a, lab.mac_b);
    let sender = lab.in_ns(move || {
        use idxpool::xdp::DescriptorFault;
        use idxpool::PoolError;
        let tx_pool = buf_pool(64, 128);
        let mut cfg = XdpConfig::new(&b);
        cfg.rx = false;
        cfg.tx = true;
        cfg.load_program = false;
        let mut tx = XdpSocket::new(tx_pool.clone(), &cfg).unwrap();
        // Typed refusals, nothing handed over: another pool's buffer, an empty buffer.
        let other = buf_pool(4, 0);
        let mut foreign = vec![other.get().unwrap()];
        let e = tx.transmit_bufs(&mut foreign).unwrap_err();
        assert!(matches!(e, PoolError::ForeignHandle { .. }), "{e:?}");
        assert_eq!(foreign.len(), 1, "given back untouched");
        other.put(foreign.pop().unwrap());
        let mut empty = vec![tx.get().unwrap()];
        let e = tx.transmit_bufs(&mut empty).unwrap_err();
        assert!(
            matches!(
                e,
                PoolError::BadDescriptor {
                    fault: DescriptorFault::Empty,
                    ..
                }
            ),
            "{e:?}"
        );
        tx.put(empty.pop().unwrap());
        assert_eq!(tx.lent(LentTo::Tx), 0);
        // 40 frames: the payload appended, then the Ethernet header prepended into the
        // headroom, the tail trimmed: the descriptor must follow the window.
        let mut batch = Vec::new();
        for seq in 0..40u64 {
            let mut h = loop {
                match tx.get() {
                    Ok(h) => break h,
                    Err(_) => {
                        tx.complete();
                        std::thread::sleep(Duration::from_micros(200));
                    }
                }
            };
            let f = frame(dst, src, seq, 64);
            let buf = tx_pool.get_mut(&mut h);
            buf.extend_from_slice(&f[14..]).unwrap();
            buf.extend_from_slice(&[0xee; 7]).unwrap();
            buf.prepend(14).unwrap().copy_from_slice(&f[..14]);
            buf.strip_back(7).unwrap();
            assert_eq!(buf.as_slice(), &f[..]);
            batch.push(h);
            if batch.len() == 8 {
                while !batch.is_empty() {
                    tx.transmit_bufs(&mut batch).unwrap();
                    tx.complete();
                }
                std::thread::sleep(Duration::from_micros(300));
            }
        }
        let t0 = Instant::now();
        while tx.lent(LentTo::Tx) > 0 && t0.elapsed() < Duration::from_secs(5) {
            tx.kick_tx().unwrap();
            tx.complete();
            std::thread::sleep(Duration::from_millis(1));
        }
        let s = tx.stats();
        drop(tx);
        (s, tx_pool.is_full())
    });
    let mut got = Vec::new();
    let mut frames = Vec::new();
    let t0 = Instant::now();
    while got.len() < 40 && t0.elapsed() < Duration::from_secs(10) {
        rx.poll(&mut frames, Some(Duration::from_millis(20)))
            .unwrap();
        for f in frames.drain(..) {
            got.push(rx.bytes(&f).to_vec());
            rx.put(f.handle);
        }
    }
    let (s, full) = sender.join().unwrap().unwrap();
    assert_eq!((s.tx_frames, s.tx_completed), (40, 40), "{s:?}");
    assert!(full, "every buffer back in its pool");
    assert!(got.len() >= 38, "received {} of 40", got.len());
    for g in &got {
        let seq = seq_of(g).unwrap();
        assert_eq!(
            g,
            &frame(lab.mac_a, lab.mac_b, seq, 64),
            "the data window, exactly"
        );
    }
}

#[test]
fn tx_completions_recycle_to_the_fill_ring_and_nothing_is_lost() {
    let Some(lab) = lab("xtrecy") else { return };
    // One socket on `a`, RX and TX: every received buffer is sent back out (a reflector);
    // completions go straight to the fill ring.
    let pool = buf_pool(256, 0);
    let mut cfg = XdpConfig::new(&lab.a);
    cfg.tx = true;
    cfg.recycle_tx = true;
    cfg.lend = 128;
    let mut xsk = XdpSocket::new(pool, &cfg).unwrap(); // the only Arc: the audit needs it
    xsk.refill();
    let n = 400u64;
    let sender = {
        let (b, dst, src) = (lab.b.clone(), lab.mac_a, lab.mac_b);
        lab.in_ns(move || {
            let s = PacketSock::new(&b, 0).unwrap();
            for seq in 0..n {
                let f = frame(dst, src, seq, 64);
                while s.send_many(&[&f]) == 0 {
                    std::thread::sleep(Duration::from_millis(1));
                }
                if seq % 16 == 15 {
                    std::thread::sleep(Duration::from_micros(500));
                }
            }
        })
    };
    let mut frames = Vec::new();
    let mut bufs = Vec::new();
    let mut received = 0u64;
    let t0 = Instant::now();
    while received < n && t0.elapsed() < Duration::from_secs(10) {
        xsk.poll(&mut frames, Some(Duration::from_millis(20)))
            .unwrap();
        for mut f in frames.drain(..) {
            let b = xsk.pool().get_mut(&mut f.handle);
            assert_eq!(
                (b.len(), b.tag()),
                (64, 0),
                "a recycled buffer's header is rewritten"
            );
            assert_eq!(b.headroom(), idxpool::xdp::XDP_PACKET_HEADROOM as usize);
            b[..6].copy_from_slice(&lab.mac_b); // back to the sender
            received += 1;
            bufs.push(f.handle);
        }
        while !bufs.is_empty() {
            xsk.transmit_bufs(&mut bufs).unwrap();
            xsk.complete();
        }
    }
    sender.join().unwrap().unwrap();
    let t0 = Instant::now();
    while xsk.lent(LentTo::Tx) > 0 && t0.elapsed() < Duration::from_secs(5) {
        xsk.kick_tx().unwrap();
        xsk.complete();
        std::thread::sleep(Duration::from_millis(1));
    }
    let s = xsk.stats();
    assert!(received >= n - 10, "received {received} of {n}: {s:?}");
    assert_eq!(s.tx_frames, received);
    assert_eq!(s.tx_completed, s.tx_frames, "{s:?}");
    assert!(
        s.tx_recycled > 0,
        "completions went straight to the fill ring: {s:?}"
    );
    assert_eq!(s.bad_descriptors, 0);
    assert!(xsk.lent(LentTo::Fill) <= 128, "never past the lend target");
    // Every frame in exactly one place: free (pool, socket cache) or lent (fill, TX); none
    // held. The audit names each object once.
    let r = xsk.audit().unwrap();
    assert_eq!(r.in_use, 0);
    assert_eq!(
        r.lent_to_kernel,
        (xsk.lent(LentTo::Fill) + xsk.lent(LentTo::Tx)) as usize
    );
    // Dropped with frames lent: every one comes back, reset.
    let pool = xsk.pool_ref().clone();
    assert!(pool.lent_to_kernel() > 0);
    drop(xsk);
    assert_eq!(pool.lent_to_kernel(), 0);
    assert!(pool.is_full());
    let mut all = Vec::new();
    assert_eq!(pool.get_burst(&mut all, 256), 256);
    assert!(all.iter().all(|h| pool.get_ref(h).is_empty()));
    pool.put_bulk(&mut all);
}

#[test]
fn a_packet_buffer_frame_headroom_must_leave_room_past_the_header() {
    use idxpool::xdp::UmemFault;
    use idxpool::PoolError;
    // 2048-byte frames: 2048 - 256 - 16 = 1776 bytes of frame headroom at most (exclusive).
    let pool = buf_pool(8, 0);
    let mut cfg = XdpConfig::new("lo");
    cfg.frame_headroom = 1776;
    match XdpSocket::new(pool.clone(), &cfg) {
        Err(PoolError::Umem {
            fault: UmemFault::Headroom { headroom, max },
            ..
        }) => assert_eq!((headroom, max), (1776, 1776)),
        other => panic!("expected a headroom fault, got {other:?}"),
    }
    assert!(pool.is_full(), "nothing taken");
    // A frame of another pool: a typed error from try_bytes (needs a socket: the kernel).
    let Some(lab) = lab("xtbforeign") else { return };
    let xsk = XdpSocket::new(pool.clone(), &XdpConfig::new(&lab.a)).unwrap();
    let other = buf_pool(4, 0);
    let f = Frame {
        handle: other.get().unwrap(),
        offset: 16,
        len: 4,
    };
    assert!(matches!(
        xsk.try_bytes(&f),
        Err(PoolError::ForeignHandle { .. })
    ));
    other.put(f.handle);
}

#[test]
fn a_recycled_frame_received_again_has_its_header_from_the_descriptor() {
    let Some(lab) = lab("xtrecyhdr") else { return };
    // Every frame lent (lend target = capacity): after the first 128 fills, which take fresh
    // buffers from the pool, every fill is a recycled TX completion, which passes no get and
    // no reset. Each buffer is sent with a header unlike any received one (window moved,
    // shorter, a tag), so a header not rewritten from the RX descriptor shows.
    let cap = 128u32;
    let pool = buf_pool(cap, 0);
    let mut cfg = XdpConfig::new(&lab.a);
    cfg.tx = true;
    cfg.recycle_tx = true;
    cfg.lend = cap;
    let mut xsk = XdpSocket::new(pool.clone(), &cfg).unwrap();
    let n = 600u64;
    let sender = {
        let (b, dst, src) = (lab.b.clone(), lab.mac_a, lab.mac_b);
        lab.in_ns(move || {
            let s = PacketSock::new(&b, 0).unwrap();
            for seq in 0..n {
                let f = frame(dst, src, seq, 64);
                while s.send_many(&[&f]) == 0 {
                    std::thread::sleep(Duration::from_millis(1));
                }
                if seq % 16 == 15 {
                    std::thread::sleep(Duration::from_micros(500));
                }
            }
        })
    };
    let data_at = idxpool::xdp::XDP_PACKET_HEADROOM as usize;
    let mut sent_once = vec![false; cap as usize];
    let (mut received, mut again) = (0u64, 0u64);
    let (mut frames, mut bufs) = (Vec::new(), Vec::new());
    let t0 = Instant::now();
    while received < n && t0.elapsed() < Duration::from_secs(10) {
        xsk.poll(&mut frames, Some(Duration::from_millis(20)))
            .unwrap();
        for mut f in frames.drain(..) {
            let index = pool.index_of(&f.handle) as usize;
            let want = xsk.bytes(&f).to_vec();
            let b = pool.get_mut(&mut f.handle);
            assert_eq!(
                (b.headroom(), b.len(), b.tag()),
                (data_at, 64, 0),
                "data window and tag from the descriptor (frame {index}, sent before: {})",
                sent_once[index]
            );
            assert_eq!(f.offset as usize, 16 + data_at);
            assert_eq!(b.as_slice(), &want[..]);
            assert!(seq_of(b).is_some_and(|s| s < n));
            if sent_once[index] {
                again += 1;
            }
            // Sent with another header: 2 bytes prepended, 4 stripped off the tail, a tag.
            b.strip_back(4).unwrap();
            b.prepend(2).unwrap().copy_from_slice(&[0xee; 2]);
            b.set_tag(0xdead_beef);
            sent_once[index] = true;
            received += 1;
            bufs.push(f.handle);
        }
        while !bufs.is_empty() {
            xsk.transmit_bufs(&mut bufs).unwrap();
            xsk.complete();
        }
    }
    sender.join().unwrap().unwrap();
    let s = xsk.stats();
    assert!(received >= n - 10, "received {received} of {n}: {s:?}");
    assert_eq!(s.bad_descriptors, 0, "{s:?}");
    assert_eq!(
        s.frames_filled - s.tx_recycled,
        u64::from(cap),
        "only the first fills took buffers from the pool (a get); every later one was a \
         recycled completion: {s:?}"
    );
    assert!(
        again >= received - u64::from(cap),
        "frames received again after a recycle: {again} of {received}"
    );
    drop(xsk);
    assert!(pool.is_full());
    assert_eq!(pool.lent_to_kernel(), 0);
}

#[test]
fn a_packet_buffer_reclaimed_from_the_fill_ring_has_its_header_from_the_descriptor() {
    use idxpool::xdp::FrameLedger;
    // The ledger hands a handle out without a get: a frame lent to the fill ring comes back
    // described by its descriptor, whatever its header said when it was lent.
    let pool = buf_pool(4, 40);
    let mut ledger = FrameLedger::new(pool.clone()).unwrap();
    let mut h = pool.get().unwrap();
    let b = pool.get_mut(&mut h);
    b.extend_from_slice(&[1; 100]).unwrap();
    b.prepend(8).unwrap();
    b.set_tag(77);
    let addr = ledger.lend(h, LentTo::Fill).map_err(|(_, e)| e).unwrap();
    let (h, off) = ledger.reclaim(addr + 16 + 300, 60, LentTo::Fill).unwrap();
    assert_eq!(off, 316);
    let b = pool.get_ref(&h);
    assert_eq!((b.headroom(), b.len(), b.tag()), (300, 60, 0));
    assert_eq!(b.default_headroom(), 40);
    // A TX frame comes back as it was lent: the kernel only read it.
    let mut h = h;
    pool.get_mut(&mut h).set_tag(9);
    let addr = ledger.lend(h, LentTo::Tx).map_err(|(_, e)| e).unwrap();
    let (h, _) = ledger.reclaim(addr + 316, 0, LentTo::Tx).unwrap();
    let b = pool.get_ref(&h);
    assert_eq!((b.headroom(), b.len(), b.tag()), (300, 60, 9));
    pool.put(h);
    drop(ledger);
    assert!(pool.is_full());
}

#[test]
fn a_receive_window_that_does_not_fit_leaves_no_stale_header() {
    use idxpool::xdp::RxObject;
    // `received` with a window past the room (a misbehaving kernel; the receivers validate
    // every descriptor first, so only a direct call reaches this): the buffer is empty at its
    // default headroom with the new tag, not the window of its last use.
    let pool = buf_pool(2, 24);
    let mut h = pool.get().unwrap();
    let b = pool.get_mut(&mut h);
    b.extend_from_slice(&[9; 50]).unwrap();
    b.set_tag(5);
    b.received(false, 2000, 100, 3);
    assert_eq!((b.headroom(), b.len(), b.tag()), (24, 0, 3));
    b.received(false, 100, 40, 4);
    assert_eq!((b.headroom(), b.len(), b.tag()), (100, 40, 4));
    pool.put(h);
}

#[test]
fn a_packet_buffer_frame_sent_from_its_header_is_refused() {
    use idxpool::xdp::DescriptorFault;
    use idxpool::PoolError;
    let Some(lab) = lab("xtbtxhdr") else { return };
    // `transmit` takes `Frame`s with public fields: over packet buffers, a frame starting in
    // the 16-byte header would put the header on the wire. Refused as the RX side refuses a
    // descriptor into it; nothing is handed over.
    let pool = buf_pool(8, 0);
    let mut cfg = XdpConfig::new(&lab.a);
    cfg.rx = false;
    cfg.tx = true;
    cfg.load_program = false;
    let mut xsk = XdpSocket::new(pool.clone(), &cfg).unwrap();
    for offset in [0u32, 15] {
        let mut frames = vec![
            Frame {
                handle: xsk.get().unwrap(),
                offset: 16,
                len: 60,
            },
            Frame {
                handle: xsk.get().unwrap(),
                offset,
                len: 60,
            },
        ];
        match xsk.transmit(&mut frames) {
            Err(PoolError::BadDescriptor { fault, .. }) => {
                assert_eq!(fault, DescriptorFault::InHeader)
            }
            other => panic!("a frame in the header must be refused: {other:?}"),
        }
        assert_eq!(frames.len(), 2, "nothing handed over");
        assert_eq!(xsk.lent(LentTo::Tx), 0);
        xsk.put_frames(&mut frames);
    }
    drop(xsk);
    assert!(pool.is_full());
}
