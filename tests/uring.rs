//! io_uring provided-buffer rings fed from a pool, on a real io_uring and real sockets
//! (feature `uring`): packets are handles, the rings run dry and recover, sockets close with
//! buffers in flight, the pool's last `Arc` goes before the receiver, several buffer groups.
//! Each test skips, saying why, only where io_uring is disabled.
#![cfg(all(feature = "uring", target_os = "linux"))]

use std::net::UdpSocket;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use idxpool::uring::{Packet, RxConfig, SockState, UringRx};
use idxpool::{Pool, PoolBuilder};

type Buf = [u8; 2048];
type Pkt = Packet<Buf>;

/// True when io_uring works here; otherwise prints why the test is skipped.
fn uring_ok(test: &str) -> bool {
    match idxpool::uring::available() {
        Ok(()) => true,
        Err(why) => {
            eprintln!("{test}: skipped: {why}");
            false
        }
    }
}

/// A connected pair of UDP sockets on loopback, with a large receive buffer (no drops).
fn udp_pair() -> (UdpSocket, UdpSocket) {
    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let size: libc::c_int = 4 << 20;
    // SAFETY: a valid socket and a c_int option of the right size.
    let r = unsafe {
        libc::setsockopt(
            rx.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&size as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0);
    tx.connect(rx.local_addr().unwrap()).unwrap();
    (rx, tx)
}

/// Datagram `i`: its 4-byte sequence number, then `len - 4` bytes of `i as u8`.
fn datagram(i: u32, len: usize) -> Vec<u8> {
    let mut v = vec![i as u8; len.max(4)];
    v[..4].copy_from_slice(&i.to_le_bytes());
    v
}

fn check(rx: &UringRx<Arc<Pool<Buf>>>, p: &Pkt) -> u32 {
    let b = rx.bytes(p);
    assert_eq!(b.len(), p.len as usize);
    let i = u32::from_le_bytes(b[..4].try_into().unwrap());
    assert!(b[4..].iter().all(|&x| x == i as u8), "datagram {i} intact");
    i
}

/// Polls until `out` holds `n` packets or nothing more arrives for 5 s.
fn poll_until(rx: &mut UringRx<Arc<Pool<Buf>>>, out: &mut Vec<Pkt>, n: usize) {
    let mut last = Instant::now();
    while out.len() < n && last.elapsed() < Duration::from_secs(5) {
        if rx.poll(out, Some(Duration::from_millis(20))).unwrap() > 0 {
            last = Instant::now();
        }
    }
}

fn pool(cap: u32, name: &str) -> Arc<Pool<Buf>> {
    Arc::new(
        PoolBuilder::<Buf>::zeroed(cap)
            .cache_size(0)
            .name(name)
            .build()
            .unwrap(),
    )
}

/// Every object in exactly one place: free, held, or lent to the kernel.
fn conserved(p: &Pool<Buf>) {
    assert_eq!(
        p.available() + p.in_use() + p.lent_to_kernel(),
        p.capacity() as usize
    );
}

#[test]
fn received_datagrams_are_handles_with_their_bytes() {
    if !uring_ok("received_datagrams_are_handles_with_their_bytes") {
        return;
    }
    let pool = pool(256, "uring-basic");
    let (sock, tx) = udp_pair();
    let cfg = RxConfig {
        burst: 32,
        ..RxConfig::default()
    };
    let mut rx = UringRx::new(pool.clone(), cfg).unwrap();
    let id = rx.recv_multishot(sock.as_raw_fd()).unwrap();
    rx.poll(&mut Vec::new(), None).unwrap();
    assert!(
        rx.lent() > 0 && rx.lent() <= 192,
        "lent up to 3/4 of the pool"
    );
    assert_eq!(pool.lent_to_kernel(), rx.lent() as usize);
    conserved(&pool);
    let mut out = Vec::new();
    let mut next = 0u32;
    for round in 0..5u32 {
        for i in 0..50 {
            let k = round * 50 + i;
            tx.send(&datagram(k, 4 + (k as usize * 37) % 1400)).unwrap();
        }
        poll_until(&mut rx, &mut out, 50);
        assert_eq!(out.len(), 50, "round {round}: all 50 datagrams");
        for p in out.drain(..) {
            assert_eq!(p.sock, id);
            assert_eq!(p.len as usize, 4 + (next as usize * 37) % 1400);
            assert_eq!(check(&rx, &p), next, "in order");
            next += 1;
            pool.put(p.handle);
        }
        conserved(&pool);
    }
    let s = rx.stats();
    assert_eq!(s.packets, 250);
    assert!(
        s.tail_publishes <= s.rearm_bursts,
        "one tail publish per burst (one group)"
    );
    assert_eq!(s.bad_completions, 0);
    drop(rx);
    assert_eq!(pool.lent_to_kernel(), 0);
    assert!(pool.is_full());
}

#[test]
fn the_ring_runs_dry_and_nothing_is_lost() {
    if !uring_ok("the_ring_runs_dry_and_nothing_is_lost") {
        return;
    }
    // 8 buffers, all lent: the 9th datagram finds the ring empty (ENOBUFS) and must wait in
    // the socket until the application gives buffers back.
    let pool = pool(8, "uring-dry");
    let (sock, tx) = udp_pair();
    let cfg = RxConfig {
        lend: 8,
        burst: 8,
        ..RxConfig::default()
    };
    let mut rx = UringRx::new(pool.clone(), cfg).unwrap();
    rx.recv_multishot(sock.as_raw_fd()).unwrap();
    for k in 0..40 {
        tx.send(&datagram(k, 64)).unwrap();
    }
    let mut got = Vec::new();
    let mut held = Vec::new();
    for round in 0..5 {
        poll_until(&mut rx, &mut held, 8);
        assert_eq!(held.len(), 8, "round {round}: the 8 buffers filled");
        // Holding all 8: another poll receives nothing, and the receive ran dry.
        let mut more = Vec::new();
        rx.poll(&mut more, Some(Duration::from_millis(20))).unwrap();
        assert!(more.is_empty(), "no buffer, no packet");
        assert!(rx.stats().enobufs > round, "ENOBUFS seen in round {round}");
        assert_eq!(pool.in_use(), 8);
        assert_eq!(pool.lent_to_kernel(), 0);
        for p in held.drain(..) {
            got.push(check(&rx, &p));
            pool.put(p.handle);
        }
    }
    assert_eq!(
        got,
        (0..40).collect::<Vec<u32>>(),
        "every datagram, once, in order"
    );
    assert!(
        rx.stats().recv_rearms >= 4,
        "the receive was armed again after each ENOBUFS"
    );
    assert_eq!(
        rx.sock_state(idxpool::uring::SockId(0)),
        Some(SockState::Open)
    );
    drop(rx);
    assert!(pool.is_full());
}

#[test]
fn a_socket_closes_with_buffers_in_flight() {
    if !uring_ok("a_socket_closes_with_buffers_in_flight") {
        return;
    }
    let pool = pool(64, "uring-close");
    let mut rx = UringRx::new(pool.clone(), RxConfig::default()).unwrap();

    // 1. The peer closes a SOCK_SEQPACKET pair: queued messages arrive, then end of file.
    let mut fds = [0; 2];
    // SAFETY: fds has room for the two descriptors.
    assert_eq!(
        unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_SEQPACKET, 0, fds.as_mut_ptr()) },
        0
    );
    // SAFETY: fresh descriptors, owned here.
    let (a, b) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let id = rx.recv_multishot(a.as_raw_fd()).unwrap();
    for k in 0..5u32 {
        let d = datagram(k, 100);
        // SAFETY: d is valid for d.len() bytes.
        let n = unsafe { libc::send(b.as_raw_fd(), d.as_ptr().cast(), d.len(), 0) };
        assert_eq!(n, 100);
    }
    drop(b); // the peer closes with 5 messages in flight
    let mut out = Vec::new();
    let t = Instant::now();
    while rx.sock_state(id) == Some(SockState::Open) && t.elapsed() < Duration::from_secs(5) {
        rx.poll(&mut out, Some(Duration::from_millis(20))).unwrap();
    }
    assert_eq!(rx.sock_state(id), Some(SockState::Eof));
    assert_eq!(out.len(), 5, "every queued message before the end of file");
    for (k, p) in out.iter().enumerate() {
        assert_eq!(check(&rx, p), k as u32);
    }
    conserved(&pool);

    // 2. The application closes a UDP socket it still receives on: cancelled, the last
    // completions reaped, the packets that made it returned.
    let (sock, tx) = udp_pair();
    let id2 = rx.recv_multishot(sock.as_raw_fd()).unwrap();
    for k in 0..20 {
        tx.send(&datagram(k, 200)).unwrap();
    }
    let mut udp = Vec::new();
    poll_until(&mut rx, &mut udp, 10);
    rx.close(id2, &mut udp).unwrap();
    assert_eq!(rx.sock_state(id2), Some(SockState::Closed));
    drop(sock);
    let before = udp.len();
    rx.poll(&mut udp, Some(Duration::from_millis(20))).unwrap();
    assert_eq!(udp.len(), before, "nothing after the close");
    for (k, p) in udp.iter().enumerate() {
        assert_eq!(check(&rx, p), k as u32);
    }
    // The kernel still holds its lent buffers; the application holds the packets.
    assert!(rx.lent() > 0);
    assert_eq!(pool.lent_to_kernel(), rx.lent() as usize);
    assert_eq!(pool.in_use(), out.len() + udp.len());
    conserved(&pool);
    // The receiver goes while packets are still held: its lent buffers come home, the held
    // packets stay valid and go home when put.
    drop(rx);
    assert_eq!(pool.lent_to_kernel(), 0);
    assert_eq!(pool.in_use(), out.len() + udp.len());
    for p in out.drain(..).chain(udp.drain(..)) {
        pool.put(p.handle);
    }
    assert!(pool.is_full());
    let mut pool = Arc::into_inner(pool).unwrap();
    let r = pool.audit().unwrap();
    assert_eq!((r.in_use, r.lent_to_kernel, r.in_ring), (0, 0, 64));
}

