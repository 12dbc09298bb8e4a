//! A hostile peer against `idxpool::shared`: the peer is a thread that writes through its own
//! `MAP_SHARED` mapping of the region's file, which is what another process of the same user
//! sees. Offsets are those of the region layout (`#[repr(C)]` header, 128-byte process slots,
//! ring states; see DESIGN.md, "Region layout"), read from the header the creator wrote.
//!
//! What the threat model promises and these tests check: a peer's writes may lose objects
//! (counted), but never make this process panic, hand out one object twice in this process
//! (whatever the number of attachments of the region in it), or use a layout other than the
//! one the region was built with.
//!
//! Not under Miri: the region is a file mapping (`memfd_create`, `mmap` of a file), which Miri
//! cannot execute.

use std::collections::HashSet;
use std::fs::OpenOptions;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use idxpool::shared::{
    fingerprint, SharedBacking, SharedBackingPolicy, SharedHandle, SharedOptions, SharedPool,
};
use idxpool::{PoolError, StrideMode};

type Obj = [u64; 8];

fn fp() -> u64 {
    fingerprint("shared_hostile::Obj v1")
}

/// Header byte offsets (`#[repr(C)]`: magic u64, version u32, header size u32, fingerprint
/// u64, then `Params` (obj_size, obj_align, stride: u64; capacity, cache_size, max_procs,
/// channels, policy, reserved: u32), then `Sections` (17 u64), creator pid, pad, start).
const H_PARAMS: usize = 24;
const H_SECTIONS: usize = 72;
const H_SECTIONS_END: usize = H_SECTIONS + 17 * 8;
const S_RING_STATE: usize = H_SECTIONS + 8;
const S_RING_SLOTS: usize = H_SECTIONS + 16;
const S_RING_SLOT_COUNT: usize = H_SECTIONS + 24;
const S_PROCS: usize = H_SECTIONS + 64;
const S_OWNERS: usize = H_SECTIONS + 112;
/// A process slot is 128 bytes: owner u64, gen u32, len u32 (the cache fill), ...
const PROC_SLOT: usize = 128;
const SLOT_LEN: usize = 12;
/// A ring state: lock u64, head u32, tail u32.
const RING_TAIL: usize = 12;

/// Removes the test's names at the end, even after a failed assertion.
struct Names(Vec<String>);
impl Drop for Names {
    fn drop(&mut self) {
        for n in &self.0 {
            let _ = SharedPool::<u8>::remove(n);
        }
    }
}

fn name(tag: &str) -> String {
    format!("idxpool-hostile-{}-{tag}", std::process::id())
}

/// The peer: its own descriptor and mapping of the region.
struct Peer {
    map: memmap2::MmapMut,
}

impl Peer {
    fn open(path: &std::path::Path) -> Peer {
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .unwrap();
        let len = f.metadata().unwrap().len() as usize;
        // SAFETY: a test's own shared mapping of the region file; accessed only through
        // atomics and plain byte copies of the header below.
        let map = unsafe { memmap2::MmapOptions::new().len(len).map_mut(&f).unwrap() };
        Peer { map }
    }

    fn u32_at(&self, off: usize) -> &AtomicU32 {
        assert!(off.is_multiple_of(4) && off + 4 <= self.map.len());
        // SAFETY: aligned, inside the mapping, which lives as long as `self`.
        unsafe { &*self.map.as_ptr().add(off).cast::<AtomicU32>() }
    }

    fn u64_at(&self, off: usize) -> u64 {
        assert!(off.is_multiple_of(8) && off + 8 <= self.map.len());
        // SAFETY: as above.
        unsafe { &*self.map.as_ptr().add(off).cast::<AtomicU64>() }.load(Ordering::SeqCst)
    }

    /// The cache length word of process slot `slot`.
    fn cache_len(&self, slot: u32) -> &AtomicU32 {
        self.u32_at(self.u64_at(S_PROCS) as usize + slot as usize * PROC_SLOT + SLOT_LEN)
    }

    /// The owner word of object `i`.
    fn owner(&self, i: u32) -> &AtomicU32 {
        self.u32_at(self.u64_at(S_OWNERS) as usize + 4 * i as usize)
    }

