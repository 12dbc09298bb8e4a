//! Unit tests of the cache: the algorithm under every policy, the owner token, the layout.

use super::*;
use crate::ring::{Ring, RingFlags};

/// A cache and its ring owned by one test thread: the owner contract holds trivially.
struct Owned {
    r: Ring<u32>,
    c: Box<Cache<u32>>,
}

impl Owned {
    fn new(total: u32, size: u32, policy: FlushPolicy) -> Self {
        let exact = RingFlags {
            exact_size: true,
            ..Default::default()
        };
        let r = Ring::new(total, exact).unwrap();
        let all: Vec<u32> = (0..total).collect();
        assert!(r.enqueue_bulk(&all));
        Owned {
            r,
            c: Cache::new(size, policy),
        }
    }
    fn cm(&self) -> CacheMut<'_, u32> {
        // SAFETY: single-threaded owner; one token at a time (each helper makes its own).
        unsafe { CacheMut::new(NonNull::from(&*self.c), &self.r) }
    }
    fn get(&self, n: usize) -> Result<Vec<u32>, usize> {
        let mut v = vec![MaybeUninit::uninit(); n];
        self.cm().get(&mut v, Behavior::Bulk)?;
        // SAFETY: a successful bulk get wrote all n.
        Ok(v.into_iter().map(|e| unsafe { e.assume_init() }).collect())
    }
    fn put(&self, v: &[u32]) {
        self.cm().put(v);
    }
    fn get_one(&self) -> Option<u32> {
        self.get(1).ok().map(|v| v[0])
    }
    fn put_one(&self, e: u32) {
        self.put(&[e])
    }
    fn flush(&self) {
        self.cm().flush()
    }
}

/// The run-time pool's put: the identity check fused into the fast path's copy,
/// and made before anything moves on the slow path. A failing entry changes nothing.
#[test]
fn put_checked_moves_nothing_when_an_entry_fails() {
    let o = Owned::new(200, 8, FlushPolicy::Dpdk2607);
    // rank = the entry itself, span 100: entries >= 100 are "foreign".
    let rank = |e: u32| e;
    let mut cm = o.cm();
    for n in [1usize, 2, 3, 4, 5, 8, 9, 16, 17, 32, 33, 64, 65, 100] {
        let ring_before = o.r.count();
        let len_before = cm.len();
        let mut src: Vec<u32> = (0..n as u32).collect();
        *src.last_mut().unwrap() = 150; // the last one is foreign
        assert_eq!(cm.put_checked(&src, rank, 100), Put::Foreign, "n = {n}");
        assert_eq!(
            (cm.len(), o.r.count()),
            (len_before, ring_before),
            "n = {n}"
        );
    }
    // A good put of each shape goes through (fast path, then the slow path's flush).
    let mut got = vec![MaybeUninit::uninit(); 8];
    cm.get(&mut got, Behavior::Bulk).unwrap();
    // SAFETY: a successful bulk get wrote all 8.
    let got: Vec<u32> = got
        .into_iter()
        .map(|e| unsafe { e.assume_init() })
        .collect();
    let (small, rest) = got.split_at(1);
    assert_ne!(cm.put_checked(small, |e| e % 200, 200), Put::Foreign);
    assert_ne!(cm.put_checked(rest, |e| e % 200, 200), Put::Foreign);
    let _ = cm.len(); // the token published its length on every put
    o.flush();
    assert_eq!(o.r.count(), 200, "every entry home");
}

#[test]
fn caches_are_two_cache_lines_apart() {
    // Each thread's cache (written on every operation) on its own line pair.
    let pair = 2 * CACHE_LINE;
    assert!(std::mem::align_of::<Cache<u32>>() >= pair);
    let boxes: Vec<Box<Cache<u32>>> = (0..4)
        .map(|_| Cache::new(4, FlushPolicy::DEFAULT))
        .collect();
    for b in &boxes {
        assert_eq!(&**b as *const Cache<u32> as usize % pair, 0);
    }
}

#[test]
fn validation_follows_dpdk() {
    assert!(FlushPolicy::Classic.validate(513, 10_000).is_err());
    assert!(FlushPolicy::Classic.validate(512, 767).is_err());
    assert!(FlushPolicy::Classic.validate(512, 768).is_ok());
    assert!(FlushPolicy::Dpdk2607.validate(512, 511).is_err());
    assert!(FlushPolicy::Dpdk2607.validate(512, 512).is_ok());
    assert!(FlushPolicy::SizeAligned.validate(512, 512).is_ok());
    for p in FlushPolicy::ALL {
        assert_eq!(FlushPolicy::from_name(p.name()), Some(p));
    }
}