#[test]
fn the_pool_may_be_dropped_while_the_kernel_holds_buffers() {
    if !uring_ok("the_pool_may_be_dropped_while_the_kernel_holds_buffers") {
        return;
    }
    static LEAKS: Mutex<Vec<String>> = Mutex::new(Vec::new());
    idxpool::leaks::set_leak_hook(|r| LEAKS.lock().unwrap().push(r.pool.to_string()));
    let pool = pool(128, "uring-pool-dropped-first");
    let (sock, tx) = udp_pair();
    let mut rx = UringRx::new(pool, RxConfig::default()).unwrap(); // the last Arc goes in
    rx.recv_multishot(sock.as_raw_fd()).unwrap();
    rx.poll(&mut Vec::new(), None).unwrap();
    assert_eq!(rx.lent(), 96);
    // The audit counts the kernel's buffers as lent: each named once, none free.
    let r = rx.audit().unwrap();
    assert_eq!(r.lent_to_kernel, 96);
    assert_eq!(r.in_use, 0);
    assert_eq!(r.in_ring + r.in_caches, 32);
    // Receiving goes on with the application's own reference gone.
    for k in 0..10 {
        tx.send(&datagram(k, 300)).unwrap();
    }
    let mut out = Vec::new();
    poll_until(&mut rx, &mut out, 10);
    assert_eq!(out.len(), 10);
    for (k, p) in out.drain(..).enumerate() {
        assert_eq!(check(&rx, &p), k as u32);
        rx.pool().put(p.handle);
    }
    let r = rx.audit().unwrap();
    assert_eq!(r.lent_to_kernel as u32, rx.lent());
    assert_eq!(r.in_use, 0);
    // More datagrams in flight in the kernel when the receiver (and with it the pool) goes.
    for k in 0..10 {
        tx.send(&datagram(k, 300)).unwrap();
    }
    // (A Weak made only now: `audit` needs the receiver's Arc to be the only reference.)
    let weak = Arc::downgrade(rx.pool_ref());
    assert!(
        weak.upgrade().is_some(),
        "the receiver keeps the pool alive"
    );
    drop(rx);
    assert!(
        weak.upgrade().is_none(),
        "the pool is gone with the receiver"
    );
    assert!(
        !LEAKS
            .lock()
            .unwrap()
            .iter()
            .any(|n| n == "uring-pool-dropped-first"),
        "every buffer came home before the pool was dropped"
    );
}