    /// Appends `i` to the common ring (slot at the tail, then the tail).
    fn list_in_ring(&self, i: u32) {
        let state = self.u64_at(S_RING_STATE) as usize;
        let slots = self.u64_at(S_RING_SLOTS) as usize;
        let mask = self.u64_at(S_RING_SLOT_COUNT) as u32 - 1;
        let tail = self.u32_at(state + RING_TAIL);
        let t = tail.load(Ordering::SeqCst);
        self.u32_at(slots + 4 * (t & mask) as usize)
            .store(i, Ordering::SeqCst);
        tail.store(t.wrapping_add(1), Ordering::SeqCst);
    }

    /// Overwrites the header's layout fields (parameters and section offsets) with `src`'s.
    fn copy_layout_from(&mut self, src: &Peer) {
        self.map[H_PARAMS..H_SECTIONS_END].copy_from_slice(&src.map[H_PARAMS..H_SECTIONS_END]);
    }

    fn layout(&self) -> Vec<u8> {
        self.map[H_PARAMS..H_SECTIONS_END].to_vec()
    }

    fn set_layout(&mut self, bytes: &[u8]) {
        self.map[H_PARAMS..H_SECTIONS_END].copy_from_slice(bytes);
    }
}

fn cached(cache: u32) -> SharedOptions {
    SharedOptions {
        cache_size: Some(cache),
        ..SharedOptions::default()
    }
}

/// A peer flips the victim's own cache length word between full and empty while the victim
/// gets and puts. The cache algorithm must decide on one read of the word: before, it read
/// the length to size a pop and the mechanics read it again (`len - k` underflowed: a panic
/// out of `get`). Now: no panic, no object handed out twice; the damage (lost objects) is
/// what `audit` reports.
#[test]
fn peer_flipping_the_cache_length_never_panics_the_victim() {
    let n = name("len");
    let _names = Names(vec![n.clone()]);
    let pool = SharedPool::<Obj>::create(&n, 256, fp(), cached(8)).unwrap();
    let peer = Peer::open(pool.path());
    let slot = pool.slot();
    let stop = AtomicBool::new(false);
    let rounds = if cfg!(debug_assertions) {
        200_000
    } else {
        2_000_000
    };
    let outcome = std::thread::scope(|s| {
        s.spawn(|| {
            let w = peer.cache_len(slot);
            while !stop.load(Ordering::Relaxed) {
                w.store(16, Ordering::Relaxed);
                w.store(0, Ordering::Relaxed);
            }
        });
        let r = catch_unwind(AssertUnwindSafe(|| {
            let mut held: Vec<SharedHandle<Obj>> = Vec::new();
            for r in 0..rounds {
                if let Ok(h) = pool.get() {
                    held.push(h);
                }
                let _ = pool.get_bulk(&mut held, 1 + r % 5);
                pool.get_burst(&mut held, r % 3);
                let live: HashSet<u32> = held.iter().map(|h| h.index()).collect();
                assert_eq!(live.len(), held.len(), "one object handed out twice");
                if held.len() > 16 {
                    let h = held.pop().unwrap();
                    pool.put(h);
                    pool.put_bulk(&mut held);
                }
            }
            pool.put_bulk(&mut held);
        }));
        stop.store(true, Ordering::Relaxed);
        r
    });
    if let Err(e) = outcome {
        let msg = e
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        panic!("the victim panicked under a peer's cache-length writes: {msg}");
    }
    // The damage (objects lost or listed twice by the peer's writes) is what `audit`
    // reports, and stays within the region. How much is lost depends on how the two threads
    // interleave (on a loaded machine the peer may lose every object), so the pool is
    // repaired before it is asked to go on working.
    pool.flush();
    let a = pool.audit();
    assert_eq!(a.out_of_range, 0, "{a}");
    // SAFETY: the peer's thread has ended and no other attachment of the region exists.
    let repaired = unsafe { pool.repair_lost() };
    assert_eq!(repaired, a.lost_free.len() + a.lost_in_channel.len(), "{a}");
    let mut again = Vec::new();
    assert!(
        pool.get_burst(&mut again, 8) > 0,
        "{a}; repaired {repaired}"
    );
    pool.put_bulk(&mut again);
}

