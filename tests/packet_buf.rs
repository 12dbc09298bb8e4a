//! Packet buffers: every operation, every short room, the reset on every get form after every
//! put path, the builder's bad sizes, and a model-based test of random operations against a
//! `VecDeque`.

use std::collections::VecDeque;

use idxpool::handle_ring::Zeroing;
use idxpool::packet::{End, RoomError, DEFAULT_HEADROOM, HEADER, MAX_ROOM};
use idxpool::{
    Handle, HandleRing, LocalCache, PacketBuf, Pool, PoolBuilder, PoolError, Pooled, StrideMode,
};
use proptest::prelude::*;

fn pool(n: u32, room: usize, headroom: usize) -> Pool<PacketBuf> {
    PoolBuilder::packet_bufs(n, room, headroom)
        .cache_size(0)
        .build()
        .unwrap()
}

/// Every field a safe caller can see, for "unchanged" checks.
fn state(b: &PacketBuf) -> (usize, usize, usize, usize, u32, Vec<u8>) {
    (
        b.headroom(),
        b.len(),
        b.tailroom(),
        b.capacity(),
        b.tag(),
        b.as_slice().to_vec(),
    )
}

#[test]
fn handles_stay_four_bytes() {
    assert_eq!(std::mem::size_of::<Handle<PacketBuf>>(), 4);
    assert_eq!(std::mem::size_of::<Option<Handle<PacketBuf>>>(), 4);
}

#[test]
fn fresh_buffer_is_empty_at_the_default_headroom() {
    let p = pool(4, 2048, DEFAULT_HEADROOM);
    assert_eq!(p.object_size(), HEADER + 2048);
    let mut hs = Vec::new();
    p.get_bulk(&mut hs, 4).unwrap();
    for h in &hs {
        let b = p.get_ref(h);
        assert_eq!(b.len(), 0);
        assert!(b.is_empty());
        assert_eq!(b.headroom(), DEFAULT_HEADROOM);
        assert_eq!(b.default_headroom(), DEFAULT_HEADROOM);
        assert_eq!(b.tailroom(), 2048 - DEFAULT_HEADROOM);
        assert_eq!(b.capacity(), 2048);
        assert_eq!(b.tag(), 0);
        assert_eq!(b.as_slice(), b"");
        // Data at object byte 128, a line boundary.
        let obj = b as *const PacketBuf as *const u8 as usize;
        assert_eq!((obj + HEADER + b.headroom()) % 64, 0);
    }
    p.put_bulk(&mut hs);
}

#[test]
fn room_is_rounded_up_to_eight() {
    let p = pool(2, 13, 3);
    let b = p.get_pooled().unwrap();
    assert_eq!(b.capacity(), 16);
    assert_eq!(b.tailroom(), 13);
}

#[test]
fn natural_stride_makes_af_xdp_frames() {
    let p = PoolBuilder::packet_bufs(8, 2048 - HEADER, 0)
        .stride(StrideMode::Natural)
        .build()
        .unwrap();
    assert_eq!(p.stride(), 2048);
}