#[test]
fn several_buffer_groups_share_one_socket() {
    if !uring_ok("several_buffer_groups_share_one_socket") {
        return;
    }
    // 64 buffers in 4 groups of 16 (bgids 100..104), all lent.
    let pool = pool(64, "uring-groups");
    let (sock, tx) = udp_pair();
    let cfg = RxConfig {
        group_size: 16,
        bgid_base: 100,
        lend: 64,
        burst: 64,
        ..RxConfig::default()
    };
    let mut rx = UringRx::new(pool.clone(), cfg).unwrap();
    let map = rx.bid_map();
    assert_eq!(map.groups(), 4);
    rx.recv_multishot(sock.as_raw_fd()).unwrap();
    rx.poll(&mut Vec::new(), None).unwrap();
    assert_eq!(rx.lent(), 64);
    assert_eq!(
        rx.stats().tail_publishes,
        4,
        "one publish per group for the burst"
    );
    let mut next = 0u32;
    for round in 0..3 {
        for _ in 0..64 {
            tx.send(&datagram(next, 128)).unwrap();
            next += 1;
        }
        let mut out = Vec::new();
        poll_until(&mut rx, &mut out, 64);
        assert_eq!(out.len(), 64, "round {round}");
        // Holding all 64: every group gave its 16 buffers.
        let mut per_group = [0; 4];
        for p in &out {
            let (bgid, _bid) = map.locate(pool.index_of(&p.handle)).unwrap();
            per_group[usize::from(bgid - 100)] += 1;
        }
        assert_eq!(per_group, [16; 4], "round {round}");
        let mut seqs: Vec<u32> = out.iter().map(|p| check(&rx, p)).collect();
        seqs.sort_unstable();
        assert_eq!(
            seqs,
            ((round * 64)..(round * 64 + 64)).collect::<Vec<u32>>()
        );
        for p in out {
            pool.put(p.handle);
        }
    }
    drop(rx);
    assert!(pool.is_full());
    let mut pool = Arc::into_inner(pool).unwrap();
    assert_eq!(pool.audit().unwrap().in_ring, 64);
}