/// Two attachments of one region in one process (DESIGN recommends one per thread). A peer
/// sets the owner word of an object attachment `a` holds back to FREE and lists its index in
/// the common ring: attachment `b` must not hand it out (that would be two live `&mut T` to
/// one object in this process). Before, the record of held objects was per attachment and
/// `b` returned the object.
#[test]
fn second_attachment_in_the_process_never_aliases_a_held_object() {
    for cache in [0u32, 8] {
        let n = name(&format!("alias{cache}"));
        let _names = Names(vec![n.clone()]);
        let a = SharedPool::<Obj>::create(&n, 64, fp(), cached(cache)).unwrap();
        let b = SharedPool::<Obj>::attach(&n, fp()).unwrap();
        let peer = Peer::open(a.path());
        // Each attachment in turn holds an object the peer forges free and lists again.
        for (holder, other) in [(&a, &b), (&b, &a)] {
            let mut held = holder.get().unwrap();
            let i = held.index();
            holder.get_mut(&mut held)[0] = 0xAAAA;
            let before = other.corrupt_entries();
            // The peer's two writes, from another thread through its own mapping.
            std::thread::scope(|s| {
                s.spawn(|| {
                    peer.owner(i).store(0, Ordering::SeqCst); // FREE
                    peer.list_in_ring(i);
                });
            });
            let mut theirs = Vec::new();
            while let Ok(mut h) = other.get() {
                assert_ne!(
                    h.index(),
                    i,
                    "cache {cache}: a second attachment handed out a held object (two live &mut T)"
                );
                other.get_mut(&mut h)[0] = 0xBBBB;
                theirs.push(h);
            }
            assert_eq!(holder.get_mut(&mut held)[0], 0xAAAA, "cache {cache}");
            assert!(
                other.corrupt_entries() > before,
                "cache {cache}: the forged entry counted"
            );
            other.put_bulk(&mut theirs);
            holder.put(held);
        }
        drop(b);
        // After b is gone, a can take every object again (b's record did not outlive it).
        let mut all = Vec::new();
        a.flush();
        let _ = a.reclaim_in_use_of_dead();
        while let Ok(h) = a.get() {
            all.push(h);
        }
        let live: HashSet<u32> = all.iter().map(|h| h.index()).collect();
        assert_eq!(live.len(), all.len(), "cache {cache}");
        a.put_bulk(&mut all);
    }
}

/// Creates a region `n` of `Obj` with `capacity`, `stride` and `cache`, mode and backing as
/// given.
fn region(n: &str, capacity: u32, stride: usize, cache: u32, regular: bool) -> SharedPool<Obj> {
    SharedPool::<Obj>::create(
        n,
        capacity,
        fp(),
        SharedOptions {
            cache_size: Some(cache),
            stride: StrideMode::Bytes(stride),
            // A regular file on /dev/shm (4 KiB pages), outliving its creator.
            unlink_on_drop: !regular,
            backing: if regular {
                SharedBackingPolicy::Require(SharedBacking::Shm)
            } else {
                SharedBackingPolicy::Auto
            },
            ..SharedOptions::default()
        },
    )
    .unwrap()
}

fn refused(r: Result<SharedPool<Obj>, PoolError>) -> PoolError {
    match r {
        Ok(p) => panic!(
            "a forged header was accepted: stride {}, capacity {}, cache {}",
            p.stride(),
            p.capacity(),
            p.cache_size()
        ),
        Err(e) => e,
    }
}

