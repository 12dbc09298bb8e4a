//! `Bytes` from a pool guard without a copy, and `Buf`/`BufMut` on packet buffers (feature
//! `bytes`). Also run under Miri (scripts/miri.sh): the owner's drop on another thread and
//! after the user's `Arc` of the pool is gone.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use bytes::{Buf, BufMut, Bytes};
use idxpool::{PacketBuf, Pool, PoolBuilder, Pooled};

static LEAKS: AtomicUsize = AtomicUsize::new(0);

fn pool(n: u32) -> Arc<Pool<PacketBuf>> {
    idxpool::leaks::set_leak_hook(|_| {
        LEAKS.fetch_add(1, Ordering::SeqCst);
    });
    Arc::new(
        PoolBuilder::packet_bufs(n, 128, 16)
            .cache_size(0)
            .build()
            .unwrap(),
    )
}

#[test]
fn into_bytes_copies_nothing_and_clones_share_one_buffer() {
    let p = pool(2);
    let mut g = Pooled::get(p.clone()).unwrap();
    g.extend_from_slice(b"hello world").unwrap();
    let data_ptr = g.as_slice().as_ptr();
    let b = g.into_bytes();
    assert_eq!(b.as_ptr(), data_ptr, "no copy");
    assert_eq!(&b[..], b"hello world");
    let c = b.slice(6..);
    assert_eq!(c.as_ptr(), data_ptr.wrapping_add(6));
    assert_eq!(p.in_use(), 1);
    drop(b);
    assert_eq!(p.in_use(), 1, "a clone still holds the buffer");
    drop(c);
    assert_eq!(p.in_use(), 0);
    // Back reset.
    let g = p.get_pooled().unwrap();
    assert_eq!((g.len(), g.headroom()), (0, 16));
}

#[test]
fn last_clone_dropped_on_another_thread() {
    let p = pool(2);
    let mut g = Pooled::get(p.clone()).unwrap();
    g.put_slice(b"abc");
    let b: Bytes = g.into();
    let clones: Vec<Bytes> = (0..3).map(|_| b.clone()).collect();
    drop(b);
    let t = std::thread::spawn(move || {
        let n: usize = clones.iter().map(|c| c.len()).sum();
        drop(clones);
        n
    });
    assert_eq!(t.join().unwrap(), 9);
    assert_eq!(p.in_use(), 0);
}

#[test]
fn pool_arc_dropped_first_frees_at_the_last_clone_without_a_leak() {
    let before = LEAKS.load(Ordering::SeqCst);
    let p = pool(2);
    let weak: Weak<Pool<PacketBuf>> = Arc::downgrade(&p);
    let mut g = Pooled::get(p).unwrap(); // the user's Arc moves into the guard
    g.extend_from_slice(b"xyz").unwrap();
    let b = g.into_bytes();
    assert!(
        weak.upgrade().is_some(),
        "the guard in the Bytes holds the pool"
    );
    let t = std::thread::spawn(move || {
        assert_eq!(&b[..], b"xyz");
        drop(b);
    });
    t.join().unwrap();
    assert!(
        weak.upgrade().is_none(),
        "the pool dropped with the last clone"
    );
    assert_eq!(LEAKS.load(Ordering::SeqCst), before, "no leak report");
}

#[test]
fn byte_buffer_guard_gives_the_whole_object() {
    let p = Arc::new(PoolBuilder::bytes(2, 64, 8).build().unwrap());
    let mut g = Pooled::get(p.clone()).unwrap();
    g[0] = 7;
    let b = g.into_bytes();
    assert_eq!((b.len(), b[0]), (64, 7));
    drop(b);
    assert_eq!(p.in_use(), 0);
}

#[test]
fn buf_and_buf_mut_on_the_buffer_and_its_guard() {
    let p = pool(2);
    let mut g = p.get_pooled().unwrap();
    assert_eq!(g.remaining_mut(), 112);
    g.put_u32(0xdead_beef);
    g.put_slice(b"tail");
    assert_eq!(g.remaining(), 8);
    assert_eq!(g.get_u32(), 0xdead_beef); // Buf::advance = strip_front
    assert_eq!((g.headroom(), g.len()), (20, 4));
    assert_eq!(g.chunk(), b"tail");
    // Through &mut PacketBuf too.
    let b: &mut PacketBuf = &mut g;
    b.put_u8(b'!');
    assert_eq!(Buf::chunk(b), b"tail!");
    Buf::advance(b, 5);
    assert!(b.is_empty());
}

#[test]
fn past_the_room_panics_and_changes_nothing() {
    let p = pool(2);
    let mut g = p.get_pooled().unwrap();
    g.extend_from_slice(b"abc").unwrap();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| Buf::advance(&mut g, 4)));
    assert!(r.is_err());
    assert_eq!((g.len(), g.headroom()), (3, 16));
    let tail = g.tailroom();
    // SAFETY (test): past the room, which the contract says panics before any change.
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| unsafe {
        BufMut::advance_mut(&mut g, tail + 1)
    }));
    assert!(r.is_err());
    assert_eq!((g.len(), g.tailroom()), (3, tail));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        g.put_slice(&vec![0u8; tail + 1])
    }));
    assert!(r.is_err());
    assert_eq!(&g[..], b"abc");
}