#[test]
fn bad_configurations_are_errors() {
    if !uring_ok("bad_configurations_are_errors") {
        return;
    }
    let p = pool(8, "uring-bad");
    for cfg in [
        RxConfig {
            group_size: 3,
            ..RxConfig::default()
        },
        RxConfig {
            headroom: 2048,
            ..RxConfig::default()
        },
        RxConfig {
            group_size: 1,
            bgid_base: 65_530,
            ..RxConfig::default()
        },
    ] {
        assert!(matches!(
            UringRx::new(p.clone(), cfg),
            Err(idxpool::PoolError::InvalidConfig { .. })
        ));
    }
    // Receivers one after the other over one pool: each gives everything back.
    let a = UringRx::new(p.clone(), RxConfig::default()).unwrap();
    drop(a);
    let b = UringRx::new(p.clone(), RxConfig::default()).unwrap();
    drop(b);
    assert!(p.is_full());
}

#[test]
fn the_reset_hook_runs_on_every_buffer_given_back() {
    // The packets' puts and the receiver's drop (its lent buffers back) run
    // the pool's `on_put` hook, once per buffer.
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    if !uring_ok("the_reset_hook_runs_on_every_buffer_given_back") {
        return;
    }
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let pool = Arc::new(
        PoolBuilder::<Buf>::zeroed(128)
            .cache_size(0)
            .name("uring-hook")
            .on_put(move |b: &mut Buf| {
                b[..4].fill(0);
                c.fetch_add(1, SeqCst);
            })
            .build()
            .unwrap(),
    );
    let (sock, tx) = udp_pair();
    let cfg = RxConfig {
        burst: 16,
        ..RxConfig::default()
    };
    let mut rx = UringRx::new(pool.clone(), cfg).unwrap();
    rx.recv_multishot(sock.as_raw_fd()).unwrap();
    rx.poll(&mut Vec::new(), None).unwrap();
    for k in 0..20 {
        tx.send(&datagram(k, 100)).unwrap();
    }
    let mut out = Vec::new();
    poll_until(&mut rx, &mut out, 20);
    assert_eq!(out.len(), 20);
    let before = calls.load(SeqCst);
    for p in out.drain(..) {
        pool.put(p.handle);
    }
    assert_eq!(calls.load(SeqCst), before + 20, "one call per packet put");
    let (lent, before) = (rx.lent() as usize, calls.load(SeqCst));
    assert!(lent > 0);
    drop(rx);
    assert_eq!(
        calls.load(SeqCst),
        before + lent,
        "the lent buffers given back at the receiver's drop"
    );
    assert!(pool.is_full());
}

// ---- packet buffers -------------------------------------------------------------------------

type PktBufPool = Pool<idxpool::PacketBuf>;