/// A peer copies the layout fields of a valid header for the same type and fingerprint but
/// another geometry over the region's header. The forgery is self-consistent, so the
/// header's own checks pass; attach must still refuse it, with a typed error naming why:
/// against this process's record of the region when the region is attached here already
/// (two attachments with different layouts of one mapping would overlap objects), and
/// against the region's real size otherwise.
#[test]
fn self_consistent_forged_header_is_refused_at_attach() {
    // Built with stride 64, capacity 1024, cache 8; the forgeries: stride 128 and capacity
    // 512 (a smaller layout that fits the file), and cache 16 (a layout whose end rounds to
    // the same file size on 4 KiB pages).
    let (n, n_big, n_cache) = (name("geo"), name("geo-src"), name("geo-cache"));
    let _names = Names(vec![n.clone(), n_big.clone(), n_cache.clone()]);
    let victim = region(&n, 1024, 64, 8, false);
    let big = region(&n_big, 512, 128, 8, false);
    let cache = region(&n_cache, 1024, 64, 16, false);
    let mut peer = Peer::open(victim.path());
    let good = peer.layout();
    for src in [&big, &cache] {
        let other = Peer::open(src.path());
        peer.copy_layout_from(&other);
        let e = refused(SharedPool::<Obj>::attach(&n, fp()));
        assert!(
            matches!(e, PoolError::LayoutMismatch { .. }),
            "forged from stride {} capacity {} cache {}: {e:?}",
            src.stride(),
            src.capacity(),
            src.cache_size()
        );
        peer.set_layout(&good);
    }
    let again = SharedPool::<Obj>::attach(&n, fp()).expect("the true header attaches");
    assert_eq!((again.stride(), again.capacity()), (64, 1024));
    drop(again);

    // No attachment of the region in this process: the file's real size refuses a layout
    // that does not end where the file does (a regular file on 4 KiB pages).
    let (r, r_src) = (name("geo-file"), name("geo-file-src"));
    let _more = Names(vec![r.clone(), r_src.clone()]);
    let built = region(&r, 1024, 64, 8, true);
    let path = built.path().to_path_buf();
    let mut peer = Peer::open(&path);
    let good = peer.layout();
    drop(built); // the file outlives it (unlink_on_drop false)
    let src = region(&r_src, 512, 128, 8, true);
    peer.copy_layout_from(&Peer::open(src.path()));
    drop(src);
    match refused(SharedPool::<Obj>::attach(&r, fp())) {
        PoolError::LayoutMismatch {
            field: "file_len",
            expected,
            found,
        } => assert!(expected < found, "{expected} {found}"),
        e => panic!("{e:?}"),
    }
    peer.set_layout(&good);
    let back = SharedPool::<Obj>::attach(&r, fp()).expect("the true header attaches");
    assert_eq!((back.stride(), back.capacity()), (64, 1024));
}

/// Held: detach and reattach in one process. An attachment dropped while it holds an object
/// releases it from the process's record (the handle it minted is unusable: any attachment
/// refuses its serial), so a peer freeing that object lets the survivor take it again, once,
/// and a new attachment joins the survivor's record each time.
#[test]
fn detach_and_reattach_keep_one_holder_per_object() {
    let n = name("reattach");
    let _names = Names(vec![n.clone()]);
    let a = SharedPool::<Obj>::create(&n, 16, fp(), cached(0)).unwrap();
    let peer = Peer::open(a.path());
    for _ in 0..3 {
        let b = SharedPool::<Obj>::attach(&n, fp()).unwrap();
        let mut hb = b.get().unwrap();
        let i = hb.index();
        b.get_mut(&mut hb)[0] = 7;
        drop(b); // hb outlives its attachment
        let r = catch_unwind(AssertUnwindSafe(|| {
            let _ = a.get_ref(&hb);
        }));
        assert!(
            r.is_err(),
            "a handle of a gone attachment reached object {i}"
        );
        peer.owner(i).store(0, Ordering::SeqCst); // FREE
        peer.list_in_ring(i);
        let mut all = Vec::new();
        while let Ok(h) = a.get() {
            all.push(h);
        }
        let got: Vec<u32> = all.iter().map(|h| h.index()).collect();
        assert_eq!(
            got.iter().filter(|&&k| k == i).count(),
            1,
            "object {i} once: {got:?}"
        );
        a.put_bulk(&mut all);
    }
}

/// A peer writes an owner word whose holder byte is 0 (no process slot: neither free, nor in
/// a channel, nor a slot's): `audit` still completes, in debug builds too (the holder's cache
/// number was computed in a `u8` that overflowed), and does not count the object as held by a
/// cache it is not in.
#[test]
fn audit_of_an_owner_word_naming_no_slot_completes() {
    let names = Names(vec![name("audit-no-slot")]);
    let p = SharedPool::<Obj>::create(&names.0[0], 8, fp(), cached(0)).unwrap();
    let h = p.get().unwrap();
    let peer = Peer::open(p.path());
    peer.owner(1).store(0x100, Ordering::SeqCst);
    let a = catch_unwind(AssertUnwindSafe(|| p.audit())).expect("audit panicked");
    assert_eq!(a.held_and_cached, 0, "{a}");
    p.put(h);
}