#[test]
fn lifo_order_single() {
    let o = Owned::new(100, 16, FlushPolicy::Dpdk2607);
    o.put_one(1000);
    o.put_one(1001);
    assert_eq!(o.get_one(), Some(1001));
    assert_eq!(o.get_one(), Some(1000));
}

#[test]
fn every_policy_conserves_and_respects_its_limit() {
    for policy in FlushPolicy::ALL {
        for size in [0u32, 1, 2, 7, 32] {
            let total = 200;
            let o = Owned::new(total, size, policy);
            let mut held: Vec<u32> = Vec::new();
            let mut rng = 12345u64;
            for _ in 0..2000 {
                rng = rng
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let n = 1 + (rng >> 33) as usize % 40;
                if (rng >> 20) & 1 == 0 {
                    match o.get(n) {
                        Ok(v) => held.extend(v),
                        Err(avail) => {
                            assert!(avail < n, "{policy} size {size}: spurious failure")
                        }
                    }
                } else {
                    let k = n.min(held.len());
                    let src: Vec<u32> = held.split_off(held.len() - k);
                    o.put(&src);
                }
                assert!(
                    o.c.len() <= o.c.fill_limit() as usize,
                    "{policy} size {size}"
                );
                assert_eq!(o.c.len() + o.r.count() + held.len(), total as usize);
            }
            o.flush();
            let mut seen: Vec<u32> = held;
            let mut all = vec![0u32; o.r.count()];
            // SAFETY: `all` has room for every entry.
            let got = unsafe {
                o.r.dequeue_raw(all.as_mut_ptr(), all.len(), Behavior::Bulk)
                    .n
            };
            seen.extend(&all[..got]);
            seen.sort_unstable();
            assert_eq!(seen, (0..total).collect::<Vec<_>>(), "{policy} size {size}");
        }
    }
}

#[test]
fn get_never_fails_while_cache_and_ring_hold_enough() {
    for policy in FlushPolicy::ALL {
        let o = Owned::new(64, 32, policy);
        let v = o.get(20).unwrap();
        o.put(&v);
        let all = o
            .get(64)
            .unwrap_or_else(|a| panic!("{policy}: failed, avail {a}"));
        assert_eq!(all.len(), 64);
        assert_eq!(o.get(1), Err(0));
    }
}

#[test]
fn dpdk2607_flush_evicts_the_coldest_half() {
    let o = Owned::new(100, 8, FlushPolicy::Dpdk2607);
    let cold = o.get(4).unwrap();
    let hot = o.get(4).unwrap();
    o.flush();
    o.put(&cold);
    o.put(&hot);
    assert_eq!(o.c.len(), 8);
    let extra = o.r.count();
    let one = o.get(1); // served from the cache: the hottest
    assert_eq!(one, Ok(vec![hot[3]]));
    o.put_one(hot[3]);
    o.put_one(99); // 9th object: flushes the 4 coldest
    assert_eq!(o.c.entries(), &[hot[0], hot[1], hot[2], hot[3], 99]);
    assert_eq!(o.r.count(), extra + 4);
}

#[test]
fn classic_flushes_everything_when_crossing_the_threshold() {
    let o = Owned::new(100, 8, FlushPolicy::Classic);
    let v = o.get(12).unwrap();
    o.flush();
    o.put(&v); // 12 == 1.5 x 8: at the threshold, no flush
    assert_eq!(o.c.len(), 12);
    let before = o.r.count();
    let w = o.get(1).unwrap();
    o.put(&w);
    assert_eq!(o.c.len(), 12);
    // One more crosses the threshold: the whole cache goes, the new object stays.
    let y = {
        let mut v = vec![0u32; 1];
        // SAFETY: owner; direct ring dequeue of one entry.
        unsafe { o.r.dequeue_raw(v.as_mut_ptr(), 1, Behavior::Bulk) };
        v
    };
    o.put(&y);
    assert_eq!(o.c.len(), 1);
    assert_eq!(o.r.count(), before - 1 + 12);
}