fn packet_pool(cap: u32, room: usize, headroom: usize, name: &str) -> Arc<PktBufPool> {
    Arc::new(
        PoolBuilder::packet_bufs(cap, room, headroom)
            .cache_size(0)
            .name(name)
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

fn poll_bufs(
    rx: &mut UringRx<Arc<PktBufPool>>,
    out: &mut Vec<Packet<idxpool::PacketBuf>>,
    n: usize,
) {
    let mut last = Instant::now();
    while out.len() < n && last.elapsed() < Duration::from_secs(5) {
        if rx.poll(out, Some(Duration::from_millis(20))).unwrap() > 0 {
            last = Instant::now();
        }
    }
}

#[test]
fn packet_buffers_get_their_header_from_the_completion() {
    if !uring_ok("packet_buffers_get_their_header_from_the_completion") {
        return;
    }
    use idxpool::packet::DEFAULT_HEADROOM;
    // Room 2048: the receiver lends 2048 - 112 bytes of each room; a longer datagram is cut.
    let pool = packet_pool(128, 2048, DEFAULT_HEADROOM, "uring-pktbuf");
    dirty_all(&pool);
    let cfg = RxConfig {
        headroom: DEFAULT_HEADROOM as u32,
        burst: 32,
        ..RxConfig::default()
    };
    let mut rx = UringRx::new(pool.clone(), cfg).unwrap();
    let (s1, t1) = udp_pair();
    let (s2, t2) = udp_pair();
    let id1 = rx.recv_multishot(s1.as_raw_fd()).unwrap();
    let id2 = rx.recv_multishot(s2.as_raw_fd()).unwrap();
    assert_ne!(id1, id2);
    rx.poll(&mut Vec::new(), None).unwrap();
    let lent_room = 2048 - DEFAULT_HEADROOM;
    let sizes = [1usize, 4, 60, 1472, lent_room, lent_room + 60];
    for (k, &n) in sizes.iter().enumerate() {
        let d = datagram(k as u32, n);
        t1.send(&d).unwrap();
        t2.send(&d).unwrap();
    }
    let mut out = Vec::new();
    poll_bufs(&mut rx, &mut out, 2 * sizes.len());
    assert_eq!(out.len(), 2 * sizes.len(), "{:?}", rx.stats());
    let mut seen = [0usize; 2];
    for mut p in out.drain(..) {
        let which = usize::from(p.sock == id2);
        let (k, n) = (seen[which], sizes[seen[which]]);
        seen[which] += 1;
        let want = datagram(k as u32, n);
        let want = &want[..n.max(4).min(lent_room)]; // cut to the lent room
        assert_eq!(p.len as usize, want.len());
        assert_eq!(rx.bytes(&p), want, "the bytes as received");
        let b = pool.get_mut(&mut p.handle);
        assert_eq!(b.len(), want.len(), "length from the completion");
        assert_eq!(
            b.headroom(),
            DEFAULT_HEADROOM,
            "offset = the headroom lent past"
        );
        assert_eq!(b.as_slice(), want, "data = the datagram");
        assert_eq!(b.tag(), p.sock.0 as u32, "tag = the socket");
        assert_eq!(
            b.default_headroom(),
            DEFAULT_HEADROOM,
            "the header's constant word: never written by the kernel"
        );
        assert_eq!(b.headroom() + b.len() + b.tailroom(), b.capacity());
        // The header is the buffer's own now: the usual operations apply.
        b.prepend(8).unwrap().copy_from_slice(b"prefix:!");
        assert_eq!(&b[..8], b"prefix:!");
        pool.put(p.handle);
    }
    assert_eq!(rx.stats().bad_completions, 0);
    drop(rx);
    assert!(pool.is_full());
}

#[test]
fn packet_buffers_with_no_headroom_start_at_the_room() {
    if !uring_ok("packet_buffers_with_no_headroom_start_at_the_room") {
        return;
    }
    let pool = packet_pool(16, 2032, 64, "uring-pktbuf-0");
    let mut rx = UringRx::new(pool.clone(), RxConfig::default()).unwrap();
    let (s, t) = udp_pair();
    rx.recv_multishot(s.as_raw_fd()).unwrap();
    rx.poll(&mut Vec::new(), None).unwrap();
    t.send(&datagram(7, 100)).unwrap();
    let mut out = Vec::new();
    poll_bufs(&mut rx, &mut out, 1);
    let p = out.pop().unwrap();
    let b = pool.get_ref(&p.handle);
    assert_eq!((b.headroom(), b.len(), b.default_headroom()), (0, 100, 64));
    assert_eq!(b.as_slice(), &datagram(7, 100)[..]);
    pool.put(p.handle);
    let h = pool.get().unwrap();
    let b = pool.get_ref(&h);
    assert_eq!(
        (b.headroom(), b.len()),
        (64, 0),
        "back in the pool: reset to the pool's headroom"
    );
    pool.put(h);
}

#[test]
fn a_packet_buffer_headroom_that_leaves_no_room_is_refused() {
    // The object is 16 + 64 bytes: a headroom of 64 leaves nothing to lend.
    let pool = packet_pool(8, 64, 0, "uring-pktbuf-bad");
    for headroom in [64u32, 65, u32::MAX] {
        let cfg = RxConfig {
            headroom,
            ..RxConfig::default()
        };
        let r = UringRx::new(pool.clone(), cfg);
        assert!(
            matches!(r, Err(idxpool::PoolError::InvalidConfig { .. })),
            "headroom {headroom}: {r:?}"
        );
    }
    assert!(pool.is_full(), "nothing taken");
    if uring_ok("a_packet_buffer_headroom_that_leaves_no_room_is_refused") {
        let cfg = RxConfig {
            headroom: 63,
            ..RxConfig::default()
        };
        assert!(UringRx::new(pool.clone(), cfg).is_ok(), "one byte to lend");
    }
}

#[test]
fn packet_buffers_lent_at_drop_come_back_fresh() {
    if !uring_ok("packet_buffers_lent_at_drop_come_back_fresh") {
        return;
    }
    let pool = packet_pool(64, 1024, 32, "uring-pktbuf-drop");
    dirty_all(&pool);
    let cfg = RxConfig {
        headroom: 32,
        ..RxConfig::default()
    };
    let mut rx = UringRx::new(pool.clone(), cfg).unwrap();
    let (s, t) = udp_pair();
    rx.recv_multishot(s.as_raw_fd()).unwrap();
    rx.poll(&mut Vec::new(), None).unwrap();
    for i in 0..20 {
        t.send(&datagram(i, 200)).unwrap();
    }
    let mut held = Vec::new();
    poll_bufs(&mut rx, &mut held, 5);
    // More arrive while the application holds some: in flight in the kernel at the drop.
    for i in 20..30 {
        t.send(&datagram(i, 300)).unwrap();
    }
    std::thread::sleep(Duration::from_millis(20));
    assert!(pool.lent_to_kernel() > 0);
    drop(rx);
    assert_eq!(pool.lent_to_kernel(), 0, "every lent buffer came back");
    for p in held {
        assert_eq!(
            pool.get_ref(&p.handle).len(),
            p.len as usize,
            "held ones intact"
        );
        pool.put(p.handle);
    }
    assert!(pool.is_full());
    // Every buffer is a fresh one: empty, at the pool's headroom, tag 0.
    let mut all = Vec::new();
    assert_eq!(pool.get_burst(&mut all, 64), 64);
    for h in &all {
        let b = pool.get_ref(h);
        assert_eq!((b.len(), b.headroom(), b.tag()), (0, 32, 0));
    }
    pool.put_bulk(&mut all);
}

#[test]
fn a_packet_of_another_pool_is_a_typed_error() {
    if !uring_ok("a_packet_of_another_pool_is_a_typed_error") {
        return;
    }
    let pool = packet_pool(8, 256, 0, "uring-pktbuf-mine");
    let other = packet_pool(8, 256, 0, "uring-pktbuf-other");
    let rx = UringRx::new(pool.clone(), RxConfig::default()).unwrap();
    let p = Packet {
        handle: other.get().unwrap(),
        len: 4,
        sock: idxpool::uring::SockId(0),
    };
    let r = rx.try_bytes(&p);
    assert!(
        matches!(r, Err(idxpool::PoolError::ForeignHandle { .. })),
        "{r:?}"
    );
    other.put(p.handle);
    let mut h = pool.get().unwrap();
    pool.get_mut(&mut h).extend_from_slice(b"abcd").unwrap();
    let p = Packet {
        handle: h,
        len: 4,
        sock: idxpool::uring::SockId(0),
    };
    assert_eq!(
        rx.try_bytes(&p).unwrap(),
        b"abcd",
        "its own: the lent window"
    );
    pool.put(p.handle);
}