#[test]
fn every_operation_meaning() {
    let p = pool(1, 64, 16);
    let mut b = p.get_pooled().unwrap();
    b.append(4).unwrap().copy_from_slice(b"abcd");
    assert_eq!(&b[..], b"abcd");
    b.prepend(2).unwrap().copy_from_slice(b"xy");
    assert_eq!(b.as_slice(), b"xyabcd");
    assert_eq!((b.headroom(), b.len(), b.tailroom()), (14, 6, 44));
    b.strip_front(1).unwrap();
    assert_eq!(&*b, b"yabcd");
    b.strip_back(2).unwrap();
    assert_eq!(&*b, b"yab");
    b.as_mut_slice()[0] = b'Y';
    b[1] = b'A'; // DerefMut
    assert_eq!(&*b, b"YAb");
    b.truncate(10); // longer: no effect
    assert_eq!(b.len(), 3);
    b.truncate(1);
    assert_eq!(&*b, b"Y");
    b.extend_from_slice(b"123").unwrap();
    assert_eq!(&*b, b"Y123");
    b.spare_mut()[..2].copy_from_slice(b"zz");
    b.append(2).unwrap();
    assert_eq!(&*b, b"Y123zz");
    b.set_tag(0xdead);
    assert_eq!(b.tag(), 0xdead);
    let head = b.headroom();
    b.clear();
    assert_eq!((b.len(), b.headroom()), (0, head));
    b.set_data(0, 64).unwrap();
    assert_eq!((b.headroom(), b.len(), b.tailroom()), (0, 64, 0));
    b.room_mut()[63] = 9;
    assert_eq!(b[63], 9);
    b.reset();
    assert_eq!((b.headroom(), b.len(), b.tag()), (16, 0, 0));
    // io::Write appends what fits.
    use std::io::Write;
    b.set_data(0, 60).unwrap();
    assert_eq!(b.write(b"0123456789").unwrap(), 4);
    assert_eq!(b.write(b"x").unwrap(), 0);
    assert!(b.write_all(b"x").is_err());
    assert_eq!(b.len(), 64);
    // Eq / Hash / AsRef by data.
    assert!(p.get_pooled().is_err(), "pool of one");
    let r: &[u8] = (*b).as_ref();
    assert_eq!(r.len(), 64);
    assert!(format!("{:?}", &*b).contains("len: 64"));
}

#[test]
fn short_room_is_a_typed_error_and_changes_nothing() {
    let p = pool(1, 64, 16);
    let mut b = p.get_pooled().unwrap();
    b.extend_from_slice(b"hello").unwrap();
    b.set_tag(7);
    let before = state(&b);

    let e = b.prepend(17).unwrap_err();
    assert_eq!((e.asked(), e.available(), e.end()), (17, 16, End::Front));
    assert_eq!(state(&b), before);

    let e = b.append(44).unwrap_err();
    assert_eq!((e.asked(), e.available(), e.end()), (44, 43, End::Back));
    assert_eq!(e.to_string(), "append of 44 bytes: tailroom is 43");
    assert_eq!(state(&b), before);

    let e = b.extend_from_slice(&[0; 44]).unwrap_err();
    assert_eq!(e.asked(), 44);
    assert_eq!(state(&b), before);

    let e = b.strip_front(6).unwrap_err();
    assert_eq!((e.asked(), e.available(), e.end()), (6, 5, End::Front));
    assert_eq!(state(&b), before);

    let e = b.strip_back(6).unwrap_err();
    assert_eq!((e.asked(), e.available(), e.end()), (6, 5, End::Back));
    assert_eq!(state(&b), before);

    assert!(b.set_data(60, 5).is_err());
    assert!(b.set_data(usize::MAX, 2).is_err());
    assert!(b.set_data(1, usize::MAX).is_err());
    assert_eq!(state(&b), before);

    for n in [usize::MAX, usize::MAX / 2, u32::MAX as usize + 1] {
        assert!(b.prepend(n).is_err());
        assert!(b.append(n).is_err());
        assert!(b.strip_front(n).is_err());
        assert!(b.strip_back(n).is_err());
        assert_eq!(state(&b), before);
    }

    // `?` into PoolError: its own variant.
    fn through(b: &mut PacketBuf) -> Result<(), PoolError> {
        b.prepend(1000)?;
        Ok(())
    }
    assert!(matches!(
        through(&mut b),
        Err(PoolError::NoRoom(RoomError { .. }))
    ));
}

#[test]
fn exact_fits_succeed_and_leave_no_room() {
    let p = pool(1, 64, 16);
    let mut b = p.get_pooled().unwrap();
    assert_eq!(b.prepend(16).unwrap().len(), 16);
    assert_eq!(b.headroom(), 0);
    assert!(b.prepend(1).is_err());
    assert_eq!(b.append(48).unwrap().len(), 48);
    assert_eq!(b.tailroom(), 0);
    assert!(b.append(1).is_err());
    assert_eq!(b.len(), 64);
    b.strip_front(64).unwrap();
    assert_eq!((b.len(), b.headroom(), b.tailroom()), (0, 64, 0));
    assert!(b.append(0).is_ok() && b.prepend(0).is_ok());
}

#[test]
fn builder_rejects_bad_sizes_with_typed_errors() {
    let cases: [(usize, usize, &str); 5] = [
        (64, 65, "config"),
        (0, 0, "config"),
        (usize::MAX, 0, "overflow"),
        (MAX_ROOM + 1, 0, "overflow"),
        (u32::MAX as usize, 0, "overflow"),
    ];
    for (room, headroom, want) in cases {
        let r = PoolBuilder::packet_bufs(8, room, headroom).build();
        match (want, r) {
            ("config", Err(PoolError::InvalidConfig { .. })) => {}
            ("overflow", Err(PoolError::SizeOverflow { .. })) => {}
            (_, r) => panic!("room {room} headroom {headroom}: {r:?}"),
        }
    }
    // The largest room is a layout the builder accepts (reported by the mapping, not a panic;
    // Miri's heap backing would allocate all 4 GiB).
    if !cfg!(miri) {
        let _ = PoolBuilder::packet_bufs(1, MAX_ROOM & !7, 0).build();
    }
    // headroom == room: a buffer with no tailroom is fine.
    let p = pool(1, 64, 64);
    assert_eq!(p.get_pooled().unwrap().tailroom(), 0);
}

fn dirty(b: &mut PacketBuf) {
    let _ = b.prepend(3);
    let _ = b.append(9);
    b.set_tag(99);
}

fn assert_clean(p: &Pool<PacketBuf>) {
    let mut hs = Vec::new();
    let n = p.get_burst(&mut hs, p.capacity() as usize);
    assert_eq!(n, p.capacity() as usize);
    for h in &hs {
        let b = p.get_ref(h);
        assert_eq!((b.len(), b.headroom(), b.tag()), (0, 8, 0), "{b:?}");
    }
    p.put_bulk(&mut hs);
}

#[test]
fn buffers_given_back_by_every_put_path_come_out_fresh() {
    let p = PoolBuilder::packet_bufs(8, 64, 8)
        .cache_size(2)
        .build()
        .unwrap();
    // put
    let mut h = p.get().unwrap();
    dirty(p.get_mut(&mut h));
    p.put(h);
    assert_clean(&p);
    // put_bulk
    let mut hs = Vec::new();
    p.get_bulk(&mut hs, 8).unwrap();
    for h in hs.iter_mut() {
        dirty(p.get_mut(h));
    }
    p.put_bulk(&mut hs);
    assert_clean(&p);
    // the guard's drop
    {
        let mut g = p.get_pooled().unwrap();
        dirty(&mut g);
    }
    assert_clean(&p);
    // a LocalCache
    {
        let mut c = LocalCache::new(&p);
        let mut h = c.get().unwrap();
        dirty(p.get_mut(&mut h));
        c.put(h);
    }
    assert_clean(&p);
    // a handle ring dropped with buffers inside
    {
        let (mut tx, rx) = HandleRing::new(&p, 4, Zeroing::Immediate).unwrap();
        let mut h = p.get().unwrap();
        dirty(p.get_mut(&mut h));
        tx.produce(h).unwrap();
        drop((tx, rx));
    }
    assert_clean(&p);
    assert_eq!(p.in_use(), 0);
}

#[test]
fn grow_makes_fresh_buffers() {
    let p = PoolBuilder::packet_bufs(2, 64, 24)
        .max_capacity(6)
        .build()
        .unwrap();
    assert_eq!(p.grow(4).unwrap(), 6);
    let mut hs = Vec::new();
    p.get_bulk(&mut hs, 6).unwrap();
    for h in &hs {
        assert_eq!((p.get_ref(h).headroom(), p.get_ref(h).len()), (24, 0));
    }
    p.put_bulk(&mut hs);
}

#[test]
fn user_hook_runs_after_the_reset() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let seen = Arc::new(AtomicUsize::new(usize::MAX));
    let s = seen.clone();
    let p = PoolBuilder::packet_bufs(2, 64, 8)
        .on_put(move |b: &mut PacketBuf| s.store(b.len() + b.tag() as usize, Ordering::Relaxed))
        .build()
        .unwrap();
    let mut g = p.get_pooled().unwrap();
    dirty(&mut g);
    drop(g);
    assert_eq!(
        seen.load(Ordering::Relaxed),
        0,
        "the hook saw a reset buffer"
    );
}

#[test]
fn a_header_written_behind_the_types_back_panics_never_reads_outside() {
    let p = pool(1, 64, 8);
    let mut g = p.get_pooled().unwrap();
    let hdr = &mut *g as *mut PacketBuf as *mut u32;
    // SAFETY (test): the first word of the object is the offset; this is what a device writing
    // bytes it was told not to would do.
    unsafe { hdr.write(u32::MAX) };
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| g.as_slice().len()));
    assert!(r.is_err());
    // The next get resets it.
    drop(g);
    assert_eq!(p.get_pooled().unwrap().headroom(), 8);
}

#[test]
fn pooled_guard_forwards_as_ref_and_as_mut() {
    let p = pool(1, 64, 8);
    let mut g = p.get_pooled().unwrap();
    g.extend_from_slice(b"abc").unwrap();
    AsMut::<[u8]>::as_mut(&mut g)[0] = b'A';
    let r: &[u8] = g.as_ref();
    assert_eq!(r, b"Abc");
    fn takes<B: AsRef<[u8]>>(b: B) -> usize {
        b.as_ref().len()
    }
    assert_eq!(takes(g), 3);
    assert_eq!(p.in_use(), 0);
    // A byte-buffer pool's guard gives the whole object.
    let bytes = PoolBuilder::bytes(1, 32, 8).build().unwrap();
    let g: Pooled<_> = bytes.get_pooled().unwrap();
    assert_eq!(AsRef::<[u8]>::as_ref(&g).len(), 32);
}

#[derive(Clone, Debug)]
enum Op {
    Prepend(usize, u8),
    Append(usize, u8),
    StripFront(usize),
    StripBack(usize),
    Truncate(usize),
    Clear,
    Reset,
    SetData(usize, usize),
    Poke(usize, u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0usize..80, any::<u8>()).prop_map(|(n, v)| Op::Prepend(n, v)),
        (0usize..80, any::<u8>()).prop_map(|(n, v)| Op::Append(n, v)),
        (0usize..80).prop_map(Op::StripFront),
        (0usize..80).prop_map(Op::StripBack),
        (0usize..80).prop_map(Op::Truncate),
        Just(Op::Clear),
        Just(Op::Reset),
        (0usize..80, 0usize..80).prop_map(|(o, l)| Op::SetData(o, l)),
        (0usize..80, any::<u8>()).prop_map(|(i, v)| Op::Poke(i, v)),
    ]
}

fn proptest_config() -> ProptestConfig {
    if cfg!(miri) {
        // Miri runs a handful of cases (it is ~1000x slower) and cannot write regression files.
        ProptestConfig {
            cases: 4,
            failure_persistence: None,
            ..ProptestConfig::default()
        }
    } else {
        ProptestConfig::with_cases(256)
    }
}

/// The model: the data as a `VecDeque`, with the headroom in front of it; the capacity is fixed.
struct Model {
    data: VecDeque<u8>,
    head: usize,
    cap: usize,
    default_head: usize,
}

proptest! {
    #![proptest_config(proptest_config())]
    #[test]
    fn random_operations_match_a_vecdeque(ops in proptest::collection::vec(op(), 0..64), headroom in 0usize..=64) {
        let p = pool(1, 64, headroom);
        let mut b = p.get_pooled().unwrap();
        let mut m = Model { data: VecDeque::new(), head: headroom, cap: 64, default_head: headroom };
        for o in ops {
            let before = state(&b);
            let tail = m.cap - m.head - m.data.len();
            match o {
                Op::Prepend(n, v) => match b.prepend(n) {
                    Ok(s) => {
                        prop_assert!(n <= m.head);
                        prop_assert_eq!(s.len(), n);
                        s.fill(v);
                        m.head -= n;
                        for _ in 0..n { m.data.push_front(v); }
                    }
                    Err(e) => {
                        prop_assert!(n > m.head);
                        prop_assert_eq!((e.asked(), e.available(), e.end()), (n, m.head, End::Front));
                        prop_assert_eq!(state(&b), before);
                    }
                },
                Op::Append(n, v) => match b.append(n) {
                    Ok(s) => {
                        prop_assert!(n <= tail);
                        prop_assert_eq!(s.len(), n);
                        s.fill(v);
                        for _ in 0..n { m.data.push_back(v); }
                    }
                    Err(e) => {
                        prop_assert!(n > tail);
                        prop_assert_eq!((e.asked(), e.available(), e.end()), (n, tail, End::Back));
                        prop_assert_eq!(state(&b), before);
                    }
                },
                Op::StripFront(n) => match b.strip_front(n) {
                    Ok(()) => {
                        prop_assert!(n <= m.data.len());
                        m.data.drain(..n);
                        m.head += n;
                    }
                    Err(_) => {
                        prop_assert!(n > m.data.len());
                        prop_assert_eq!(state(&b), before);
                    }
                },
                Op::StripBack(n) => match b.strip_back(n) {
                    Ok(()) => {
                        prop_assert!(n <= m.data.len());
                        m.data.truncate(m.data.len() - n);
                    }
                    Err(_) => {
                        prop_assert!(n > m.data.len());
                        prop_assert_eq!(state(&b), before);
                    }
                },
                Op::Truncate(n) => { b.truncate(n); m.data.truncate(n); }
                Op::Clear => { b.clear(); m.data.clear(); }
                Op::Reset => { b.reset(); m.data.clear(); m.head = m.default_head; }
                Op::SetData(o, l) => {
                    // The room's bytes are not tracked by the model past the data: re-read them.
                    match b.set_data(o, l) {
                        Ok(()) => {
                            prop_assert!(o + l <= m.cap);
                            m.head = o;
                            m.data = b.as_slice().iter().copied().collect();
                        }
                        Err(_) => {
                            prop_assert!(o + l > m.cap);
                            prop_assert_eq!(state(&b), before);
                        }
                    }
                }
                Op::Poke(i, v) => {
                    if i < m.data.len() {
                        b[i] = v;
                        m.data[i] = v;
                    }
                }
            }
            prop_assert_eq!(b.headroom(), m.head);
            prop_assert_eq!(b.len(), m.data.len());
            prop_assert_eq!(b.headroom() + b.len() + b.tailroom(), b.capacity());
            prop_assert_eq!(b.capacity(), m.cap);
            prop_assert!(b.iter().eq(m.data.iter()));
        }
        drop(b);
        let b = p.get_pooled().unwrap();
        prop_assert_eq!((b.len(), b.headroom(), b.tag()), (0, headroom, 0));
    }
}

// ---- The reset on get: every get form after every put path ---------------------------------

/// Buffers in the pools of the matrix below.
const N: usize = 8;

/// Every buffer of `hs` as a fresh one: no data, at the default headroom (8), tag 0; and all
/// distinct objects.
fn assert_fresh(p: &Pool<PacketBuf>, hs: &[Handle<PacketBuf>], what: &str) {
    assert_eq!(hs.len(), N, "{what}: got every buffer");
    let mut idx: Vec<u32> = hs.iter().map(|h| p.index_of(h)).collect();
    idx.sort_unstable();
    idx.dedup();
    assert_eq!(idx.len(), N, "{what}: distinct buffers");
    for h in hs {
        let b = p.get_ref(h);
        assert_eq!(
            (b.len(), b.headroom(), b.tag(), b.tailroom()),
            (0, 8, 0, 56),
            "{what}: {b:?}"
        );
    }
}

/// A minimal executor for `get_async`: polls on this thread, parking between polls.
fn block_on<F: std::future::Future>(fut: F) -> F::Output {
    use std::task::{Context, Poll, Wake, Waker};
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(std::sync::Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut fut = std::pin::pin!(fut);
    loop {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park();
    }
}

type PutPath = fn(&Pool<PacketBuf>, Vec<Handle<PacketBuf>>);
type GetForm = fn(&Pool<PacketBuf>) -> Vec<Handle<PacketBuf>>;

/// Every way a buffer goes back to its pool.
fn put_paths() -> Vec<(&'static str, PutPath)> {
    fn table(hs: Vec<Handle<PacketBuf>>) -> Vec<Option<Handle<PacketBuf>>> {
        hs.into_iter().map(Some).collect()
    }
    vec![
        ("put", |p, hs| hs.into_iter().for_each(|h| p.put(h))),
        ("try_put", |p, hs| {
            hs.into_iter().for_each(|h| p.try_put(h).unwrap())
        }),
        ("put_bulk", |p, mut hs| p.put_bulk(&mut hs)),
        ("put_from", |p, hs| p.put_from(&mut table(hs)).unwrap()),
        ("Mempool::put_bulk", |p, mut hs| {
            idxpool::Mempool::put_bulk(p, &mut hs)
        }),
        ("a guard's drop", |p, hs| {
            hs.into_iter()
                .for_each(|h| drop(Pooled::new(p, h).unwrap()))
        }),
        ("LocalCache::put", |p, hs| {
            let mut c = LocalCache::new(p);
            hs.into_iter().for_each(|h| c.put(h));
        }),
        ("LocalCache::put_bulk", |p, mut hs| {
            LocalCache::new(p).put_bulk(&mut hs)
        }),
        ("LocalCache::put_bulk_tail", |p, mut hs| {
            let mut c = LocalCache::new(p);
            c.put_bulk_tail(&mut hs, 3);
            c.put_bulk(&mut hs);
        }),
        ("LocalCache::put_array", |p, hs| {
            let mut c = LocalCache::new(p);
            let mut it = hs.into_iter();
            while let (Some(a), Some(b)) = (it.next(), it.next()) {
                c.put_array([a, b]);
            }
        }),
        ("LocalCache::put_from", |p, hs| {
            LocalCache::new(p).put_from(&mut table(hs)).unwrap()
        }),
        ("a handle ring dropped full", |p, hs| {
            let (mut tx, rx) = HandleRing::new(p, N, Zeroing::Immediate).unwrap();
            hs.into_iter().for_each(|h| tx.produce(h).unwrap());
            drop((tx, rx));
        }),
        ("a channel dropped full", |p, hs| {
            let (tx, rx) = idxpool::HandleChannel::new(p).unwrap();
            hs.into_iter().for_each(|h| tx.send(h).unwrap());
            drop((tx, rx));
        }),
        ("a thread that exits", |p, hs| {
            // An explicit join waits for the thread's exit, its cache's flush included (the
            // scope's own end does not).
            std::thread::scope(|s| {
                s.spawn(move || hs.into_iter().for_each(|h| p.put(h)))
                    .join()
                    .unwrap()
            })
        }),
    ]
}

/// Every way to take buffers (each takes all `N`).
fn get_forms() -> Vec<(&'static str, GetForm)> {
    fn from_table(t: Vec<Option<Handle<PacketBuf>>>) -> Vec<Handle<PacketBuf>> {
        t.into_iter().map(Option::unwrap).collect()
    }
    fn empty_table() -> Vec<Option<Handle<PacketBuf>>> {
        (0..N).map(|_| None).collect()
    }
    vec![
        ("get", |p| (0..N).map(|_| p.get().unwrap()).collect()),
        ("Mempool::get", |p| {
            (0..N).map(|_| idxpool::Mempool::get(p).unwrap()).collect()
        }),
        ("get_bulk", |p| {
            let mut hs = Vec::new();
            p.get_bulk(&mut hs, N).unwrap();
            hs
        }),
        ("get_burst", |p| {
            let mut hs = Vec::new();
            assert_eq!(p.get_burst(&mut hs, N + 3), N);
            hs
        }),
        ("get_into", |p| {
            let mut t = empty_table();
            p.get_into(&mut t).unwrap();
            from_table(t)
        }),
        ("get_pooled", |p| {
            (0..N)
                .map(|_| p.get_pooled().unwrap().into_handle())
                .collect()
        }),
        ("get_wait", |p| {
            (0..N)
                .map(|_| p.get_wait(std::time::Duration::from_secs(5)).unwrap())
                .collect()
        }),
        ("get_bulk_wait", |p| {
            let mut hs = Vec::new();
            p.get_bulk_wait(&mut hs, N, std::time::Duration::from_secs(5))
                .unwrap();
            hs
        }),
        ("get_async", |p| {
            (0..N).map(|_| block_on(p.get_async()).unwrap()).collect()
        }),
        ("LocalCache::get", |p| {
            let mut c = LocalCache::new(p);
            (0..N).map(|_| c.get().unwrap()).collect()
        }),
        ("LocalCache::get_bulk", |p| {
            let mut hs = Vec::new();
            LocalCache::new(p).get_bulk(&mut hs, N).unwrap();
            hs
        }),
        ("LocalCache::get_burst", |p| {
            let mut hs = Vec::new();
            assert_eq!(LocalCache::new(p).get_burst(&mut hs, N + 3), N);
            hs
        }),
        ("LocalCache::get_array", |p| {
            let mut c = LocalCache::new(p);
            let mut hs = Vec::new();
            for _ in 0..N / 2 {
                hs.extend(c.get_array::<2>().unwrap());
            }
            hs
        }),
        ("LocalCache::get_into", |p| {
            let mut c = LocalCache::new(p);
            let mut t = empty_table();
            c.get_into(&mut t[..N / 2]).unwrap();
            c.get_into(&mut t[N / 2..]).unwrap();
            from_table(t)
        }),
    ]
}

/// The reset moved from the put to the get: every get form hands out buffers with no trace
/// of their last use, after every put path gave them back dirty, with and without caches.
#[test]
fn every_get_form_after_every_put_path_hands_out_fresh_buffers() {
    let (puts, gets) = (put_paths(), get_forms());
    for cache in [0, 2] {
        let p = PoolBuilder::packet_bufs(N as u32, 64, 8)
            .cache_size(cache)
            .build()
            .unwrap();
        for (k, (put_name, put)) in puts.iter().enumerate() {
            // Under Miri every put path and every get form once (not every pair): minutes.
            let pairs: Vec<_> = if cfg!(miri) {
                vec![&gets[k % gets.len()]]
            } else {
                gets.iter().collect()
            };
            for (get_name, get) in pairs {
                let what = format!("cache {cache}, {put_name} then {get_name}");
                eprintln!("{what}");
                let mut hs = Vec::new();
                p.get_bulk(&mut hs, N).expect(&what);
                for h in hs.iter_mut() {
                    dirty(p.get_mut(h));
                }
                put(&p, hs);
                // The thread cache may hold some: the LocalCache forms reach the ring only.
                p.flush();
                let mut hs = get(&p);
                assert_fresh(&p, &hs, &what);
                p.put_bulk(&mut hs);
                p.flush();
                assert_eq!(p.available(), N, "{what}");
            }
        }
    }
}

/// A buffer put dirty into a cache and taken again from the top of that same cache (the
/// get's hit, no ring in between) is fresh: the thread cache and a `LocalCache`, one at a
/// time, as arrays, and through tables.
#[test]
fn a_cache_hit_hands_out_a_fresh_buffer() {
    let p = PoolBuilder::packet_bufs(N as u32, 64, 8)
        .cache_size(4)
        .build()
        .unwrap();
    let check = |b: &PacketBuf| assert_eq!((b.len(), b.headroom(), b.tag()), (0, 8, 0), "{b:?}");
    for _ in 0..3 {
        let mut h = p.get().unwrap();
        let i = p.index_of(&h);
        dirty(p.get_mut(&mut h));
        p.put(h);
        let h = p.get().unwrap();
        assert_eq!(p.index_of(&h), i, "the top of the thread cache");
        check(p.get_ref(&h));
        p.put(h);

        let mut t: [Option<Handle<PacketBuf>>; 2] = Default::default();
        p.get_into(&mut t).unwrap();
        t.iter_mut()
            .for_each(|h| dirty(p.get_mut(h.as_mut().unwrap())));
        p.put_from(&mut t).unwrap();
        p.get_into(&mut t).unwrap();
        t.iter().for_each(|h| check(p.get_ref(h.as_ref().unwrap())));
        p.put_from(&mut t).unwrap();

        let mut c = LocalCache::new(&p);
        let [mut a, mut b] = c.get_array::<2>().unwrap();
        dirty(p.get_mut(&mut a));
        dirty(p.get_mut(&mut b));
        c.put_array([a, b]);
        let [a, b] = c.get_array::<2>().unwrap();
        check(p.get_ref(&a));
        check(p.get_ref(&b));
        let mut hs = vec![a, b];
        hs.iter_mut().for_each(|h| dirty(p.get_mut(h)));
        c.put_bulk(&mut hs);
        c.get_bulk(&mut hs, 2).unwrap();
        hs.iter().for_each(|h| check(p.get_ref(h)));
        c.put_bulk(&mut hs);
        let mut g = Pooled::get(&p).unwrap();
        dirty(&mut g);
        drop(g);
        check(&Pooled::get(&p).unwrap());
    }
    assert_eq!(p.in_use(), 0);
}

/// The entry representations and identities all take the same get: a branded (scoped) pool
/// and index and pointer entries hand out fresh buffers too.
#[test]
fn every_repr_and_identity_resets_on_get() {
    fn round<B: idxpool::Brand, R: idxpool::repr::Repr>(p: &Pool<PacketBuf, B, R>) {
        let mut hs = Vec::new();
        p.get_bulk(&mut hs, N).unwrap();
        hs.iter_mut().for_each(|h| dirty(p.get_mut(h)));
        p.put_bulk(&mut hs);
        p.get_bulk(&mut hs, N).unwrap();
        for h in &hs {
            let b = p.get_ref(h);
            assert_eq!((b.len(), b.headroom(), b.tag()), (0, 8, 0), "{b:?}");
        }
        p.put_bulk(&mut hs);
    }
    let b = || PoolBuilder::packet_bufs(N as u32, 64, 8).cache_size(2);
    round(&b().repr::<idxpool::Index>().build().unwrap());
    b().repr::<idxpool::Pointer>()
        .scoped(|p| round(&p))
        .unwrap();
    b().scoped(|p| round(&p)).unwrap();
}

/// With a user's hook the pool runs the hook on put (after the reset, as
/// `user_hook_runs_after_the_reset` shows) and still resets on get: what the hook writes into
/// the header does not reach the next get, while its writes into the room stay.
#[test]
fn a_user_hook_runs_and_the_get_still_resets() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let p = PoolBuilder::packet_bufs(N as u32, 64, 8)
        .cache_size(2)
        .on_put(move |b: &mut PacketBuf| {
            c.fetch_add(1, Ordering::Relaxed);
            b.room_mut()[0] = 0xee; // the room: kept
            b.set_tag(5); // the header: reset by the next get
            let _ = b.append(4);
        })
        .build()
        .unwrap();
    let mut hs = Vec::new();
    p.get_bulk(&mut hs, N).unwrap();
    hs.iter_mut().for_each(|h| dirty(p.get_mut(h)));
    p.put_bulk(&mut hs);
    assert_eq!(calls.load(Ordering::Relaxed), N);
    p.get_bulk(&mut hs, N).unwrap();
    for h in hs.iter_mut() {
        let b = p.get_mut(h);
        assert_eq!((b.len(), b.headroom(), b.tag()), (0, 8, 0), "{b:?}");
        assert_eq!(b.room_mut()[0], 0xee);
    }
    p.put_bulk(&mut hs);
    assert_eq!(calls.load(Ordering::Relaxed), 2 * N);
}
